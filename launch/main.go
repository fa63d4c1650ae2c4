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
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beamlog "github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/sensorpipe/sensorpipe/dofns/fileio"
	"github.com/sensorpipe/sensorpipe/internal/cli"
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/launch/parts"
	"github.com/sensorpipe/sensorpipe/pipelines"
)

// wholeHoursGCPercent and wholeHoursMemoryLimit tune the garbage
// collector of a local job that builds whole hours as it reads them: it
// holds no grouping, only the rows and writes in flight, so at Go's
// default GOGC of 100, which scales each collection's trigger with that
// small live heap, it collects often. At 400 it collects a fifth as
// often; the soft memory limit makes it collect sooner where more is live
// (rows of thousands of readings), so that its peak stays within a file
// batch's (figures in docs/performance.md).
const (
	wholeHoursGCPercent   = 400
	wholeHoursMemoryLimit = 384 << 20
)

// wholeHoursGC tunes the collector for such a job, unless GOGC or
// GOMEMLIMIT says otherwise.
func wholeHoursGC() {
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetGCPercent(wholeHoursGCPercent)
		debug.SetMemoryLimit(wholeHoursMemoryLimit)
	}
}

// runID names this run's dead-letter files, so that its exit message can
// give the command that replays them alone.
var runID = time.Now().UTC().Format("20060102T150405") + fmt.Sprintf("%04x", os.Getpid()&0xffff)

func main() {
	start := time.Now() // the run's time, set-up and all its parts
	// Beam reads its options from its own flags on flag.CommandLine, and
	// a worker's command line sets them there: the command line is parsed
	// there first, with the launcher's flags registered beside Beam's, so
	// that --help lists both and the job's pipeline options record them.
	// parse reads the same arguments into values of its own.
	new(flags).register(flag.CommandLine)
	flag.CommandLine.Init(os.Args[0], flag.ContinueOnError)
	flag.CommandLine.SetOutput(io.Discard)
	if err := flag.CommandLine.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp()
			os.Exit(exitOK)
		}
		fail(exitUsage, fmt.Errorf("%w (see --help)", err))
	}
	cfg, p, err := parse(os.Args[1:])
	if err == nil {
		beamlog.LogLevel = p.logLevel
	}
	beam.Init() // a worker's process runs its harness here, and ends
	if err != nil {
		fail(exitCode(err), err)
	}
	quietenKnownNoise()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, start, cfg, p); err != nil {
		fail(exitCode(err), err)
	}
}

// printHelp prints the launcher's usage and every flag, Beam's among them.
func printHelp() {
	flag.CommandLine.SetOutput(os.Stdout)
	fmt.Println("Usage: go run ./launch --source=files --input=GLOB --bigtable_project=P --bigtable_instance=I --dead_letter=DIR [flags]")
	fmt.Println("       go run ./launch --source=bigtable --from_spec=OLD --spec=NEW --bigtable_table=NEW_TABLE --bigtable_project=P --bigtable_instance=I --dead_letter=DIR [flags]")
	fmt.Println("       go run ./launch --source=bigquery --from_table=[PROJECT:]DATASET.TABLE --bigtable_project=P --bigtable_instance=I --dead_letter=DIR [flags]")
	fmt.Println("       go run ./launch --source=pubsub --subscription=projects/P/subscriptions/S --timestamp_attribute=event_ts \\")
	fmt.Println("           --bigtable_project=P --bigtable_instance=I --dead_letter=DIR [flags]   (runs until interrupted)")
	fmt.Println()
	fmt.Println(cli.DefaultsHelp)
	fmt.Println()
	fmt.Println("Exit codes: 0 the job ran and its ledger balances, 1 the job or its set-up failed (or a batch rejected every record), 2 bad flags,")
	fmt.Println("3 a store stayed unavailable past --write_retry_deadline (see the package doc).")
	fmt.Println()
	flag.PrintDefaults()
}

