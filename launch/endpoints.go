package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"golang.org/x/oauth2/google"

	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/internal/cli"
	"github.com/sensorpipe/sensorpipe/pipelines"
	"github.com/sensorpipe/sensorpipe/schemas/bqschema"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

// The local BigQuery Storage emulator's address (scripts/emulators.sh,
// make env).
const localBigQueryStorageHost = "127.0.0.1:9060"

// checkBigQueryNames refuses, before any call, a dataset or table name that
// BigQuery would refuse: a usage error naming the flag.
func checkBigQueryNames(cfg pipelines.Config) error {
	if bq := cfg.BigQuery; bq != nil {
		if err := bqschema.CheckBigQueryDataset(bq.Dataset); err != nil {
			return cli.Usage(fmt.Errorf("--bigquery_dataset: %w", err))
		}
		for i, t := range cfg.Spec.BigQueryTables() {
			name, where := t.Table, "spec "+cfg.Spec.Name+" bigquery table"
			if i == 0 {
				name, where = bq.Table, "--bigquery_table"
			}
			if err := bqschema.CheckBigQueryTable(name); err != nil {
				return cli.Usage(fmt.Errorf("%s: %w", where, err))
			}
		}
	}
	if dl := cfg.DeadLetter; dl.Kind == targets.DeadLetterBigQuery {
		if err := bqschema.CheckBigQueryDataset(dl.Dataset); err != nil {
			return cli.Usage(fmt.Errorf("--dead_letter: %w", err))
		}
		if err := bqschema.CheckBigQueryTable(dl.Table); err != nil {
			return cli.Usage(fmt.Errorf("--dead_letter: %w", err))
		}
	}
	return nil
}

// endpoint is a Google Cloud service the job will call.
type endpoint struct {
	name, host string
}

// checkEndpoints runs first in the preflight, before any call: each
// service the job reaches goes either to its emulator or to Google Cloud
// with credentials. A BigQuery emulator set for one API and not the other,
// or missing credentials, would otherwise surface in the workers as a
// failed bundle per stage; here it is one line naming the variable or the
// endpoint and the fix.
func checkEndpoints(ctx context.Context, cfg pipelines.Config, p plan) error {
	rest, restSet := cli.Emulator(bigqueryio.EmulatorHostEnv)
	storage, storageSet := cli.Emulator(bigqueryio.StorageEmulatorHostEnv)
	storageWrites := cfg.BigQuery != nil && cfg.BigQuery.WriteMethod != bigqueryio.WriteInsertAll
	storageReads := p.batch.FromBigQuery != nil
	switch {
	case storageReads && restSet && !storageSet:
		return fmt.Errorf("%s is not set while %s=%s is: --source=bigquery would read through bigquerystorage.googleapis.com:443 without credentials; export %s=%s (eval \"$(make env)\" sets every emulator variable)",
			bigqueryio.StorageEmulatorHostEnv, bigqueryio.EmulatorHostEnv, rest, bigqueryio.StorageEmulatorHostEnv, localBigQueryStorageHost)
	case storageReads && storageSet && !restSet:
		return fmt.Errorf("%s is not set while %s=%s is: --from_table would be checked at bigquery.googleapis.com without credentials; export %s=%s (eval \"$(make env)\" sets every emulator variable)",
			bigqueryio.EmulatorHostEnv, bigqueryio.StorageEmulatorHostEnv, storage, bigqueryio.EmulatorHostEnv, cli.LocalBigQueryHost)
	case storageWrites && restSet && !storageSet:
		return fmt.Errorf("%s is not set while %s=%s is: the BigQuery sink's Storage Write API would go to bigquerystorage.googleapis.com:443 without credentials; export %s=%s (eval \"$(make env)\" sets every emulator variable)",
			bigqueryio.StorageEmulatorHostEnv, bigqueryio.EmulatorHostEnv, rest, bigqueryio.StorageEmulatorHostEnv, localBigQueryStorageHost)
	case cfg.BigQuery != nil && storageSet && !restSet:
		return fmt.Errorf("%s is not set while %s=%s is: the BigQuery tables would be checked at bigquery.googleapis.com without credentials; export %s=%s (eval \"$(make env)\" sets every emulator variable)",
			bigqueryio.EmulatorHostEnv, bigqueryio.StorageEmulatorHostEnv, storage, bigqueryio.EmulatorHostEnv, cli.LocalBigQueryHost)
	}
	var cloud []endpoint
	if _, ok := cli.Emulator(cli.BigtableEmulatorEnv); !ok {
		cloud = append(cloud, endpoint{"Bigtable", "bigtable.googleapis.com:443"})
	}
	if (cfg.BigQuery != nil || storageReads || cfg.DeadLetter.Kind == targets.DeadLetterBigQuery) && !restSet {
		cloud = append(cloud, endpoint{"BigQuery", "bigquery.googleapis.com:443"})
	}
	if storageWrites && !storageSet {
		cloud = append(cloud, endpoint{"BigQuery Storage Write", "bigquerystorage.googleapis.com:443"})
	}
	if storageReads && !storageSet {
		cloud = append(cloud, endpoint{"BigQuery Storage Read", "bigquerystorage.googleapis.com:443"})
	}
	if _, ok := cli.Emulator(cli.PubSubEmulatorEnv); !ok && (p.streaming || cfg.DeadLetter.Kind == targets.DeadLetterPubSub) {
		cloud = append(cloud, endpoint{"Pub/Sub", "pubsub.googleapis.com:443"})
	}
	if strings.HasPrefix(p.batch.Input, "gs://") || strings.HasPrefix(cfg.DeadLetter.Path, "gs://") {
		cloud = append(cloud, endpoint{"Cloud Storage", "storage.googleapis.com:443"})
	}
	if len(cloud) == 0 {
		return nil
	}
	if _, err := google.FindDefaultCredentials(ctx); err != nil {
		names := make([]string, len(cloud))
		for i, e := range cloud {
			names[i] = e.name + " (" + e.host + ")"
		}
		hint := ""
		if os.Getenv(cli.BigtableEmulatorEnv) == "" && p.runner.local() {
			hint = `; for the local emulators instead, eval "$(make env)"`
		}
		return fmt.Errorf("no Google Cloud credentials for %s: run `gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS%s",
			strings.Join(names, ", "), hint)
	}
	return nil
}
