package fileio

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	beamfileio "github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/hamba/avro/v2/ocf"

	"github.com/sensorpipe/sensorpipe/internal/lines"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// keyed is one reading as the read emits it.
type keyed struct {
	at  beam.EventTime
	key string
	rec schemas.Record
}

// readTableRecords reads path as format with spec through ProcessElement,
// whole or in ranges: the readings it emits and its dead letters.
func readTableRecords(t *testing.T, spec *hours.Compiled, format, path string, maxLine int, ranges ...FileRange) ([]keyed, []deadletter.DeadLetter) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	fn := &readRowsFn{Format: format, Spec: spec, MaxLineBytes: maxLine, Ranges: ranges}
	file := beamfileio.ReadableFile{Metadata: beamfileio.FileMetadata{Path: path, Size: st.Size()}}
	rt := sdf.NewLockRTracker(offsetrange.NewTracker(fn.CreateInitialRestriction(file)))
	ctx := metrics.SetPTransformID(metrics.SetBundleID(context.Background(), "test"), "read")
	var recs []keyed
	var dead []deadletter.DeadLetter
	err = fn.ProcessElement(ctx, rt, file, func(at beam.EventTime, key string, r schemas.Record) { recs = append(recs, keyed{at, key, r}) },
		func(d deadletter.DeadLetter) { dead = append(dead, d) })
	if err != nil {
		t.Fatal(err)
	}
	return recs, dead
}

// parsedAsJSON is what the spec's parser, then the builder's check, make
// of the rendered rows of a read (readTable): each row's reading keyed
// and stamped as dofns.ParseFn emits it, or its dead letter's reason,
// error and payload, by source.
func parsedAsJSON(t *testing.T, spec *hours.Compiled, rows map[string]string, maxLine int) (map[string]keyed, map[string]string) {
	t.Helper()
	recs, dead := map[string]keyed{}, map[string]string{}
	for source, row := range rows {
		if len(row) > schemas.LineLimit(maxLine) {
			d := deadletter.NewDeadLetter(deadletter.SinkParse, schemas.Prefix(row), source, schemas.TooLarge(int64(len(row)), schemas.LineLimit(maxLine)), time.Now())
			dead[place(d)] = said(d)
			continue
		}
		got, err := spec.Decoder().ParseInput(nil, row, source, codec.Input{})
		for i := 0; err == nil && i < len(got); i++ {
			err = spec.Builder().Check(&got[i])
		}
		if err != nil {
			d := deadletter.NewDeadLetter(deadletter.SinkParse, row, source, err, time.Now())
			dead[place(d)] = said(d)
			continue
		}
		for _, r := range got {
			recs[source] = keyed{mtime.FromMilliseconds(r.EventMs), group.IdentityKey(spec.Spec, &r), r}
		}
	}
	return recs, dead
}

// tableCase is one table file the read tests read.
type tableCase struct {
	name, format, path string
	spec               *hours.Compiled
	maxLine            int
}

