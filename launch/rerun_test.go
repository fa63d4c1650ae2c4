package main

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/protobuf/proto"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
)

// mutationLog records, through a proxy in front of the Bigtable
// emulator, every cell a run's mutations write or delete, as
// "table row family:qualifier@micros=value" ("-" for a deletion).
type mutationLog struct {
	mu    sync.Mutex
	cells []string
	calls int
}

func (l *mutationLog) hook(method string, req []byte) error {
	var table string
	var entries []*bigtablepb.MutateRowsRequest_Entry
	switch method {
	case "/google.bigtable.v2.Bigtable/MutateRows":
		var m bigtablepb.MutateRowsRequest
		if err := proto.Unmarshal(req, &m); err != nil {
			return err
		}
		table, entries = m.TableName, m.Entries
	case "/google.bigtable.v2.Bigtable/MutateRow":
		var m bigtablepb.MutateRowRequest
		if err := proto.Unmarshal(req, &m); err != nil {
			return err
		}
		table, entries = m.TableName, []*bigtablepb.MutateRowsRequest_Entry{{RowKey: m.RowKey, Mutations: m.Mutations}}
	case "/google.bigtable.v2.Bigtable/CheckAndMutateRow", "/google.bigtable.v2.Bigtable/ReadModifyWriteRow":
		l.mu.Lock()
		l.cells = append(l.cells, method)
		l.mu.Unlock()
		return nil
	default:
		return nil
	}
	table = filepath.Base(table)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	for _, e := range entries {
		for _, m := range e.Mutations {
			switch {
			case m.GetSetCell() != nil:
				c := m.GetSetCell()
				l.cells = append(l.cells, fmt.Sprintf("%s %s %s:%s@%d=%s", table, e.RowKey, c.FamilyName, c.ColumnQualifier, c.TimestampMicros, c.Value))
			case m.GetDeleteFromColumn() != nil:
				c := m.GetDeleteFromColumn()
				l.cells = append(l.cells, fmt.Sprintf("%s %s %s:%s@%d=-", table, e.RowKey, c.FamilyName, c.ColumnQualifier, c.GetTimeRange().GetStartTimestampMicros()))
			default:
				l.cells = append(l.cells, fmt.Sprintf("%s %s %v", table, e.RowKey, m))
			}
		}
	}
	return nil
}

// take returns the cells logged since the last take, sorted.
func (l *mutationLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.cells
	l.cells = nil
	sort.Strings(out)
	return out
}

// bqWritten reads, per key, when each row of dataset.table was last
// written: the readings' ingested_at (by reading_id, with the heart rate)
// or the rollups' fired_at (by sensor and hour).
func bqWritten(t *testing.T, bq *bqemu.TestServer, dataset string) (readings, hourly map[string]string) {
	t.Helper()
	readings, _ = bqLatest(t, bq, dataset, "readings", "ingested_at",
		func(row map[string]bigquery.Value) string { id, _ := row["reading_id"].(string); return id },
		func(row map[string]bigquery.Value) string {
			return fmt.Sprint(row["sensor_id"], " ", row["event_timestamp"], " hr=", row["heart_rate"])
		})
	hourly, _ = bqLatest(t, bq, dataset, "readings_hourly", "fired_at",
		func(row map[string]bigquery.Value) string {
			return fmt.Sprint(row["sensor_id"], " ", row["window_start"])
		},
		func(row map[string]bigquery.Value) string {
			return fmt.Sprint("min=", row["heart_rate_min"])
		})
	return readings, hourly
}

// bqSent reads, per key, when each row of dataset.table was last sent:
// the readings' ingested_at (by reading_id) and the rollups' fired_at (by
// sensor and hour). A row sent again has a later time.
func bqSent(t *testing.T, bq *bqemu.TestServer, dataset string) (readings, hourly map[string]string) {
	t.Helper()
	readings, _ = bqLatest(t, bq, dataset, "readings", "ingested_at",
		func(row map[string]bigquery.Value) string { id, _ := row["reading_id"].(string); return id },
		func(row map[string]bigquery.Value) string { return fmt.Sprint(row["ingested_at"]) })
	hourly, _ = bqLatest(t, bq, dataset, "readings_hourly", "fired_at",
		func(row map[string]bigquery.Value) string {
			return fmt.Sprint(row["sensor_id"], " ", row["window_start"])
		},
		func(row map[string]bigquery.Value) string { return fmt.Sprint(row["fired_at"]) })
	return readings, hourly
}

