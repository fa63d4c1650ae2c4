// Command launch runs sensorpipe: it reads sensor readings from files (a
// historical re-ingestion batch) or Pub/Sub (a stream), validates them,
// builds Bigtable row keys by field promotion, windows them by event-time
// hour, and writes Bigtable, BigQuery and a dead letter.
//
// It runs on prism by default; --runner=direct and --runner=dataflow work
// too. Exit codes: 0 the job ran (even if records were dead-lettered), 1 the
// job or its set-up failed (e.g. Bigtable unreachable), 2 bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	beamlog "github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/sensorpipe/sensorpipe/dofns"
	"github.com/sensorpipe/sensorpipe/dofns/pubsubread"
	"github.com/sensorpipe/sensorpipe/internal/bqadmin"
	"github.com/sensorpipe/sensorpipe/internal/btadmin"
	"github.com/sensorpipe/sensorpipe/internal/progress"
	"github.com/sensorpipe/sensorpipe/pipelines"
	"github.com/sensorpipe/sensorpipe/schemas"
)

var (
	source       = flag.String("source", "files", "Where readings come from: files (a batch over --input) or pubsub (a stream from --subscription).")
	input        = flag.String("input", "", "With --source=files: a file glob, local or gs://; .gz files are decompressed. Example: 'testdata/*.jsonl'.")
	specFlag     = flag.String("spec", "vitals", "Dataset spec: a built-in name ("+strings.Join(schemas.BuiltinSpecNames(), ", ")+") or a path to a YAML file.")
	btProject    = flag.String("bigtable_project", "", "Bigtable project id (required).")
	btInstance   = flag.String("bigtable_instance", "", "Bigtable instance id (required).")
	btTable      = flag.String("bigtable_table", "", "Bigtable table for the spec's first table (default: the spec's name, patient_vitals for vitals).")
	deadLetter   = flag.String("dead_letter", "", "Where rejected records go, each with its payload and reason (required): "+schemas.DeadLetterTargetForms+".")
	createTables = flag.Bool("create_tables", true, "Create missing Bigtable tables and column families (with the spec's GC policies) before running.")
	timeout      = flag.Duration("bigtable_timeout", 10*time.Second, "How long to wait for Bigtable to answer at start-up.")
	bqProject    = flag.String("bigquery_project", "", "BigQuery project (default: --bigtable_project).")
	bqDataset    = flag.String("bigquery_dataset", "", "BigQuery dataset; empty turns the BigQuery sink off.")
	bqTable      = flag.String("bigquery_table", "", "BigQuery table (default: the spec's, readings for vitals).")
	bqMethod     = flag.String("bigquery_write_method", "storage_write", "storage_write: Storage Write API default stream (at-least-once); insert_all: tabledata.insertAll with insertId = reading_id (best-effort dedup).")
	printRows    = flag.Int("print_rows", 0, "After a local batch run, print this many rows of the first table.")
	logLevel     = flag.String("log_level", "warn", "Runner and SDK log level: debug, info, warn or error.")
	progressIval = flag.Duration("progress_interval", 5*time.Second, "How often a local run prints progress (0 turns it off).")
	format       = flag.String("format", "json", "Payload format of the input lines or messages: json, or proto (a schemas/proto Reading per message; see dofns.Formats).")

	// Stream flags (--source=pubsub).
	subscription    = flag.String("subscription", "", "With --source=pubsub: the subscription, projects/P/subscriptions/S (required). PUBSUB_EMULATOR_HOST is honoured on prism and direct.")
	timestampAttr   = flag.String("timestamp_attribute", "", "With --source=pubsub: the message attribute holding the event time (epoch ms); empty uses the publish time.")
	idAttr          = flag.String("id_attribute", "", "With --source=pubsub: a message attribute with a unique record id, for deduplicating redeliveries.")
	earlyFiring     = flag.Duration("early_firing", pipelines.DefaultEarlyFiring, "With --source=pubsub: how often an open hour fires early (processing time).")
	lateFiring      = flag.Duration("late_firing", pipelines.DefaultLateFiring, "With --source=pubsub: how long after a late reading its hour fires again.")
	allowedLateness = flag.Duration("allowed_lateness", pipelines.DefaultAllowedLateness, "With --source=pubsub: how long after its end an hour still takes late readings; later ones go to the dead letter as too_late.")
	ackDeadline     = flag.Duration("pubsub_ack_deadline", 0, "With --source=pubsub on prism or direct: the lease kept on messages until their bundle commits (10s..600s; 0: 60s). After a crash, unacknowledged messages return this long after.")
)

