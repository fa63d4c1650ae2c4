package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/pipelines"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

// progressLine is a progress line from the runner's counters (a stream's
// with stream set): totals, and the read rate over the last interval.
func progressLine(spec *hours.Compiled, stream bool, prev, cur ledger.Counters, interval, elapsed time.Duration) string {
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
		case s.Sink == deadletter.SinkBigtable && s.Table == spec.Bigtable.Tables[0].Name:
			written += n
			provisional += early
		case s.Sink == deadletter.SinkBigQuery:
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
func report(w io.Writer, took time.Duration, cfg pipelines.Config, p plan, in matched, res jobRun) error {
	l := ledger.FromCounters(res.Counters, p.streaming)
	l.CountsFrom = res.CountsFrom
	if l.CountsFrom == "" {
		l.CountsFrom = ledger.FromRunnerMetrics
	}
	if p.streaming {
		fmt.Fprintf(w, "sensorpipe: %s stream stopped after %v\n", p.runner.name, took.Round(time.Millisecond))
	} else {
		fmt.Fprintf(w, "sensorpipe: %s run finished in %v\n", p.runner.name, took.Round(time.Millisecond))
	}
	l.WriteText(w)
	fmt.Fprintf(w, "  dead letters go to:      %s\n", cfg.DeadLetter)
	if p.summaryJSON != "" {
		if err := writeJSON(p.summaryJSON, l); err != nil {
			return err
		}
	}
	switch {
	case res.Counters == nil:
		return exitError{exitFailed, fmt.Errorf("the runner reported no counters: the run's ledger cannot be checked")}
	case !p.streaming && !res.Stopped && l.Read == 0 && in.bytes > 0:
		return exitError{exitFailed, fmt.Errorf("--input=%s matched %d files (%d bytes) at launch, but the job read no records from them: its workers did not see them (on %s, give a path every worker can read, such as gs://BUCKET/...)",
			p.batch.Input, in.files, in.bytes, p.runner.name)}
	case !l.Balanced:
		return exitError{exitFailed, fmt.Errorf("the run's ledger does not balance: %s", strings.Join(l.Problems, "; "))}
	case l.ReplayNotReadBack > 0:
		return exitError{exitFailed, fmt.Errorf("%d too_large records could not be read back: their source files changed (or are gone) since they were dead-lettered; they are in the dead letter %s again, with the file, offset, length and sha256 they had",
			l.ReplayNotReadBack, cfg.DeadLetter)}
	case !p.streaming && !res.Stopped && !p.allowAllRejected && allRejected(l):
		return exitError{exitFailed, errors.New(allRejectedMessage(l, p.format, p.spec, cfg.DeadLetter))}
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
			strings.Join(parts, "; "), cfg.Retry.Deadline, cfg.DeadLetter, replayAdvice(cfg.DeadLetter, sinks, append([]string{os.Args[0]}, p.args...), p.format))}
	}
	return nil
}

func storeName(sink string) string {
	if sink == deadletter.SinkBigtable {
		return "Bigtable"
	}
	return "BigQuery"
}

func storeWhere(sink string) string {
	if sink == deadletter.SinkBigtable {
		return bigtableio.Where()
	}
	return bigqueryio.WriterEndpoint()
}

func countedName(sink string) string {
	if sink == deadletter.SinkBigQueryRollups {
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
func ledgerRecord(cfg pipelines.Config, p plan) string {
	if p.streaming || !p.runner.local() || cfg.DeadLetter.Kind != targets.DeadLetterFiles || cfg.DeadLetter.Path == "" {
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