// tableCases writes the table files the read tests read: a CSV of every
// kind of bad value and a too-large row, local times across
// daylight-saving changes, and Parquet and Avro files.
func tableCases(t *testing.T) []tableCase {
	t.Helper()
	dir := t.TempDir()
	vitals := compile(t, "vitals")
	csvPath := filepath.Join(dir, "v.csv")
	write(t, csvPath, vitalsCSV+
		"p-6,2026-03-01T10:00:05Z,abc,36.6,98,80\n"+ // invalid_field
		"p-7,2026-03-01T10:00:06,72,36.6,98,80\n"+ // bad_timestamp: no offset
		",2026-03-01T10:00:07Z,72,36.6,98,80\n"+ // missing_field
		"p-9,2026-03-01T10:00:08Z,72,36.6,98,-3\n"+ // out_of_range
		"p-10,1772359209000,72,36.6,98.5,80\n"+ // epoch ms
		"p-11,17723592,72,36.6,98,80\n"+ // a unit mistake
		"p-12,2026-03-01T10:00:10Z,,,,\n"+ // nulls
		"p-13,2026-03-01T10:00:11.123456Z,1e2,3.66e1,98,80\n"+
		"p-\xff,2026-03-01T10:00:12Z,72,36.6,98,80\n"+
		"p-"+strings.Repeat("x", 2000)+",2026-03-01T10:00:13Z,72,36.6,98,80\n")
	plant := compile(t, `
name: plant
event_time: ts
identity: [meter]
csv: {header: false, columns: [meter, ts, kw], delimiter: ";"}
fields:
  - {name: meter, type: string, required: true}
  - {name: ts, type: timestamp, required: true, layout: "02.01.2006 15:04:05", timezone: Europe/Berlin}
  - {name: kw, type: float, min: 0}
bigtable:
  tables:
    - name: t
      row_key: "{meter}#{ts|hour}"
      families: [{name: m, columns: [{qualifier: kw, value: kw}]}]
`)
	plantPath := filepath.Join(dir, "plant.csv.gz")
	writeGzip(t, plantPath, "m1;25.10.2026 01:30:00;1.5\nm1;25.10.2026 02:30:00;2\nm1;25.10.2026 03:30:00;3\nm1;29.03.2026 02:30:00;4\n"+
		"m1;29.03.2026 03:30:00;-1\nm1;2026-03-01T10:00:00Z;5\nm1;01.03.2026;6\n")
	parquetPath := filepath.Join(dir, "v.parquet")
	duckParquet(t, parquetPath, `SELECT 'p-' || (i % 3) AS sensor_id,
		TIMESTAMPTZ '2026-03-01 10:00:00+00' + INTERVAL (i) SECOND AS event_timestamp,
		CASE WHEN i % 5 = 0 THEN NULL ELSE 60.5 + i % 7 END AS heart_rate,
		(36 + (i % 10) / 10.0)::DECIMAL(9,2) AS body_temperature,
		CASE WHEN i % 11 = 0 THEN 'NaN'::DOUBLE ELSE 97.0 END AS spO2, (100 - i % 150)::BIGINT AS battery_level,
		i % 4 = 0 AS heart_rate_imputed
		FROM range(500) t(i)`, "")
	avroPath := filepath.Join(dir, "v.avro")
	writeAvro(t, avroPath, 300, ocf.Deflate)
	return []tableCase{
		{"csv", FormatCSV, csvPath, vitals, 1024},
		{"csv local times", FormatCSV, plantPath, plant, 0},
		{"parquet", FormatParquet, parquetPath, vitals, 0},
		{"avro", FormatAvro, avroPath, vitals, 0},
	}
}

// TestTableReadingsAreTheParseOfTheirRows: the readings and dead letters
// a table read emits are those the JSON parse makes of its rendered rows:
// a CSV of every kind of bad value, local times across daylight-saving
// changes, a too-large row, and Parquet and Avro files.
func TestTableReadingsAreTheParseOfTheirRows(t *testing.T) {
	for _, tc := range tableCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			rendered := readTable(t, tc.spec, tc.format, tc.path, 0)
			wantRecs, wantDead := parsedAsJSON(t, tc.spec, rendered.rows, tc.maxLine)
			for _, d := range rendered.dead { // the read's own dead letters
				wantDead[place(d)] = said(d)
			}
			recs, dead := readTableRecords(t, tc.spec, tc.format, tc.path, tc.maxLine)
			gotRecs, gotDead := map[string]keyed{}, map[string]string{}
			for _, r := range recs {
				gotRecs[r.rec.Source] = r
			}
			for _, d := range dead {
				if d.Sink != deadletter.SinkParse {
					t.Errorf("%s: sink %s", d.Source, d.Sink)
				}
				gotDead[place(d)] = said(d)
			}
			if len(recs) != len(gotRecs) || !reflect.DeepEqual(gotRecs, wantRecs) {
				t.Errorf("%d readings differ from the parse of the rendered rows' %d:\n%s", len(recs), len(wantRecs), diffKeys(gotRecs, wantRecs))
			}
			if !reflect.DeepEqual(gotDead, wantDead) {
				t.Errorf("dead letters\n got %v\nwant %v", gotDead, wantDead)
			}
			if len(wantRecs) == 0 || (tc.name != "avro" && len(wantDead) == 0) {
				t.Errorf("%d readings, %d dead letters: the case shows too little", len(wantRecs), len(wantDead))
			}
		})
	}
}

