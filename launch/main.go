// Command launch runs sensorpipe: it reads sensor readings from files (a
// historical re-ingestion batch) or Pub/Sub (a stream), validates them,
// builds Bigtable row keys by field promotion, windows them by event-time
// hour, and writes Bigtable, BigQuery and a dead letter.
//
// It runs on prism by default; --runner=direct, --runner=dataflow and
// --runner=universal --endpoint=HOST:PORT (any Beam job server: prism's,
// Flink's, Spark's) work too. Every local run ends with a ledger of its records (read, built,
// merged, rejected, and per sink table routed, written, dead-lettered)
// read from the runner's counters, which must balance.
//
// Exit codes:
//
//	0  the job ran and its ledger balances (bad records may have been
//	   dead-lettered, with their reasons);
//	1  the job or its set-up failed (e.g. Bigtable unreachable at launch),
//	   or its ledger does not balance, or a batch read no record from the
//	   files its --input matched at launch (its workers did not see them),
//	   or a batch rejected every record it read (unless
//	   --allow_all_rejected);
//	2  bad flags;
//	3  the job ran and its ledger balances, but a store stayed unavailable
//	   past --write_retry_deadline: the records it did not take are in the
//	   dead letter as write_failed; the message gives the command that
//	   replays them (docs/guide/replay.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beamlog "github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"

	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/dofns/bigtableio/flowcontrol"
	"github.com/sensorpipe/sensorpipe/dofns/deadletterio"
	"github.com/sensorpipe/sensorpipe/dofns/fileio"
	"github.com/sensorpipe/sensorpipe/dofns/pubsubio"
	"github.com/sensorpipe/sensorpipe/internal/cli"
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/launch/parts"
	"github.com/sensorpipe/sensorpipe/pipelines"
	"github.com/sensorpipe/sensorpipe/schemas"
)