// streamFlags are the flags that only apply to --source=pubsub.
var streamFlags = []string{"subscription", "timestamp_attribute", "id_attribute", "early_firing", "late_firing", "allowed_lateness", "pubsub_ack_deadline"}

// exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

// usageError is a bad flag or flag combination.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	flag.CommandLine.Init(os.Args[0], flag.ContinueOnError)
	flag.CommandLine.SetOutput(io.Discard)
	if err := flag.CommandLine.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			flag.CommandLine.SetOutput(os.Stdout)
			fmt.Println("Usage: go run ./launch --source=files --input=GLOB --bigtable_project=P --bigtable_instance=I --dead_letter=DIR [flags]")
			fmt.Println("       go run ./launch --source=pubsub --subscription=projects/P/subscriptions/S --timestamp_attribute=event_ts \\")
			fmt.Println("           --bigtable_project=P --bigtable_instance=I --dead_letter=DIR [flags]   (runs until interrupted)")
			flag.PrintDefaults()
			os.Exit(exitOK)
		}
		fail(exitUsage, fmt.Errorf("%w (see --help)", err))
	}
	switch *logLevel {
	case "debug", "info", "warn", "error":
		beamlog.LogLevel = *logLevel
		if dryRun() && !isSet("log_level") {
			// The Dataflow runner prints the dry-run job at info level.
			beamlog.LogLevel = "info"
		}
	default:
		fail(exitUsage, fmt.Errorf("--log_level=%q: use debug, info, warn or error", *logLevel))
	}
	beam.Init()
	quietenKnownNoise()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fail(exitUsage, err)
		}
		fail(exitFailed, err)
	}
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

func local() bool {
	switch runnerName() {
	case "prism", "direct", "DirectRunner":
		return true
	}
	return false
}