// run sets up and runs the job p describes, and reports it; start is when
// the launcher started, the start of the time the summary gives.
func run(ctx context.Context, start time.Time, cfg pipelines.Config, p plan) error {
	for _, w := range p.warnings {
		fmt.Fprintf(os.Stderr, "sensorpipe: %s\n", w)
	}
	var in matched // zero when the input is not listed: a gs:// glob on a remote runner
	if p.listInput {
		var err error
		if in, err = checkInput(ctx, p.batch.Input); err != nil {
			return cli.Usage(err)
		}
		if !p.streaming {
			if err := settleFormat(ctx, cfg, &p); err != nil {
				return cli.Usage(err)
			}
		}
	}
	if err := serveDebug(p.debugAddr); err != nil {
		return err
	}
	if !p.dryRun {
		if err := preflight(ctx, &cfg, p); err != nil {
			return err
		}
	}
	build := func(part parts.Part) (*beam.Pipeline, error) {
		pipe, s := beam.NewPipelineWithRoot()
		return pipe, buildPipeline(func() error {
			if p.streaming {
				return pipelines.Stream(s, cfg, p.stream)
			}
			opts := p.batch
			opts.Ranges = part.Ranges
			if rc := opts.FromBigtable; rc != nil {
				keys := *rc
				keys.Keys = part.Keys
				opts.FromBigtable = &keys
			}
			if src := opts.FromBigQuery; src != nil && (part.FromMs != 0 || part.ToMs != 0) {
				times := *src
				times.FromMs, times.ToMs = part.FromMs, part.ToMs
				opts.FromBigQuery = &times
			}
			return pipelines.Batch(s, cfg, opts)
		})
	}
	jobs := &jobRunner{runner: p.runner}
	if p.runner.dataflow() || p.dryRun {
		pipe, err := build(parts.Part{})
		if err != nil {
			return err
		}
		if p.dryRun {
			return runDryRun(ctx, os.Stdout, pipe, cfg, p)
		}
		// Dataflow: the job's counters hold the ledger; a batch run
		// waits for the job and prints it too.
		res := jobs.run(ctx, pipe, 0, nil, nil)
		if res.Err != nil {
			return jobError(res.Err)
		}
		if res.Counters != nil && !p.streaming {
			return report(os.Stdout, time.Since(start), cfg, p, in, res)
		}
		return nil
	}
	cut := []parts.Part{{}}
	if p.streaming {
		fmt.Fprintf(os.Stderr, "sensorpipe: streaming %s on %s; Ctrl-C or SIGTERM stops\n", p.stream.Source.Subscription, p.runner.name)
	} else if p.runner.local() && pipelines.BuildsWholeHours(cfg, p.batch) {
		// Its rows hold whole hours, built as they are read: one job,
		// whatever the table's size.
		wholeHoursGC()
	} else if p.runner.local() && cfg.Replay == nil && p.batch.FromBigtable != nil {
		// A stored table's parts: key ranges of its rows.
		var err error
		if cut, err = planBigtableParts(ctx, p.batch.FromBigtable, p); err != nil {
			return err
		}
	} else if p.runner.local() && cfg.Replay == nil && p.batch.FromBigQuery != nil {
		// A BigQuery table's parts: ranges of whole hours of event time.
		var err error
		if cut, err = planBigQueryParts(ctx, cfg, p.batch.FromBigQuery, p); err != nil {
			return err
		}
	} else if p.runner.local() && cfg.Replay == nil && fileio.IsTableFormat(p.batch.Format) {
		// Table files' parts: row groups, blocks, byte ranges.
		var err error
		if cut, err = planTableParts(ctx, cfg, p); err != nil {
			return err
		}
	} else if p.runner.local() && cfg.Replay == nil {
		// The parts are cut from JSON lines' hours. A replay's dead
		// letters are not readings the scan can cut by hour; they are
		// few, and run as one job.
		var done func()
		var err error
		if cut, done, err = planParts(ctx, cfg, p); err != nil {
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
		prevAt = time.Now()
		watch  func(ledger.Counters)
	)
	if p.streaming {
		// A stream that rejects everything it reads says so, once a
		// minute at most, whatever --progress_interval is.
		w := rejectWatch{every: rejectWarnEvery, format: p.format, spec: p.spec}
		watch = func(c ledger.Counters) {
			if line, ok := w.observe(c, time.Now()); ok {
				fmt.Fprintln(os.Stderr, line)
			}
		}
	}
	record := ledgerRecord(cfg, p)
	if record != "" {
		beam.PipelineOptions.Set(ledger.RecordOption, record)
	}
	for i, part := range cut {
		if i > 0 && ctx.Err() != nil {
			res.Stopped = true // Ctrl-C between parts
			break
		}
		pipe, err := build(part)
		if err != nil {
			return err
		}
		if len(cut) > 1 {
			what := partLine(part, p.batch.Format)
			if part.Shares > 1 {
				what = fmt.Sprintf("the readings of share %d of %d of the identities in %s", part.Share+1, part.Shares, what)
			}
			fmt.Fprintf(os.Stderr, "sensorpipe: part %d of %d: %s\n", i+1, len(cut), what)
		}
		res = jobs.run(ctx, pipe, p.progressInterval, func(c ledger.Counters) {
			now := time.Now()
			c = before.Plus(c)
			fmt.Fprintln(os.Stderr, progressLine(cfg.Spec, p.streaming, prev, c, now.Sub(prevAt), now.Sub(start)))
			prev, prevAt = c, now
		}, watch)
		if res.Err != nil && !res.Stopped {
			if len(cut) > 1 {
				return fmt.Errorf("part %d of %d: %w (the parts before it were written; writes are idempotent, so re-run the job)", i+1, len(cut), jobError(res.Err))
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
	if err := report(os.Stdout, time.Since(start), cfg, p, in, res); err != nil {
		return err
	}
	if p.printRows > 0 && !p.streaming {
		if err := showRows(ctx, cfg, p.printRows); err != nil {
			return err
		}
	}
	return nil
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