var (
	source         = flag.String("source", "files", "Where readings come from: files (a batch over --input) or pubsub (a stream from --subscription).")
	input          = flag.String("input", "", "With --source=files: a file glob, local or gs://; .gz files are decompressed. Example: 'testdata/*.jsonl'. A local glob is made absolute, and refused on a runner whose workers cannot see this machine's disk (Dataflow, DOCKER, a remote job server's).")
	specFlag       = flag.String("spec", schemas.DefaultSpecName(), "Dataset spec: a built-in name ("+strings.Join(schemas.BuiltinSpecNames(), ", ")+") or a path to a YAML file.")
	btProject      = flag.String("bigtable_project", "", "Bigtable project id (required; with BIGTABLE_EMULATOR_HOST set it defaults to local-project, the project make run writes).")
	btInstance     = flag.String("bigtable_instance", "", "Bigtable instance id (required; with BIGTABLE_EMULATOR_HOST set it defaults to local-instance).")
	btAppProfile   = flag.String("bigtable_app_profile", "", "Bigtable app profile the writes use (default: the instance's default profile). Give backfills a single-cluster profile of their own so they do not slow serving reads.")
	btMaxMuts      = flag.Int64("bigtable_max_outstanding_mutations", bigtableio.DefaultFlow.MaxMutations, "Flow control: the most Bigtable mutations (cells written or deleted) in flight per worker process; further writes wait (0: no cap).")
	btMaxBytes     = flag.Int64("bigtable_max_outstanding_bytes", bigtableio.DefaultFlow.MaxBytes, "Flow control: the most Bigtable request bytes in flight per worker process; further writes wait (0: no cap).")
	btLatency      = flag.Duration("bigtable_target_latency", 0, "Flow control: a MutateRows latency to steer toward; the per-worker mutation cap then adapts between 1% and 100% of --bigtable_max_outstanding_mutations as Bigtable slows or recovers (0: off). RESOURCE_EXHAUSTED always cuts the cap and pauses writes.")
	btTable        = flag.String("bigtable_table", "", "Bigtable table for the spec's first table (default: the name the spec gives it).")
	deadLetter     = flag.String("dead_letter", "", "Where rejected records go, each with its payload and reason (required): "+schemas.DeadLetterTargetForms+".")
	createTables   = flag.Bool("create_tables", true, "Create missing Bigtable tables and column families (with the spec's GC policies) before running.")
	timeout        = flag.Duration("startup_timeout", 30*time.Second, "How long the start-up checks (Bigtable tables, BigQuery tables, the dead-letter target, the subscription) may take in all; transient errors are retried within it.")
	btTimeout      = flag.Duration("bigtable_timeout", 0, "Deprecated: use --startup_timeout.")
	retryDeadline  = flag.Duration("write_retry_deadline", retry.DefaultDeadline, "How long a write to Bigtable, BigQuery or the dead letter is retried while its store fails transiently (UNAVAILABLE, timeouts, quota). Past it, the records go to the dead letter as write_failed and the run exits 3.")
	summaryJSON    = flag.String("summary_json", "", "Also write the run's ledger (the summary's figures) as JSON to this file.")
	attemptTimeout = flag.Duration("write_attempt_timeout", retry.DefaultAttemptTimeout, "The longest one write call (an ApplyBulk batch, an AppendRows or insertAll request) may wait for its answer before it is abandoned and retried, within --write_retry_deadline. Each attempt's own timeout comes from the latency of the calls that answered: 4x their p99, at least 1s (5s until 16 have answered), doubled for each retry of the call, at most this.")
	maxLineBytes   = flag.Int("max_line_bytes", schemas.DefaultMaxLineBytes, "Longest reading, in bytes: an input line, or one reading of a Pub/Sub message (an NDJSON line, a JSON array's element, a protobuf batch's element; a message itself may be as large as Pub/Sub takes, 10 MB). Default 1 MiB, a tenth of a Bigtable cell's limit. A longer line goes to the dead letter as too_large with its first 1 KiB, and is never held whole in memory, but keeps its offset, length and sha256 in its file, so that a replay (--format=deadletter) with a larger --max_line_bytes reads it back; a longer reading of a message goes whole, and the message's other readings land.")
	maxUnzipped    = flag.Int64("max_decompressed_message_bytes", schemas.DefaultMaxDecompressedBytes, "Largest size a gzip Pub/Sub message (one starting with gzip's magic bytes, or with the attribute content-encoding: gzip) may decompress to, in bytes (default 64 MiB), against zip bombs; a larger one, or a corrupt one, goes to the dead letter whole (too_large, malformed).")
	btBatchCells   = flag.Int("bigtable_batch_cells", bigtableio.DefaultBatchCells, "Cells per Bigtable ApplyBulk batch (the client sends a batch as MutateRows requests of at most 100,000 mutations); up to 4 batches are in flight per bundle, and in a batch at most 4 batches' cells per worker process, whatever the bundles it runs side by side.")
	bqReqBytes     = flag.Int("bigquery_request_bytes", bigqueryio.DefaultBQRequestBytes, "Bytes of rows per BigQuery AppendRows or insertAll request (BigQuery's limit is 10 MB).")
	bqBufBytes     = flag.Int("bigquery_buffer_bytes", bigqueryio.DefaultBQBufferedBytes, "Memory each BigQuery Storage Write writer (one per worker thread) gives to rows BigQuery has not yet acknowledged: their encodings and the records kept for their dead letters. AppendRows requests are cut smaller to fit 8 in flight; a stream's hour closing sends all of the hour's readings at once.")
	bqProject      = flag.String("bigquery_project", "", "BigQuery project (default: --bigtable_project when given; with BIGQUERY_EMULATOR_HOST set, local-project).")
	bqDataset      = flag.String("bigquery_dataset", "", "BigQuery dataset; empty turns the BigQuery sink off.")
	bqTable        = flag.String("bigquery_table", "", "BigQuery table (default: the one the spec's bigquery section names).")
	bqMethod       = flag.String("bigquery_write_method", bigqueryio.DefaultWriteMethod, "upsert: Storage Write API default stream with change data capture (_CHANGE_TYPE=UPSERT on the spec's primary key): one row per reading, the newest winning; storage_write: the same stream without CDC (at least once); insert_all: tabledata.insertAll with insertId = reading_id (best-effort dedup).")
	printRows      = flag.Int("print_rows", 0, "After a local batch run, print this many rows of the first table.")
	logLevel       = flag.String("log_level", "warn", "Runner and SDK log level: debug, info, warn or error.")
	localPartMB    = flag.Float64("local_part_mb", 64, "A local batch (prism, direct) whose input is larger than this many MB runs as parts of about this size, one job after another, so that its memory is bounded by a part rather than by the input (prism holds every reading of a job until the job's input is read). The input is scanned once first. Parts are cut between hours where no hour read before has a reading after (input in rough event-time order splits at almost every hour); a part still larger (an hour larger than this, or shuffled input, whose hours overlap throughout) splits into shares of its identities, each reading the part's bytes and keeping the readings of its identities. Every identity's hour is built in one part, so the result is the one job's. 0: always one job. Dataflow runs one job.")
	progressIval   = flag.Duration("progress_interval", 5*time.Second, "How often a local run prints progress (0 turns it off).")
	dryRunOut      = flag.String("dry_run_out", "", "With --runner=dataflow --dry_run: write the full Dataflow job (JSON, with its Beam pipeline graph under \"beamPipeline\") to this file; stdout gets a short summary.")
	format         = flag.String("format", "json", "Payload format of the input lines or messages: json, or proto (the protobuf message the spec declares in its proto: section; see schemas.FormatNames); deadletter replays dead letters: each line or message is a dead-letter record whose payload is read as --replay_payload_format (see docs/guide/replay.md).")
	replayReason   = flag.String("replay_reason", "", "With --format=deadletter: replay only the dead letters with these reasons, comma-separated (e.g. write_failed); empty: every reason.")
	replaySink     = flag.String("replay_sink", "", "With --format=deadletter: replay only the dead letters of these sinks, comma-separated (parse, window, bigtable, bigquery, bigquery_rollups); empty: every sink. A write's dead letter (bigtable, bigquery, bigquery_rollups) is written to that sink only.")
	replayPayload  = flag.String("replay_payload_format", "json", "With --format=deadletter: the format of the dead letters' payloads (json or proto).")
	allowRejected  = flag.Bool("allow_all_rejected", false, "A batch that read records and rejected every one exits 0 rather than 1 (e.g. a replay of dead letters known to fail again). Without it such a run fails with its top reasons and their likely cause: a wrong --format, a wrong --spec, or the unit of the timestamps.")
	mergeStored    = flag.Bool("merge_stored", true, "A batch reads each sensor-hour it writes back from Bigtable and builds it with the readings earlier runs stored there, so that batches that split an hour, in any order, or a batch after a stream, leave what one batch over all the readings leaves; a stream does the same at each hour's on-time and late firings, so that streams sharing a subscription, or a drain-and-replace update, leave what one batch leaves. false builds each hour from the run's own readings only (a backfill into empty tables skips one read per sensor-hour).")

	// Stream flags (--source=pubsub).
	localStateOnDisk = flag.Bool("local_state_on_disk", true, "With --source=pubsub on any runner but Dataflow: keep each sensor-hour's state (its readings, held for the hour's final firings and then for --allowed_lateness, a day by default) in files in the run's temp folder instead of memory, about 32 bytes a vitals reading, so that the stream's memory does not grow with its readings. The files go when their hour expires, and with the run (on a job server, with the worker process). false keeps the state in memory. Ignored on Dataflow, whose state is not in the workers' memory.")
	subscription     = flag.String("subscription", "", "With --source=pubsub: the subscription, projects/P/subscriptions/S (required). PUBSUB_EMULATOR_HOST is honoured on prism and direct.")
	timestampAttr    = flag.String("timestamp_attribute", "", "With --source=pubsub: the message attribute holding the time a message was sent (epoch ms or RFC 3339). Locally it sets the watermark (empty: the publish time); on both runners each reading keeps its payload's event time, and a missing, unparseable or disagreeing attribute (the spec's timestamp_attribute_tolerance) is counted in the ledger.")
	idAttr           = flag.String("id_attribute", "", "With --source=pubsub: a message attribute with a unique record id, for deduplicating redeliveries.")
	earlyFiring      = flag.Duration("early_firing", pipelines.DefaultEarlyFiring, "With --source=pubsub: how often an open hour fires early (processing time).")
	lateFiring       = flag.Duration("late_firing", pipelines.DefaultLateFiring, "With --source=pubsub: how long after a late reading its hour fires again.")
	allowedLateness  = flag.Duration("allowed_lateness", pipelines.DefaultAllowedLateness, "With --source=pubsub: how long after its end an hour still takes late readings; later ones go to the dead letter as too_late.")
	ackDeadline      = flag.Duration("pubsub_ack_deadline", 0, "With --source=pubsub on any runner but Dataflow: the lease kept on messages until their bundle commits (10s..600s; 0: "+pubsubio.DefaultAckDeadline.String()+"). After a crash, unacknowledged messages return this long after.")
)