// changedKeys lists the keys whose values differ between a and b.
func changedKeys(a, b map[string]string) []string {
	var out []string
	for k, v := range b {
		if a[k] != v {
			out = append(out, k)
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// TestBatchRerunWritesOnlyWhatChanged runs the acceptance input as a
// batch with both sinks, then again: the re-run writes no Bigtable cell
// (a proxy sees every mutation the launcher sends) and sends BigQuery no
// row (every row's ingested_at and fired_at is the first run's), and its
// summary says what it left unchanged. A third run with one reading's
// heart rate lowered (so that it wins over the stored copy) writes that
// reading's cell, its hour's rollup cells and the hour's BigQuery marks,
// and nothing else, to Bigtable, and sends BigQuery that reading's row and
// its hour's rollup row; both stores then hold the new value.
func TestBatchRerunWritesOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	bt := emulators.StartBigtable(t)
	var log mutationLog
	proxy := emulators.StartProxy(t, bt, emulators.ProxyHooks{Before: log.hook})
	bq := bqemu.StartServerForTest(t)
	env := bqEnv(proxy.Addr, bq)
	lines := acceptanceLines(t)
	run := func(name string, lines []string) (stdout string, summary string) {
		t.Helper()
		dir := t.TempDir()
		summary = filepath.Join(dir, "summary.json")
		r := runLauncher(t, env, batchArgs(writeLines(t, lines)+"/*", "rerun", "rerun", t.TempDir(), "--summary_json="+summary)...)
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s\n%s", name, r.code, r.stdout, r.stderr)
		}
		return r.stdout, summary
	}

	run("first run", lines)
	got := log.take()
	if len(got) == 0 {
		t.Fatal("the proxy saw no mutation of the first run")
	}
	var marks int
	for _, c := range got {
		if strings.HasPrefix(c, "rerun_bqmarks ") {
			marks++
		}
	}
	if marks != 6 {
		t.Errorf("the first run wrote %d BigQuery marks, want 6 (3 sensor-hours, 2 tables)", marks)
	}
	firstCells := dump(t, bt, "rerun")
	firstReadings, firstHourly := bqWritten(t, bq, "rerun")
	if len(firstReadings) != 304 || len(firstHourly) != 3 {
		t.Fatalf("first run: %d BigQuery readings, %d rollups; want 304 and 3", len(firstReadings), len(firstHourly))
	}
	firstSentReadings, firstSentHourly := bqSent(t, bq, "rerun")

	t.Run("a re-run writes nothing", func(t *testing.T) {
		stdout, summary := run("re-run", lines)
		if got := log.take(); len(got) != 0 {
			t.Errorf("the re-run wrote %d Bigtable cells, want none; the first:\n%s", len(got), strings.Join(got[:min(len(got), 10)], "\n"))
		}
		if d := cellDiff(dump(t, bt, "rerun"), firstCells); d != 0 {
			t.Errorf("Bigtable: %d cells differ from the first run's", d)
		}
		readings, hourly := bqWritten(t, bq, "rerun")
		if d := changedKeys(firstReadings, readings); len(d) != 0 {
			t.Errorf("BigQuery readings changed: %d, e.g. %s: %s", len(d), d[0], readings[d[0]])
		}
		if d := changedKeys(firstHourly, hourly); len(d) != 0 {
			t.Errorf("BigQuery rollups changed: %v", d)
		}
		sentReadings, sentHourly := bqSent(t, bq, "rerun")
		if d := changedKeys(firstSentReadings, sentReadings); len(d) != 0 {
			t.Errorf("the re-run sent BigQuery %d reading rows, want none; e.g. %s at %s", len(d), d[0], sentReadings[d[0]])
		}
		if d := changedKeys(firstSentHourly, sentHourly); len(d) != 0 {
			t.Errorf("the re-run sent BigQuery rollup rows, want none: %v", d)
		}
		l := readSummary(t, summary)
		if !l.Balanced || l.UnchangedHours != 3 {
			t.Errorf("ledger balanced %v, unchanged hours %d (want 3): %v", l.Balanced, l.UnchangedHours, l.Problems)
		}
		var bigQuery int
		for _, s := range l.Sinks {
			switch {
			case s.Sink == "bigquery" || s.Sink == "bigquery_rollups":
				bigQuery++
				want := int64(304)
				if s.Sink == "bigquery_rollups" {
					want = 3
				}
				if s.Routed != 0 || s.Rows != 0 || s.Unchanged != want {
					t.Errorf("%s %s: routed %d, rows written %d, unchanged %d; want 0, 0 and %d", s.Sink, s.Table, s.Routed, s.Rows, s.Unchanged, want)
				}
			case s.Sink != "bigtable":
			case s.Routed != 0 || s.Rows != 0:
				t.Errorf("%s %s: routed %d, rows written %d; want none", s.Sink, s.Table, s.Routed, s.Rows)
			case s.Table != "sensor_inventory" && s.Unchanged != 304:
				t.Errorf("%s %s: %d unchanged, want 304", s.Sink, s.Table, s.Unchanged)
			}
		}
		if bigQuery != 2 {
			t.Errorf("the ledger has %d BigQuery sinks, want 2: %+v", bigQuery, l.Sinks)
		}
		for _, want := range []string{"unchanged, not rewritten: 3 sensor-hours", "bigtable rerun: readings routed 0 = written 0 + dead-lettered 0; readings unchanged, not rewritten 304",
			"bigquery readings: readings routed 0 = written 0 + dead-lettered 0; readings unchanged, not rewritten 304",
			"ledger: balanced"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("summary lacks %q:\n%s", want, stdout)
			}
		}
	})

	t.Run("a changed reading lands alone", func(t *testing.T) {
		// p-4 at 10:00:05 has heart rate 65; 50 is smaller, so it wins
		// over the stored copy (group.Prepare's order).
		old := line("p-4", int64(1772359200000+5000), 65)
		changed := make([]string, len(lines))
		n := 0
		for i, l := range lines {
			changed[i] = l
			if l == old {
				changed[i] = line("p-4", int64(1772359200000+5000), 50)
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d lines are %s, want 1", n, old)
		}
		_, summary := run("re-run with a changed reading", changed)
		const readingMicros, hourEndMicros = (1772359200000 + 5000) * 1000, 1772362800000 * 1000
		cells := log.take()
		var value bool
		var marks int
		for _, c := range cells {
			if strings.HasPrefix(c, "rerun_bqmarks ") {
				if marks++; !strings.HasPrefix(c, "rerun_bqmarks p-4#") || !strings.Contains(c, fmt.Sprintf("@%d=", hourEndMicros)) {
					t.Errorf("wrote %s: a BigQuery mark not of the changed hour", c)
				}
				continue
			}
			if !strings.Contains(c, fmt.Sprintf("@%d=", readingMicros)) && !strings.Contains(c, " hourly:") {
				t.Errorf("wrote %s: neither the changed reading's cell nor its hour's rollup", c)
			}
			if strings.Contains(c, fmt.Sprintf("@%d=", hourEndMicros)) != strings.Contains(c, " hourly:") {
				t.Errorf("wrote %s: a rollup cell not at the hour's end, or another cell there", c)
			}
			if strings.Contains(c, fmt.Sprintf(" vitals:heart_rate@%d=50", readingMicros)) {
				value = true
			}
		}
		if !value {
			t.Errorf("the changed heart rate was not written; wrote:\n%s", strings.Join(cells, "\n"))
		}
		if marks != 2 {
			t.Errorf("wrote %d BigQuery marks, want the changed hour's 2", marks)
		}
		sentReadings, sentHourly := bqSent(t, bq, "rerun")
		if d := changedKeys(firstSentReadings, sentReadings); len(d) != 1 {
			t.Errorf("sent BigQuery %d reading rows, want the changed one", len(d))
		}
		if d := changedKeys(firstSentHourly, sentHourly); len(d) != 1 || !strings.HasPrefix(d[0], "p-4 ") {
			t.Errorf("sent BigQuery rollup rows %v, want p-4's hour's", d)
		}
		if d := cellDiff(dump(t, bt, "rerun"), firstCells); d == 0 {
			t.Error("Bigtable holds the first run's cells: the change did not land")
		}
		readings, hourly := bqWritten(t, bq, "rerun")
		d := changedKeys(firstReadings, readings)
		if len(d) != 1 || !strings.Contains(readings[d[0]], "hr=50") {
			t.Errorf("BigQuery readings changed: %v, want the changed one with hr=50", d)
		}
		if d := changedKeys(firstHourly, hourly); len(d) != 1 || !strings.HasPrefix(d[0], "p-4 ") || !strings.Contains(hourly[d[0]], "min=50") {
			t.Errorf("BigQuery rollups changed: %v (%v), want p-4's hour with min=50", d, hourly)
		}
		l := readSummary(t, summary)
		if !l.Balanced || l.UnchangedHours != 2 {
			t.Errorf("ledger balanced %v, unchanged hours %d (want 2): %v", l.Balanced, l.UnchangedHours, l.Problems)
		}
	})
}