// place is where a dead letter's record was in its file.
func place(d deadletter.DeadLetter) string {
	return fmt.Sprintf("%s line %d offset %d %s", d.Source, d.Line, d.Offset, d.Row)
}

// said is what a dead letter says of its record.
func said(d deadletter.DeadLetter) string {
	return d.Sink + " " + d.Reason + " " + d.Error + " " + d.Payload + " " + d.PayloadBase64
}

func diffKeys(got, want map[string]keyed) string {
	var out []string
	for k, w := range want {
		if g, ok := got[k]; !ok || !reflect.DeepEqual(g, w) {
			out = append(out, k)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			out = append(out, k+" (not wanted)")
		}
	}
	sort.Strings(out)
	if len(out) > 5 {
		out = out[:5]
	}
	return strings.Join(out, "\n")
}

// TestTableSharesKeepEachReadingOnce: read in shares of their identities
// (a local part's FileRange with Share of Shares, and no line index), the
// table files give every reading once, in the share its identity hashes
// to, and every dead letter once, as the whole read does: bad rows, a
// too-large row, and the damage of a truncated Avro file.
func TestTableSharesKeepEachReadingOnce(t *testing.T) {
	cases := tableCases(t)
	for _, tc := range cases {
		if tc.name == "avro" {
			data, err := os.ReadFile(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			cut := filepath.Join(t.TempDir(), "cut.avro")
			write(t, cut, string(data[:len(data)*2/3]))
			tc.name, tc.path = "truncated avro", cut
			cases = append(cases, tc)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := os.Stat(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			recs, dead := readTableRecords(t, tc.spec, tc.format, tc.path, tc.maxLine)
			want, wantDead := map[string]keyed{}, map[string]string{}
			for _, r := range recs {
				want[r.rec.Source+" "+r.key] = r
			}
			for _, d := range dead {
				wantDead[place(d)] = said(d)
			}
			const shares = 3
			got, gotDead := map[string]keyed{}, map[string]string{}
			keep := map[int]int{}
			for s := range shares {
				recs, dead := readTableRecords(t, tc.spec, tc.format, tc.path, tc.maxLine,
					FileRange{Path: tc.path, Start: 0, End: st.Size(), Share: s, Shares: shares})
				for _, r := range recs {
					k := r.rec.Source + " " + r.key
					if _, twice := got[k]; twice {
						t.Errorf("%s read by two shares", k)
					}
					if in := lines.Share(lines.IdentityHash(r.key), shares); in != s {
						t.Errorf("%s read by share %d; its identity is in share %d", k, s, in)
					}
					got[k] = r
				}
				keep[s] = len(recs)
				for _, d := range dead {
					if _, twice := gotDead[place(d)]; twice {
						t.Errorf("%s dead-lettered by two shares", place(d))
					}
					gotDead[place(d)] = said(d)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%d readings in shares, %d whole; they differ:\n%s", len(got), len(want), diffKeys(got, want))
			}
			if !reflect.DeepEqual(gotDead, wantDead) {
				t.Errorf("dead letters in shares\n got %v\nwant %v", gotDead, wantDead)
			}
			if len(want) == 0 {
				t.Fatal("the whole read gave no reading")
			}
			t.Logf("readings by share: %v; %d dead letters", keep, len(wantDead))
		})
	}
}