// streamFlags are the flags that only apply to --source=pubsub.
var streamFlags = []string{"subscription", "timestamp_attribute", "id_attribute", "early_firing", "late_firing", "allowed_lateness", "pubsub_ack_deadline", "local_state_on_disk"}

// exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
	// exitUnavailable: the job ran and its ledger balances, but a store
	// stayed unavailable and records were dead-lettered for it.
	exitUnavailable = 3
)

// usageError is a bad flag or flag combination: the one usage error type of
// every sensorpipe command (internal/cli), so a usage error from cli (e.g.
// cli.Bigtable's) exits 2 whether or not the launcher wraps it again.
type usageError = cli.UsageError

// usagef is a usageError formatted like fmt.Errorf (%w keeps the chain).
func usagef(format string, args ...any) error { return cli.Usagef(format, args...) }

// exitError ends the run with its code after the run has reported itself.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

func main() {
	flag.CommandLine.Init(os.Args[0], flag.ContinueOnError)
	flag.CommandLine.SetOutput(io.Discard)
	if err := flag.CommandLine.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			flag.CommandLine.SetOutput(os.Stdout)
			fmt.Println("Usage: go run ./launch --source=files --input=GLOB --bigtable_project=P --bigtable_instance=I --dead_letter=DIR [flags]")
			fmt.Println("       go run ./launch --source=pubsub --subscription=projects/P/subscriptions/S --timestamp_attribute=event_ts \\")
			fmt.Println("           --bigtable_project=P --bigtable_instance=I --dead_letter=DIR [flags]   (runs until interrupted)")
			fmt.Println()
			fmt.Println(cli.DefaultsHelp)
			fmt.Println()
			fmt.Println("Exit codes: 0 the job ran and its ledger balances, 1 the job or its set-up failed (or a batch rejected every record), 2 bad flags,")
			fmt.Println("3 a store stayed unavailable past --write_retry_deadline (see the package doc).")
			fmt.Println()
			flag.PrintDefaults()
			os.Exit(exitOK)
		}
		fail(exitUsage, fmt.Errorf("%w (see --help)", err))
	}
	switch *logLevel {
	case "debug", "info", "warn", "error":
		beamlog.LogLevel = *logLevel
	default:
		fail(exitUsage, fmt.Errorf("--log_level=%q: use debug, info, warn or error", *logLevel))
	}
	beam.Init()
	quietenKnownNoise()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fail(exitCode(err), err)
	}
}

// exitCode is the exit code for run's error: a usage error (anywhere in the
// chain) 2, an exitError its code, anything else, a failure to build the
// pipeline or to run it among them, 1.
func exitCode(err error) int {
	var ue usageError
	var ee exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		return exitUsage
	}
	return exitFailed
}

func fail(code int, err error) {
	fmt.Fprintf(os.Stderr, "sensorpipe: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
	os.Exit(code)
}

func runnerName() string {
	if *runners.Runner == "" {
		return "prism"
	}
	return *runners.Runner
}

// local reports whether the job runs in the launcher's own process: on
// direct, or on prism with no --endpoint (the launcher serves prism's job
// service itself). Only a local batch runs in parts (--local_part_mb).
func local() bool {
	switch runnerName() {
	case "direct", "DirectRunner":
		return true
	case "prism", "PrismRunner":
		return *jobopts.Endpoint == ""
	}
	return false
}

// dataflow reports whether the runner is Dataflow, the one runner that
// runs pubsubio and keeps a stream's state outside the workers' memory.
func dataflow() bool {
	switch runnerName() {
	case "dataflow", "DataflowRunner":
		return true
	}
	return false
}

// jobServer reports whether the runner submits the job to a Beam job
// service (prism's, a Flink, Spark or Samza job server, any --endpoint),
// which the launcher polls for the job's state and counters.
func jobServer() bool {
	switch runnerName() {
	case "prism", "PrismRunner", "universal", "portable", "PortableRunner", "flink", "FlinkRunner", "spark", "SparkRunner", "samza", "SamzaRunner":
		return true
	}
	return false
}

// workersSeeDisk reports whether the job's workers read and write the
// launcher's own disk: they run in the launcher (direct, LOOPBACK, prism
// with no --endpoint and no --environment_type), or as processes of a job
// server on this machine (--environment_type=PROCESS with no --endpoint or
// a loopback one). Dataflow's workers, containers (DOCKER) and a remote
// job server's processes do not.
func workersSeeDisk() bool {
	if runnerName() == "direct" || runnerName() == "DirectRunner" {
		return true
	}
	if !jobServer() {
		return false
	}
	switch strings.ToLower(environmentType()) {
	case "loopback":
		return true
	case "process":
		return *jobopts.Endpoint == "" || loopbackEndpoint(*jobopts.Endpoint)
	}
	return false
}

// environmentType is --environment_type, or what the launcher defaults it
// to: LOOPBACK on prism (as prism.Execute does), Beam's DOCKER elsewhere.
func environmentType() string {
	if *jobopts.EnvironmentType == "" && (runnerName() == "prism" || runnerName() == "PrismRunner") {
		return "loopback"
	}
	if *jobopts.EnvironmentType == "" {
		return "docker"
	}
	return *jobopts.EnvironmentType
}

// loopbackEndpoint reports whether a job server's HOST:PORT is on this
// machine: localhost, a loopback or unspecified address, or its host name.
func loopbackEndpoint(endpoint string) bool {
	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		host = endpoint
	}
	if host == "localhost" {
		return true
	}
	if name, err := os.Hostname(); err == nil && strings.EqualFold(host, name) {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsUnspecified())
}