// config validates the flags and builds the pipeline configuration.
func config(ctx context.Context) (pipelines.Config, error) {
	var cfg pipelines.Config
	if flag.NArg() > 0 {
		return cfg, usageError{fmt.Sprintf("unexpected argument %q: every option is a --flag", flag.Arg(0))}
	}
	spec, err := schemas.LoadSpec(*specFlag)
	if err != nil {
		return cfg, usageError{fmt.Sprintf("--spec: %v", err)}
	}
	if *btTable != "" {
		if err := spec.RenameTable(spec.Bigtable.Tables[0].Name, *btTable); err != nil {
			return cfg, usageError{err.Error()}
		}
	}
	switch {
	case *btProject == "":
		return cfg, usageError{"--bigtable_project is required"}
	case *btInstance == "":
		return cfg, usageError{"--bigtable_instance is required"}
	}
	dlProject := *bqProject
	if dlProject == "" {
		dlProject = *btProject
	}
	dl, err := validateDeadLetter(*deadLetter, dlProject, local())
	if err != nil {
		return cfg, usageError{err.Error()}
	}
	if _, err := dofns.NewDecoder(spec, *format); err != nil {
		return cfg, usageError{"--format: " + err.Error()}
	}
	if _, err := schemas.NewRoller(spec); err != nil {
		return cfg, usageError{fmt.Sprintf("--spec: %v", err)}
	}
	cfg = pipelines.Config{Spec: spec, BigtableProject: *btProject, BigtableInstance: *btInstance, DeadLetter: dl, Format: *format}
	if *bqDataset != "" {
		if spec.BigQuery == nil {
			return cfg, usageError{fmt.Sprintf("--bigquery_dataset: spec %s has no bigquery section", spec.Name)}
		}
		bq := &pipelines.BigQueryConfig{Project: *bqProject, Dataset: *bqDataset, Table: *bqTable, WriteMethod: *bqMethod}
		if bq.Project == "" {
			bq.Project = *btProject
		}
		if bq.Table == "" {
			bq.Table = spec.BigQuery.Table
		}
		if bq.WriteMethod != "storage_write" && bq.WriteMethod != "insert_all" {
			return cfg, usageError{fmt.Sprintf("--bigquery_write_method=%q: use storage_write or insert_all", bq.WriteMethod)}
		}
		cfg.BigQuery = bq
	}
	switch *source {
	case "files":
		if *input == "" {
			return cfg, usageError{"--input is required with --source=files: give a file glob such as 'testdata/*.jsonl'"}
		}
		for _, name := range streamFlags {
			if isSet(name) {
				return cfg, usageError{fmt.Sprintf("--%s applies to --source=pubsub only", name)}
			}
		}
		if local() {
			if err := checkInput(ctx, *input); err != nil {
				return cfg, usageError{err.Error()}
			}
		}
	case "pubsub":
		if *input != "" {
			return cfg, usageError{"--input applies to --source=files only; a stream reads --subscription"}
		}
		if *subscription == "" {
			return cfg, usageError{"--subscription is required with --source=pubsub: give projects/P/subscriptions/S"}
		}
		if _, err := streamSource(); err != nil {
			return cfg, usageError{err.Error()}
		}
		if *earlyFiring <= 0 || *lateFiring <= 0 || *allowedLateness < 0 {
			return cfg, usageError{"--early_firing and --late_firing must be positive, --allowed_lateness not negative"}
		}
		if *ackDeadline != 0 && (*ackDeadline < 10*time.Second || *ackDeadline > 600*time.Second) {
			return cfg, usageError{fmt.Sprintf("--pubsub_ack_deadline=%v: use 10s..600s", *ackDeadline)}
		}
		cfg.Windowing = pipelines.Windowing{Streaming: true, EarlyFiring: *earlyFiring, LateFiring: *lateFiring, AllowedLateness: *allowedLateness}
		if *allowedLateness == 0 {
			// 0 is a valid lateness (late readings are all too_late);
			// the pipelines' zero means "default", so say 1ms.
			cfg.Windowing.AllowedLateness = time.Millisecond
		}
		// prism and direct keep windows in memory: write each reading's
		// own cells before its message is acknowledged.
		cfg.WriteOnArrival = local()
	default:
		return cfg, usageError{fmt.Sprintf("--source=%q: use files or pubsub", *source)}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, usageError{err.Error()}
	}
	return cfg, nil
}

