package readpath

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
)

const (
	testProject  = "sensorpipe-test"
	testInstance = "readpath"
)

// loadSample parses a sample file with spec, prepares its readings per
// identity and UTC hour as the pipeline does, and returns the kept records.
func loadSample(t *testing.T, spec *schemas.Spec, path string) []schemas.Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := codec.NewParser(spec)
	b, err := hours.NewBuilder(spec)
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string][]schemas.Record{}
	var order []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var recs []schemas.Record
	for sc.Scan() {
		recs, err = p.Parse(recs[:0], sc.Bytes(), path)
		if err != nil {
			continue // the samples hold rejects on purpose
		}
		for _, r := range recs {
			if b.Check(&r) != nil {
				continue
			}
			g := group.IdentityKey(spec, &r) + "\x00" + strconv.FormatInt(r.EventMs/3600_000, 10)
			if _, ok := groups[g]; !ok {
				order = append(order, g)
			}
			groups[g] = append(groups[g], r)
		}
	}
	var kept []schemas.Record
	for _, g := range order {
		k, _ := group.Prepare(spec, groups[g])
		kept = append(kept, k...)
	}
	if len(kept) == 0 {
		t.Fatalf("%s: no valid records", path)
	}
	return kept
}

// writeRows creates spec's tables and writes recs with the spec's own
// Builder.Mutations.
func writeRows(ctx context.Context, t *testing.T, admin *bigtable.AdminClient, client *bigtable.Client, spec *schemas.Spec, recs []schemas.Record) {
	t.Helper()
	if err := CreateTables(ctx, admin, spec); err != nil {
		t.Fatal(err)
	}
	b, err := hours.NewBuilder(spec)
	if err != nil {
		t.Fatal(err)
	}
	muts, rejected := b.Mutations(recs)
	if len(rejected) > 0 {
		t.Fatalf("mutations rejected %d records: %v", len(rejected), rejected[0].Err)
	}
	if err := WriteMutations(ctx, client, muts); err != nil {
		t.Fatal(err)
	}
}

// answerRows is what the query should return, computed from the records
// rather than the key: the row keys, in the query's table, of the records
// whose where fields equal the query's and whose event time is in its
// window.
func answerRows(t *testing.T, spec *schemas.Spec, recs []schemas.Record, table string, q Query) map[string]bool {
	t.Helper()
	b, err := hours.NewBuilder(spec)
	if err != nil {
		t.Fatal(err)
	}
	from, to := q.Window()
	want := map[string]bool{}
	for i := range recs {
		r := &recs[i]
		if r.EventMs < from || r.EventMs > to {
			continue
		}
		match := true
		for name, text := range q.Where {
			if got := string(schemas.AppendText(nil, r.Values[spec.FieldIndex(name)])); got != text {
				match = false
			}
		}
		if !match {
			continue
		}
		muts, _ := b.Mutations(recs[i : i+1])
		for _, m := range muts {
			if m.Table == table {
				want[m.RowKey] = true
			}
		}
	}
	return want
}