// remoteDiskError is the one-line refusal of a local path that the job's
// workers cannot see.
func remoteDiskError(flagName, value string) error {
	how := "--runner=" + runnerName()
	if jobServer() {
		how += " --environment_type=" + strings.ToUpper(environmentType())
		if *jobopts.Endpoint != "" {
			how += " --endpoint=" + *jobopts.Endpoint
		}
	}
	return usagef("%s=%s is on this machine's disk, which the workers of %s cannot see: give a gs:// path (gs://BUCKET/...)", flagName, value, how)
}

// localPath reports whether a file path or glob is on the local disk (not
// gs:// or another file system's scheme).
func localPath(path string) bool {
	return !strings.Contains(path, "://")
}

// graph is the graph the flags describe: a batch's options, or a
// stream's.
type graph struct {
	batch  pipelines.BatchOptions
	stream pipelines.StreamOptions
}

// streaming reports whether the flags describe a stream.
func streaming() bool { return *source == "pubsub" }

// config validates the flags and builds the pipeline configuration and the
// graph's options: each flag is parsed here, once.
func config(ctx context.Context) (cfg pipelines.Config, g graph, err error) {
	if flag.NArg() > 0 {
		return cfg, g, usagef("unexpected argument %q: every option is a --flag", flag.Arg(0))
	}
	if jobServer() && runnerName() != "prism" && runnerName() != "PrismRunner" && *jobopts.Endpoint == "" {
		return cfg, g, usagef("--runner=%s submits to a Beam job server: give its --endpoint=HOST:PORT", runnerName())
	}
	spec, err := cli.LoadSpec(*specFlag)
	if err != nil {
		return cfg, g, usagef("--spec: %w", err)
	}
	if *btTable != "" {
		if err := spec.RenameTable(spec.Bigtable.Tables[0].Name, *btTable); err != nil {
			return cfg, g, cli.Usage(err)
		}
	}
	btGiven := *btProject // as given: a defaulted one is no BigQuery default
	project, instance, err := cli.Bigtable(*btProject, *btInstance)
	if err != nil {
		return cfg, g, cli.Usage(err)
	}
	*btProject, *btInstance = project, instance
	if *btMaxMuts < 0 || *btMaxBytes < 0 || *btLatency < 0 {
		return cfg, g, usagef("--bigtable_max_outstanding_mutations, --bigtable_max_outstanding_bytes and --bigtable_target_latency must not be negative (0 turns each off)")
	}
	dlProject := *bqProject
	if dlProject == "" {
		dlProject = *btProject
	}
	if *bqDataset != "" {
		if *bqProject, err = cli.BigQueryProject(*bqProject, btGiven); err != nil {
			return cfg, g, cli.Usage(err)
		}
		dlProject = *bqProject
	}
	dl, err := validateDeadLetter(*deadLetter, dlProject, workersSeeDisk())
	if err != nil {
		return cfg, g, cli.Usage(err)
	}
	if w := deadletterio.Limits(dl); w != "" {
		fmt.Fprintf(os.Stderr, "sensorpipe: warning: %s\n", w)
	}
	if dl.Kind == schemas.DeadLetterFiles && localPath(dl.Path) {
		// The workers may run in another working directory: they get
		// the folder the preflight creates and the summary names.
		if dl.Path, err = filepath.Abs(dl.Path); err != nil {
			return cfg, g, usagef("--dead_letter=%s: %w", *deadLetter, err)
		}
	}
	payloadFormat := *format
	var replay *pipelines.Replay
	if *format == formatDeadLetter {
		payloadFormat = *replayPayload
		if replay, err = replayFilter(); err != nil {
			return cfg, g, err
		}
	} else if isSet("replay_reason") || isSet("replay_sink") || isSet("replay_payload_format") {
		return cfg, g, usagef("--replay_reason, --replay_sink and --replay_payload_format apply to --format=deadletter only")
	}
	opts := schemas.CompileOptions{Format: payloadFormat}
	if *bqDataset != "" {
		// A partitioned table takes event times within a window around
		// the run's start; the spec's range is narrowed to it.
		opts.BigQueryAt = time.Now().UnixMilli()
	}
	compiled, err := schemas.Compile(spec, opts)
	switch {
	case errors.Is(err, schemas.ErrFormat):
		return cfg, g, usagef("--format: %w", err)
	case err != nil:
		return cfg, g, usagef("--spec: %w", err)
	}
	if *retryDeadline <= 0 {
		return cfg, g, usagef("--write_retry_deadline=%v: give a positive duration such as 2m", *retryDeadline)
	}
	if *attemptTimeout <= 0 {
		return cfg, g, usagef("--write_attempt_timeout=%v: give a positive duration such as 30s", *attemptTimeout)
	}
	if *maxLineBytes < 1<<10 || *maxLineBytes > 100<<20 {
		return cfg, g, usagef("--max_line_bytes=%d: give 1024..104857600", *maxLineBytes)
	}
	if *maxUnzipped < 1<<20 || *maxUnzipped > 1<<30 {
		return cfg, g, usagef("--max_decompressed_message_bytes=%d: give 1048576..1073741824", *maxUnzipped)
	}
	if *btBatchCells <= 0 || *btBatchCells > 100_000 {
		return cfg, g, usagef("--bigtable_batch_cells=%d: give 1..100000", *btBatchCells)
	}
	if *bqReqBytes < 1<<10 || *bqReqBytes > 10<<20 {
		return cfg, g, usagef("--bigquery_request_bytes=%d: give 1024..10485760 (BigQuery takes at most 10 MB a request)", *bqReqBytes)
	}
	if *bqBufBytes < 1<<20 || *bqBufBytes > 1<<30 {
		return cfg, g, usagef("--bigquery_buffer_bytes=%d: give 1048576..1073741824", *bqBufBytes)
	}
	cfg = pipelines.Config{Spec: compiled, DeadLetter: dl, Runner: runnerName(), Replay: replay,
		Bigtable: bigtableio.Config{Project: *btProject, Instance: *btInstance, AppProfile: *btAppProfile, BatchCells: *btBatchCells,
			Flow: flowcontrol.Settings{MaxMutations: *btMaxMuts, MaxBytes: *btMaxBytes, TargetLatency: *btLatency}},
		Retry:        retry.Settings{Deadline: *retryDeadline, AttemptTimeout: *attemptTimeout},
		MaxLineBytes: *maxLineBytes, MaxDecompressedBytes: *maxUnzipped}
	if cfg.DeadLetter.Kind == schemas.DeadLetterFiles {
		cfg.DeadLetter.Run = runID
	}
	if *bqDataset != "" {
		if spec.BigQuery == nil {
			return cfg, g, usagef("--bigquery_dataset: spec %s has no bigquery section", spec.Name)
		}
		bq := &bigqueryio.Config{Project: *bqProject, Dataset: *bqDataset, Table: *bqTable, WriteMethod: *bqMethod, MaxRequestBytes: *bqReqBytes,
			MaxBufferedBytes: *bqBufBytes}
		if bq.Project == "" {
			bq.Project = *btProject
		}
		if bq.Table == "" {
			bq.Table = spec.BigQuery.Table
		}
		switch bq.WriteMethod {
		case bigqueryio.WriteUpsert:
			if len(spec.BigQuery.PrimaryKey) == 0 {
				return cfg, g, usagef("--bigquery_write_method=upsert: spec %s has no bigquery primary_key; add one (e.g. primary_key: [reading_id]) or use --bigquery_write_method=storage_write", spec.Name)
			}
		case bigqueryio.WriteStorageWrite, bigqueryio.WriteInsertAll:
		default:
			return cfg, g, usagef("--bigquery_write_method=%q: use upsert, storage_write or insert_all", bq.WriteMethod)
		}
		cfg.BigQuery = bq
	}
	switch *source {
	case "files":
		g.batch.MergeStored = *mergeStored
		if *input == "" {
			return cfg, g, usagef("--input is required with --source=files: give a file glob such as 'testdata/*.jsonl'")
		}
		for _, name := range streamFlags {
			if isSet(name) {
				return cfg, g, usagef("--%s applies to --source=pubsub only", name)
			}
		}
		if localPath(*input) {
			if !workersSeeDisk() {
				return cfg, g, remoteDiskError("--input", *input)
			}
			// The workers may run in another working directory.
			abs, err := filepath.Abs(*input)
			if err != nil {
				return cfg, g, usagef("--input=%s: %w", *input, err)
			}
			*input = abs
		}
		if localPath(*input) || local() {
			if inputMatched, err = checkInput(ctx, *input); err != nil {
				return cfg, g, cli.Usage(err)
			}
		}
	case "pubsub":
		if *input != "" {
			return cfg, g, usagef("--input applies to --source=files only; a stream reads --subscription")
		}
		if *subscription == "" {
			return cfg, g, usagef("--subscription is required with --source=pubsub: give projects/P/subscriptions/S")
		}
		if g.stream.Source, err = streamSource(); err != nil {
			return cfg, g, cli.Usage(err)
		}
		if *earlyFiring <= 0 || *lateFiring <= 0 || *allowedLateness < 0 {
			return cfg, g, usagef("--early_firing and --late_firing must be positive, --allowed_lateness not negative")
		}
		if *ackDeadline != 0 && (*ackDeadline < 10*time.Second || *ackDeadline > 600*time.Second) {
			return cfg, g, usagef("--pubsub_ack_deadline=%v: use 10s..600s", *ackDeadline)
		}
		g.stream.Windowing = pipelines.Windowing{EarlyFiring: *earlyFiring, LateFiring: *lateFiring, AllowedLateness: *allowedLateness}
		g.stream.MergeStored = *mergeStored
		if *allowedLateness == 0 {
			// 0 is a valid lateness (late readings are all too_late);
			// the pipelines' zero means "default", so say 1ms.
			g.stream.Windowing.AllowedLateness = time.Millisecond
		}
		if !dataflow() {
			// Runners but Dataflow (prism, direct, a job server's) keep
			// windows in their memory: write each reading's own cells
			// before its message is acknowledged, read each window back
			// from Bigtable at its final firing, for what a killed or
			// stopped run held, and keep the hours' state on the workers'
			// disk, not in memory.
			cfg.Local = &pipelines.LocalRunner{WriteOnArrival: true, Recover: true, DiskState: *localStateOnDisk}
		}
	default:
		return cfg, g, usagef("--source=%q: use files or pubsub", *source)
	}
	if err := cfg.Check(); err != nil {
		return cfg, g, cli.Usage(err)
	}
	if err := g.stream.Windowing.Check(); err != nil {
		return cfg, g, cli.Usage(err)
	}
	if err := checkBigQueryNames(cfg); err != nil {
		return cfg, g, err
	}
	readBack := cfg.Local != nil && cfg.Local.Recover
	if !g.batch.MergeStored && !g.stream.MergeStored && !readBack {
		return cfg, g, nil
	}
	if _, err := schemas.NewReadBack(spec); err != nil {
		switch {
		case g.batch.MergeStored:
			fmt.Fprintf(os.Stderr, "sensorpipe: warning: a batch that splits an hour recomputes its rollup (and imputed values) from the batch's readings only: %v\n", err)
			g.batch.MergeStored = false
		case g.stream.MergeStored || readBack:
			fmt.Fprintf(os.Stderr, "sensorpipe: warning: each hour is built from the readings this stream reads only, not those another stream on the subscription or a killed or replaced run stored: %v\n", err)
			g.stream.MergeStored = false
			if readBack {
				cfg.Local.Recover = false
			}
		}
	}
	return cfg, g, nil
}