// streamSource is the Pub/Sub source the flags describe.
func streamSource() (pipelines.PubSubSource, error) {
	src := pipelines.PubSubSource{
		Subscription:       *subscription,
		TimestampAttribute: *timestampAttr,
		IDAttribute:        *idAttr,
		Dataflow:           !local(),
		AckDeadline:        *ackDeadline,
	}
	if _, _, ok := schemas.ParseSubscription(src.Subscription); !ok {
		return src, fmt.Errorf("--subscription=%q: use projects/P/subscriptions/S", src.Subscription)
	}
	return src, nil
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

// checkInput fails early when the glob matches no file.
func checkInput(ctx context.Context, glob string) error {
	fs, err := filesystem.New(ctx, glob)
	if err != nil {
		return fmt.Errorf("--input %s: %v", glob, err)
	}
	defer fs.Close()
	files, err := fs.List(ctx, glob)
	if err != nil {
		return fmt.Errorf("--input %s: %v", glob, err)
	}
	if len(files) == 0 {
		return fmt.Errorf("--input %s matches no file", glob)
	}
	return nil
}

func run(ctx context.Context) error {
	cfg, err := config(ctx)
	if err != nil {
		return err
	}
	if !dryRun() {
		if err := btadmin.EnsureTables(ctx, cfg.BigtableProject, cfg.BigtableInstance, cfg.Spec, *createTables, *timeout); err != nil {
			return err
		}
		if err := dofns.EnsureDeadLetterTarget(ctx, cfg.DeadLetter); err != nil {
			return err
		}
		if cfg.Windowing.Streaming {
			if err := pubsubread.CheckSubscription(ctx, *subscription); err != nil {
				return err
			}
		}
		if bq := cfg.BigQuery; bq != nil {
			if err := bqadmin.EnsureTable(ctx, bq.Project, bq.Dataset, bq.Table, cfg.Spec.BigQuery, *createTables); err != nil {
				return err
			}
			if roller, _ := schemas.NewRoller(cfg.Spec); roller != nil {
				rt := roller.BigQuery()
				if err := bqadmin.EnsureTable(ctx, bq.Project, bq.Dataset, rt.Table, rt, *createTables); err != nil {
					return err
				}
			}
		}
	}
	start := time.Now()
	p, s := beam.NewPipelineWithRoot()
	streaming := cfg.Windowing.Streaming
	if streaming {
		src, _ := streamSource()
		err = pipelines.Stream(s, cfg, src)
	} else {
		err = pipelines.Batch(s, cfg, *input)
	}
	if err != nil {
		return usageError{err.Error()}
	}

	progress.Reset()
	stopProgress := make(chan struct{})
	if local() && *progressIval > 0 {
		go progress.Report(os.Stderr, *progressIval, stopProgress)
	}
	if streaming && local() {
		fmt.Fprintf(os.Stderr, "sensorpipe: streaming %s on %s; Ctrl-C or SIGTERM stops\n", *subscription, runnerName())
	}
	err = beamx.Run(ctx, p)
	close(stopProgress)
	if streaming && ctx.Err() != nil {
		// Interrupted: the stream's normal end. Bundles in flight are
		// abandoned uncommitted, so their messages were not acknowledged
		// and Pub/Sub redelivers them to the next run.
		if local() {
			summary(os.Stdout, time.Since(start), cfg)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("job failed: %w", err)
	}
	if local() {
		summary(os.Stdout, time.Since(start), cfg)
		if *printRows > 0 {
			if err := showRows(ctx, cfg, *printRows); err != nil {
				return err
			}
		}
	}
	return nil
}

func dryRun() bool {
	f := flag.Lookup("dry_run")
	return f != nil && f.Value.String() == "true"
}

// summary prints what the run did.
func summary(w io.Writer, took time.Duration, cfg pipelines.Config) {
	s := progress.Take()
	if cfg.Windowing.Streaming {
		fmt.Fprintf(w, "sensorpipe: %s stream stopped after %v\n", runnerName(), took.Round(time.Millisecond))
	} else {
		fmt.Fprintf(w, "sensorpipe: %s run finished in %v\n", runnerName(), took.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "  readings read:      %d\n", s.Read)
	if cfg.Windowing.Streaming {
		fmt.Fprintf(w, "  reading writes:     %d (Bigtable row writes: %d; locally a reading is written on arrival, by its firing, and again if its imputation changes)\n", s.Written, progress.Rows.Load())
	} else {
		fmt.Fprintf(w, "  readings written:   %d (Bigtable rows written: %d)\n", s.Written, progress.Rows.Load())
	}
	fmt.Fprintf(w, "  duplicates merged:  %d (same identity and millisecond)\n", progress.Duplicates.Load())
	if cfg.BigQuery != nil {
		fmt.Fprintf(w, "  BigQuery rows:      %d%s\n", s.BQWritten, breakdown(progress.BQByTable()))
	}
	fmt.Fprintf(w, "  dead letters:       %d%s -> %s\n", s.DeadLettered, breakdown(progress.DeadByReason()), cfg.DeadLetter)
}

// breakdown formats counts as " (key n, key n)", or "" when there are none.
func breakdown(counts []progress.Count) string {
	if len(counts) == 0 {
		return ""
	}
	parts := make([]string, len(counts))
	for i, c := range counts {
		parts[i] = fmt.Sprintf("%s %d", c.Key, c.N)
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// showRows prints the first n rows of the first table, cbt-style.
func showRows(ctx context.Context, cfg pipelines.Config, n int) error {
	c, err := dofns.NewBigtableClient(ctx, cfg.BigtableProject, cfg.BigtableInstance)
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