// opener opens tables of client for Read.
func opener(c *bigtable.Client) Tables {
	return func(name string) Reader { return c.Open(name) }
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// TestMainQueriesReadOnlyTheirRows writes every built-in spec's sample into
// a real Bigtable emulator with the spec's own mutations, runs the spec's
// declared main query through the read path, and checks the rows read and
// the ranges used. The vitals dataset's primary query (all vitals for one sensor for
// the last hour) reads at most 2 rows of a 48-sensor, 12-hour table.
func TestMainQueriesReadOnlyTheirRows(t *testing.T) {
	host := emulators.StartBigtable(t)
	t.Setenv("BIGTABLE_EMULATOR_HOST", host)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := bigtable.NewAdminClient(ctx, testProject, testInstance)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	client, err := bigtable.NewClient(ctx, testProject, testInstance)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	samples := filepath.Join("..", "..", "..", "testdata", "samples")
	tests := []struct {
		spec, sample string
		where        map[string]string
		now          string
		maxRows      int // the bound the key design promises
		wantRanges   int
		wantKind     string
		newestFirst  bool
	}{
		{
			spec: "vitals", sample: "vitals_fleet.jsonl",
			where: map[string]string{"sensor_id": "sensor-b6589fc6"}, now: "2026-03-01T05:30:00Z",
			maxRows: 2, wantRanges: 1, wantKind: rowkey.ScanRange,
		},
		{
			spec: "user_events", sample: "user_events.jsonl",
			where: map[string]string{"user_id": "3f2b8c1e-6a4d-4e7b-9c0a-1d2e3f4a5b6c", "event_type": "login"}, now: "2026-03-01T12:00:00Z",
			maxRows: 2, wantRanges: 1, wantKind: rowkey.ScanRange, // two logins in the last day; a third, 26 h old, stays unread
		},
		{
			// Latest per prefix: the newest reading of each direction, one
			// or two one-row reads per direction, under one prefix.
			spec: "traffic", sample: "traffic.jsonl",
			where: map[string]string{"highway": "I-35", "milemarker": "347"}, now: "2026-03-01T07:30:00Z",
			maxRows: 2, wantRanges: 1, wantKind: rowkey.ScanPrefix,
		},
		{
			spec: "heroic_metrics", sample: "heroic_metrics.jsonl",
			where: map[string]string{"key": "system", "tags": "site=gew,system-component=memory,unit=B,what=memory-used-bytes"}, now: "2011-03-29T05:30:00Z",
			maxRows: 2, wantRanges: 1, wantKind: rowkey.ScanRange,
		},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			spec, err := schemas.BuiltinSpec(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			recs := loadSample(t, spec, filepath.Join(samples, tc.sample))
			writeRows(ctx, t, admin, client, spec, recs)

			q, err := FromMainQuery(spec, tc.where, mustTime(t, tc.now))
			if err != nil {
				t.Fatal(err)
			}
			res, err := Read(ctx, opener(client), spec, q)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: ranges %v, rows read %d: %v", tc.spec, res.Plan.Ranges, res.RowsRead, res.RowKeys)
			if got := len(res.Plan.Ranges); got != tc.wantRanges {
				t.Errorf("ranges = %d %v, want %d", got, res.Plan.Ranges, tc.wantRanges)
			}
			if res.Plan.Kind != tc.wantKind {
				t.Errorf("scan kind = %s, want %s", res.Plan.Kind, tc.wantKind)
			}
			if len(res.Plan.Unused) > 0 {
				t.Errorf("where fields %v did not narrow the scan", res.Plan.Unused)
			}
			if res.Plan.Reversed != tc.newestFirst {
				t.Errorf("newest first = %v, want %v", res.Plan.Reversed, tc.newestFirst)
			}
			if res.RowsRead == 0 || res.RowsRead > tc.maxRows {
				t.Errorf("rows read = %d, want 1..%d", res.RowsRead, tc.maxRows)
			}
			want := answerRows(t, spec, recs, res.Plan.Table, q)
			if q.Latest {
				// The newest row of each prefix: reverse timestamps sort
				// the newest first.
				newest := map[string]string{}
				for k := range want {
					p, _, err := rowkey.TimePrefix(spec, res.Plan.Table, k)
					if err != nil {
						t.Fatal(err)
					}
					if cur, ok := newest[p]; !ok || k < cur {
						newest[p] = k
					}
				}
				want = map[string]bool{}
				for _, k := range newest {
					want[k] = true
				}
			}
			if q.Limit > 0 {
				// Newest first with a limit: the answer is the newest rows.
				keys := make([]string, 0, len(want))
				for k := range want {
					keys = append(keys, k)
				}
				sort.Strings(keys) // reverse timestamps: newest sorts first
				want = map[string]bool{}
				for _, k := range keys[:min(q.Limit, len(keys))] {
					want[k] = true
				}
			}
			got := map[string]bool{}
			for _, k := range res.RowKeys {
				got[k] = true
			}
			for k := range want {
				if !got[k] {
					t.Errorf("row %q holds the answer but was not read", k)
				}
			}
			for k := range got {
				if !want[k] {
					t.Errorf("row %q was read but holds none of the answer", k)
				}
			}
			from, to := q.Window()
			for _, c := range res.Cells {
				if ms := c.TimestampMicros / 1000; ms < from || ms > to {
					t.Errorf("cell %s/%s:%s at %d ms is outside the window [%d, %d]", c.RowKey, c.Family, c.Qualifier, ms, from, to)
				}
			}
		})
	}
}

// TestSaltedQueryUsesOneRangePerBucket reads "number of logins in the last
// day" from user_events_by_type, whose key is salted over 8 buckets: the
// read path issues 8 ranges and finds every login of the window.
func TestSaltedQueryUsesOneRangePerBucket(t *testing.T) {
	host := emulators.StartBigtable(t)
	t.Setenv("BIGTABLE_EMULATOR_HOST", host)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := bigtable.NewAdminClient(ctx, testProject, testInstance)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	client, err := bigtable.NewClient(ctx, testProject, testInstance)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	spec, err := schemas.BuiltinSpec("user_events")
	if err != nil {
		t.Fatal(err)
	}
	recs := loadSample(t, spec, filepath.Join("..", "..", "..", "testdata", "samples", "user_events.jsonl"))
	writeRows(ctx, t, admin, client, spec, recs)
	q := Query{Table: "user_events_by_type", Where: map[string]string{"event_type": "login"}, Since: 24 * time.Hour, Now: mustTime(t, "2026-03-01T12:00:00Z")}
	res, err := Read(ctx, opener(client), spec, q)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(res.Plan.Ranges); got != 8 {
		t.Errorf("ranges = %d, want 8 (one per salt bucket)", got)
	}
	want := answerRows(t, spec, recs, q.Table, q)
	if res.RowsRead != len(want) || len(want) != 4 {
		t.Errorf("rows read = %d, answer rows = %d, want both 4 (logins in the window)", res.RowsRead, len(want))
	}
}