// formatDeadLetter is the --format of a dead-letter replay.
const formatDeadLetter = "deadletter"

// runID names this run's dead-letter files, so that its exit message can
// give the command that replays them alone.
var runID = time.Now().UTC().Format("20060102T150405") + fmt.Sprintf("%04x", os.Getpid()&0xffff)

// replayFilter is the replay the --replay_* flags describe.
func replayFilter() (*pipelines.Replay, error) {
	r := &pipelines.Replay{}
	for _, reason := range splitList(*replayReason) {
		if !slices.Contains(schemas.Reasons(), reason) {
			return nil, usagef("--replay_reason=%s: %q is no reason; use %s", *replayReason, reason, strings.Join(schemas.Reasons(), ", "))
		}
		r.Reasons = append(r.Reasons, reason)
	}
	for _, sink := range splitList(*replaySink) {
		if !slices.Contains(schemas.Sinks, sink) {
			return nil, usagef("--replay_sink=%s: %q is no sink; use %s", *replaySink, sink, strings.Join(schemas.Sinks, ", "))
		}
		r.Sinks = append(r.Sinks, sink)
	}
	return r, nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// streamSource is the Pub/Sub source the flags describe.
func streamSource() (pubsubio.Config, error) {
	sub, err := schemas.ParseSubscription(*subscription)
	if err != nil {
		return pubsubio.Config{}, fmt.Errorf("--subscription: %w", err)
	}
	return pubsubio.Config{
		Subscription:       sub,
		TimestampAttribute: *timestampAttr,
		IDAttribute:        *idAttr,
		Dataflow:           dataflow(),
		AckDeadline:        *ackDeadline,
	}, nil
}

// isSet reports whether the flag name was given on the command line.
func isSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// inputMatched is what --input matched at launch (zero when it was not
// listed: a gs:// glob on a remote runner).
var inputMatched matched

// matched is the files a glob matched and their bytes.
type matched struct {
	files int
	bytes int64
}

// checkInput fails early when the glob matches no file, and returns what
// it matched.
func checkInput(ctx context.Context, glob string) (matched, error) {
	files, err := parts.List(ctx, glob)
	if err != nil {
		return matched{}, err
	}
	if len(files) == 0 {
		return matched{}, fmt.Errorf("--input %s matches no file", glob)
	}
	return matched{files: len(files), bytes: parts.Total(files)}, nil
}

func run(ctx context.Context) error {
	cfg, g, err := config(ctx)
	if err != nil {
		return err
	}
	if err := serveDebug(); err != nil {
		return err
	}
	switch {
	case dryRun() && !dataflow():
		return usagef("--dry_run builds a Dataflow job without submitting it: give --runner=dataflow (a %s run has no dry run)", runnerName())
	case *dryRunOut != "" && !dryRun():
		return usagef("--dry_run_out=%s is the file a dry run writes its job to: add --dry_run (and --runner=dataflow)", *dryRunOut)
	case !dryRun():
		if err := preflight(ctx, cfg, g.stream.Source); err != nil {
			return err
		}
	}
	start := time.Now()
	build := func(ranges []fileio.FileRange) (*beam.Pipeline, error) {
		p, s := beam.NewPipelineWithRoot()
		return p, buildPipeline(func() error {
			if streaming() {
				return pipelines.Stream(s, cfg, g.stream)
			}
			opts := g.batch
			opts.Input, opts.Ranges = *input, ranges
			return pipelines.Batch(s, cfg, opts)
		})
	}
	if dataflow() || dryRun() {
		p, err := build(nil)
		if err != nil {
			return err
		}
		if dryRun() {
			return runDryRun(ctx, os.Stdout, p, cfg)
		}
		// Dataflow: the job's counters hold the ledger; a batch run
		// waits for the job and prints it too.
		res := runPipeline(ctx, p, 0, nil, nil)
		if res.Err != nil {
			return jobError(res.Err)
		}
		if res.Counters != nil && !streaming() {
			return report(os.Stdout, time.Since(start), cfg, res)
		}
		return nil
	}
	plan := []parts.Part{{}}
	if streaming() {
		fmt.Fprintf(os.Stderr, "sensorpipe: streaming %s on %s; Ctrl-C or SIGTERM stops\n", *subscription, runnerName())
	} else if local() && cfg.Replay == nil {
		// A replay's dead letters are not readings the scan can cut by
		// hour; they are few, and run as one job.
		var done func()
		if plan, done, err = planParts(ctx, cfg); err != nil {
			return err
		}
		defer done()
	}
	// A local batch runs its parts one after another (one job each), and
	// its ledger is theirs summed; other runners run one job.
	var (
		res    jobRun
		before ledger.Counters
		prev   ledger.Counters
		prevAt = start
		watch  func(ledger.Counters)
	)
	if streaming() {
		// A stream that rejects everything it reads says so, once a
		// minute at most, whatever --progress_interval is.
		w := rejectWatch{every: rejectWarnEvery, format: *format, spec: *specFlag}
		watch = func(c ledger.Counters) {
			if line, ok := w.observe(c, time.Now()); ok {
				fmt.Fprintln(os.Stderr, line)
			}
		}
	}
	record := ledgerRecord(cfg)
	if record != "" {
		beam.PipelineOptions.Set(ledger.RecordOption, record)
	}
	for i, part := range plan {
		if i > 0 && ctx.Err() != nil {
			res.Stopped = true // Ctrl-C between parts
			break
		}
		p, err := build(part.Ranges)
		if err != nil {
			return err
		}
		if len(plan) > 1 {
			what := fmt.Sprintf("%.1f MB of input", float64(part.Bytes)/1e6)
			if part.Shares > 1 {
				what = fmt.Sprintf("the readings of share %d of %d of the identities in %s", part.Share+1, part.Shares, what)
			}
			fmt.Fprintf(os.Stderr, "sensorpipe: part %d of %d: %s\n", i+1, len(plan), what)
		}
		res = runPipeline(ctx, p, *progressIval, func(c ledger.Counters) {
			now := time.Now()
			c = before.Plus(c)
			fmt.Fprintln(os.Stderr, progressLine(cfg.Spec, streaming(), prev, c, now.Sub(prevAt), now.Sub(start)))
			prev, prevAt = c, now
		}, watch)
		if res.Err != nil && !res.Stopped {
			if len(plan) > 1 {
				return fmt.Errorf("part %d of %d: %w (the parts before it were written; writes are idempotent, so re-run the job)", i+1, len(plan), jobError(res.Err))
			}
			return jobError(res.Err)
		}
		if res.Counters == nil {
			break // no ledger to go on: report says so
		}
		res.Counters = before.Plus(res.Counters)
		before = res.Counters
		if res.Stopped {
			break // Ctrl-C: report the parts run so far
		}
	}
	readRecord(record, &res)
	// A stopped stream is the stream's normal end: bundles in flight were
	// abandoned uncommitted, so their messages were not acknowledged and
	// Pub/Sub redelivers them to the next run.
	if err := report(os.Stdout, time.Since(start), cfg, res); err != nil {
		return err
	}
	if *printRows > 0 && !streaming() {
		if err := showRows(ctx, cfg, *printRows); err != nil {
			return err
		}
	}
	return nil
}

// planParts cuts a local batch's input into parts of about --local_part_mb
// each (launch/parts): of whole hours where its hours allow, and of
// shares of its identities where an hour, or hours that overlap, are
// larger. It says how it cut it. The line indexes that shares read go in
// a folder that done removes.
func planParts(ctx context.Context, cfg pipelines.Config) (plan []parts.Part, done func(), err error) {
	target := int64(*localPartMB * 1e6)
	files, err := parts.List(ctx, *input)
	if err != nil {
		return nil, nil, err
	}
	total := parts.Total(files)
	if target <= 0 || total <= target {
		return []parts.Part{{Bytes: total}}, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "sensorpipe-parts-")
	if err != nil {
		return nil, nil, fmt.Errorf("a folder for the input's line index (--local_part_mb=0 runs it as one job): %w", err)
	}
	done = func() { os.RemoveAll(dir) }
	began := time.Now()
	sc, err := parts.Scan(ctx, files, cfg.Spec, parts.ScanOptions{
		MaxLine: schemas.LineLimit(cfg.MaxLineBytes), IndexDir: dir, Every: *progressIval,
		Progress: func(read int64) {
			fmt.Fprintf(os.Stderr, "sensorpipe: scanning the input to cut it into parts: %.0f of %.0f MB\n", float64(read)/1e6, float64(total)/1e6)
		},
	})
	if err != nil {
		done()
		return nil, nil, fmt.Errorf("scan the input to cut it into parts (--local_part_mb=0 runs it as one job): %w", err)
	}
	hours := parts.Plan(files, sc.Spans, target)
	plan = hours
	if !sc.Mixed {
		plan = parts.Share(files, hours, sc.Index, target)
	}
	took := time.Since(began).Round(time.Millisecond)
	why := ""
	switch {
	case len(hours) > 1:
		why = fmt.Sprintf("it cuts into %d parts of whole hours", len(hours))
	case len(sc.Spans) <= 1:
		why = "its readings fall in one hour"
	default:
		why = fmt.Sprintf("its %d hours overlap throughout (it is not in event-time order), so no part of whole hours can be cut", len(sc.Spans))
	}
	note := ""
	switch {
	case sc.Mixed:
		note = "; its lines hold readings of several identities at once, so no part can be split by identity"
	case len(plan) > len(hours):
		note = fmt.Sprintf("; the parts over %g MB split into shares of their identities", *localPartMB)
	}
	jobs := "one job"
	if len(plan) > 1 {
		jobs = fmt.Sprintf("%d jobs, one after another", len(plan))
	}
	fmt.Fprintf(os.Stderr, "sensorpipe: %.1f MB of input runs as %s (--local_part_mb=%g; scanned in %v): %s%s\n", float64(total)/1e6, jobs, *localPartMB, took, why, note)
	return plan, done, nil
}

// errBuild is the failure to build the pipeline graph: a bug or a
// configuration the checks before it missed, never bad usage (exit 1).
var errBuild = errors.New("build the pipeline")

// buildPipeline runs build, which constructs the pipeline, and returns its
// error, or the panic of a Beam construction helper (beam.ParDo and the
// like panic on a bad graph) as an error, both wrapping errBuild: without
// the recover, Go's panic would exit 2, the code of bad flags.
func buildPipeline(build func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = fmt.Errorf("%w: %w", errBuild, e)
			} else {
				err = fmt.Errorf("%w: %v", errBuild, r)
			}
		}
	}()
	if err := build(); err != nil {
		return fmt.Errorf("%w: %w", errBuild, err)
	}
	return nil
}

func dryRun() bool {
	f := flag.Lookup("dry_run")
	return f != nil && f.Value.String() == "true"
}

// progressLine is a progress line from the runner's counters (a stream's
// with stream set): totals, and the read rate over the last interval.
func progressLine(spec *schemas.Compiled, stream bool, prev, cur ledger.Counters, interval, elapsed time.Duration) string {
	l := ledger.FromCounters(cur, stream)
	rate := 0.0
	if interval > 0 {
		rate = float64(cur[ledger.InputRecords]-prev[ledger.InputRecords]) / interval.Seconds()
	}
	var written, provisional, bq int64
	for _, s := range l.Sinks {
		n, early := s.Written, int64(0)
		for _, o := range s.Other {
			if strings.HasSuffix(o.What, " "+ledger.Written) {
				early += o.N
			}
		}
		switch {
		case s.Sink == schemas.SinkBigtable && s.Table == spec.Bigtable.Tables[0].Name:
			written += n
			provisional += early
		case s.Sink == schemas.SinkBigQuery:
			bq += n
		}
	}
	if stream {
		// A stream writes a reading on arrival and again, final, when its
		// hour closes: say which is which, so that more writes than reads
		// does not read like a count gone wrong.
		return fmt.Sprintf("progress %6.0fs: read %d (%d in open hours, provisional; %d final, their hour closed; %d rejected); Bigtable %d provisional writes, %d final; BigQuery %d final; dead-lettered %d; %.0f readings/s",
			elapsed.Seconds(), l.Read, l.Unfired, l.Readings, l.Rejected, provisional, written, bq, l.DeadLettered(), rate)
	}
	return fmt.Sprintf("progress %6.0fs: read %d, written %d (bigquery %d), dead-lettered %d, %.0f readings/s",
		elapsed.Seconds(), l.Read, written+provisional, bq, l.DeadLettered(), rate)
}

// report prints the run's ledger (and writes it to --summary_json), and
// returns the error that sets the exit code: the ledger does not balance
// (1), or a store stayed unavailable (3).
func report(w io.Writer, took time.Duration, cfg pipelines.Config, res jobRun) error {
	l := ledger.FromCounters(res.Counters, streaming())
	l.CountsFrom = res.CountsFrom
	if l.CountsFrom == "" {
		l.CountsFrom = ledger.FromRunnerMetrics
	}
	if streaming() {
		fmt.Fprintf(w, "sensorpipe: %s stream stopped after %v\n", runnerName(), took.Round(time.Millisecond))
	} else {
		fmt.Fprintf(w, "sensorpipe: %s run finished in %v\n", runnerName(), took.Round(time.Millisecond))
	}
	l.WriteText(w)
	fmt.Fprintf(w, "  dead letters go to:      %s\n", cfg.DeadLetter)
	if *summaryJSON != "" {
		if err := writeJSON(*summaryJSON, l); err != nil {
			return err
		}
	}
	switch {
	case res.Counters == nil:
		return exitError{exitFailed, fmt.Errorf("the runner reported no counters: the run's ledger cannot be checked")}
	case !streaming() && !res.Stopped && l.Read == 0 && inputMatched.bytes > 0:
		return exitError{exitFailed, fmt.Errorf("--input=%s matched %d files (%d bytes) at launch, but the job read no records from them: its workers did not see them (on %s, give a path every worker can read, such as gs://BUCKET/...)",
			*input, inputMatched.files, inputMatched.bytes, runnerName())}
	case !l.Balanced:
		return exitError{exitFailed, fmt.Errorf("the run's ledger does not balance: %s", strings.Join(l.Problems, "; "))}
	case l.ReplayNotReadBack > 0:
		return exitError{exitFailed, fmt.Errorf("%d too_large records could not be read back: their source files changed (or are gone) since they were dead-lettered; they are in the dead letter %s again, with the file, offset, length and sha256 they had",
			l.ReplayNotReadBack, cfg.DeadLetter)}
	case !streaming() && !res.Stopped && !*allowRejected && allRejected(l):
		return exitError{exitFailed, errors.New(allRejectedMessage(l, *format, *specFlag, cfg.DeadLetter))}
	}
	if down := l.Unavailable(); len(down) > 0 {
		var parts []string
		for _, s := range down {
			parts = append(parts, fmt.Sprintf("%s (%s) stayed unavailable: %d %s of %s not written", storeName(s.Sink), storeWhere(s.Sink), s.Unavailable, countedName(s.Sink), s.Table))
		}
		var sinks []string
		for _, s := range down {
			if !slices.Contains(sinks, s.Sink) {
				sinks = append(sinks, s.Sink)
			}
		}
		return exitError{exitUnavailable, fmt.Errorf("%s after retrying for --write_retry_deadline=%v; they are in the dead letter %s as write_failed: once the store is back, %s",
			strings.Join(parts, "; "), *retryDeadline, cfg.DeadLetter, replayAdvice(cfg.DeadLetter, sinks, os.Args))}
	}
	return nil
}

func storeName(sink string) string {
	if sink == schemas.SinkBigtable {
		return "Bigtable"
	}
	return "BigQuery"
}

func storeWhere(sink string) string {
	if sink == schemas.SinkBigtable {
		return bigtableio.Where()
	}
	return bigqueryio.WriterEndpoint()
}

func countedName(sink string) string {
	if sink == schemas.SinkBigQueryRollups {
		return "rollup rows"
	}
	return "readings"
}

// writeJSON writes the ledger to path.
func writeJSON(path string, l *ledger.Ledger) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--summary_json: %w", err)
	}
	if err := l.WriteJSON(f); err != nil {
		f.Close()
		return fmt.Errorf("--summary_json: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--summary_json: %w", err)
	}
	return nil
}

// showRows prints the first n rows of the first table, cbt-style.
func showRows(ctx context.Context, cfg pipelines.Config, n int) error {
	c, err := bigtableio.NewClientProfile(ctx, cfg.Bigtable.Project, cfg.Bigtable.Instance, cfg.Bigtable.AppProfile)
	if err != nil {
		return err
	}
	defer c.Close()
	name := cfg.Spec.Bigtable.Tables[0].Name
	fmt.Printf("first %d rows of %s (latest cell of each column):\n", n, name)
	err = c.Open(name).ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		fmt.Println(r.Key())
		fams := make([]string, 0, len(r))
		for fam := range r {
			fams = append(fams, fam)
		}
		sort.Strings(fams)
		for _, fam := range fams {
			for _, it := range r[fam] {
				fmt.Printf("  %-28s @ %s  %q\n", it.Column, it.Timestamp.Time().UTC().Format(time.RFC3339Nano), it.Value)
			}
		}
		return true
	}, bigtable.LimitRows(int64(n)), bigtable.RowFilter(bigtable.LatestNFilter(1)))
	if err != nil {
		return fmt.Errorf("read rows of %s: %w", name, err)
	}
	return nil
}

// ledgerRecord is the folder of this run's durable ledger record
// (ledger.RecordFolder), "" when it keeps none: a local batch whose dead
// letters go to a folder keeps one there, in _ledger/RUN. A stream's, and
// a Dataflow job's, ledger is the runner's metrics.
func ledgerRecord(cfg pipelines.Config) string {
	if streaming() || !local() || cfg.DeadLetter.Kind != schemas.DeadLetterFiles || cfg.DeadLetter.Path == "" {
		return ""
	}
	return ledger.RecordFolder(cfg.DeadLetter.Path, runID)
}

// readRecord takes res's ledger counters from the run's durable record
// in folder, when it has one; res keeps the runner's metrics when it has
// none, or it cannot be read (said on stderr). Counts the metrics lost
// are said on stderr.
func readRecord(folder string, res *jobRun) {
	if folder == "" || res.Counters == nil {
		return
	}
	rec, files, err := ledger.ReadRecord(context.Background(), folder)
	switch {
	case err != nil:
		fmt.Fprintf(os.Stderr, "sensorpipe: the run's ledger record cannot be read (%v); the ledger is the runner's metrics\n", err)
		return
	case files == 0:
		return
	}
	if lost := res.Counters.Lost(rec); len(lost) > 0 {
		fmt.Fprintf(os.Stderr, "sensorpipe: the runner's metrics lost counts the run's record holds (%s); the ledger is the record's\n", strings.Join(lost, ", "))
	}
	res.Counters = res.Counters.WithRecord(rec)
	res.CountsFrom = fmt.Sprintf("%s (%d bundle files in %s)", ledger.FromRecord, files, folder)
}
