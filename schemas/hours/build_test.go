package hours

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/internal/readingtest"
	"github.com/sensorpipe/sensorpipe/schemas/internal/spectest"
)

func TestVitalsRowKey(t *testing.T) {
	s := spectest.Must(t, "vitals")
	b, err := NewBuilder(s)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ts   string
		want string
	}{
		{`"2026-03-01T10:15:30.250Z"`, "s-1#2026-03-01T10"},
		{`"2026-03-01T00:30:00+02:00"`, "s-1#2026-02-28T22"},
		{`"2026-03-01T23:59:59.999-01:00"`, "s-1#2026-03-02T00"},
		{`1772360130250`, "s-1#2026-03-01T10"},
		{`0`, "s-1#1970-01-01T00"},
	}
	for _, tt := range tests {
		t.Run(tt.ts, func(t *testing.T) {
			line := strings.Replace(okLine, `"2026-03-01T10:15:30.250Z"`, tt.ts, 1)
			recs := readingtest.Parse(t, s, line)
			muts, rej := b.Mutations(recs)
			if len(rej) != 0 || len(muts) != 1 || muts[0].RowKey != tt.want || muts[0].Table != "patient_vitals" {
				t.Fatalf("Mutations = %+v, %v; want row %q", muts, rej, tt.want)
			}
		})
	}
}

func TestVitalsCells(t *testing.T) {
	s := spectest.Must(t, "vitals")
	b, _ := NewBuilder(s)
	const h = 1772359200000
	kept, _ := group.Prepare(s, readingtest.Parse(t, s, readingtest.VitalsLine("s", h+250, 72), readingtest.VitalsLine("s", h+1000, -1)))
	muts, _ := b.Mutations(kept)
	if len(muts) != 1 {
		t.Fatalf("got %d mutations; want 1 row", len(muts))
	}
	var got []string
	for _, c := range muts[0].Cells {
		got = append(got, fmt.Sprintf("%s:%s@%d=%s", c.Family, c.Qualifier, c.TsMicros, c.Value))
	}
	want := []string{
		"vitals:heart_rate@1772359200250000=72",
		"vitals:body_temperature@1772359200250000=36.8",
		"vitals:spO2@1772359200250000=98",
		"meta:battery_level@1772359200250000=87",
		"meta:heart_rate_imputed@1772359200250000=false",
		"vitals:heart_rate@1772359201000000=72",
		"vitals:body_temperature@1772359201000000=36.8",
		"vitals:spO2@1772359201000000=98",
		"meta:battery_level@1772359201000000=87",
		"meta:heart_rate_imputed@1772359201000000=true",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("cells:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if o := muts[0].Origins; len(o) != 2 || o[0].Cells != 5 || o[1].Cells != 5 {
		t.Fatalf("origins = %+v; want two with 5 cells each", o)
	}
}

func TestNoHeartRateCellWhenNothingToImpute(t *testing.T) {
	s := spectest.Must(t, "vitals")
	b, _ := NewBuilder(s)
	kept, _ := group.Prepare(s, readingtest.Parse(t, s, readingtest.VitalsLine("s", 1772359200000, -1)))
	muts, _ := b.Mutations(kept)
	for _, c := range muts[0].Cells {
		if c.Qualifier == "heart_rate" {
			t.Fatalf("wrote a heart_rate cell %q for a group with no observed heart rate", c.Value)
		}
		if c.Qualifier == "heart_rate_imputed" && string(c.Value) != "false" {
			t.Fatalf("heart_rate_imputed = %q; want false", c.Value)
		}
	}
}

func TestRewritesClearColumnsWithoutValue(t *testing.T) {
	s := spectest.Must(t, "vitals")
	b, _ := NewBuilder(s)
	kept, _ := group.Prepare(s, readingtest.Parse(t, s, readingtest.VitalsLine("s", 1772359200000, -1)))
	muts, _ := b.Rewrites(kept)
	var got []string
	for _, c := range muts[0].Deletes {
		got = append(got, fmt.Sprintf("%s:%s@%d", c.Family, c.Qualifier, c.TsMicros))
	}
	if want := "vitals:heart_rate@1772359200000000"; strings.Join(got, " ") != want {
		t.Fatalf("deletions %v; want %s", got, want)
	}
	if o := muts[0].Origins[0]; o.Cells != len(muts[0].Cells) || o.Deletes != 1 {
		t.Fatalf("origin counts %d cells and %d deletions; want %d and 1", o.Cells, o.Deletes, len(muts[0].Cells))
	}
	if keys := b.RowKeys("patient_vitals", kept); strings.Join(keys, ",") != "s#2026-03-01T10" {
		t.Fatalf("RowKeys = %v", keys)
	}
}

func TestNumberText(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{{72, "72"}, {36.8, "36.8"}, {1.0 / 3, "0.3333333333333333"}, {1e21, "1000000000000000000000"}, {-0.5, "-0.5"}}
	for _, tt := range tests {
		if got := string(schemas.AppendText(nil, schemas.Value{Kind: schemas.KindFloat, Num: tt.v})); got != tt.want {
			t.Errorf("AppendText(%v) = %q; want %q", tt.v, got, tt.want)
		}
	}
}

func TestBQRowVitals(t *testing.T) {
	s := spectest.Must(t, "vitals")
	b, _ := NewBuilder(s)
	kept, _ := group.Prepare(s, readingtest.Parse(t, s, readingtest.VitalsLine("s", 1772359200000, -1)))
	row := b.BQRow(&kept[0], 1772359300000)
	cols := s.BigQuery.Columns
	if len(row.Values) != len(cols) {
		t.Fatalf("row has %d values for %d columns", len(row.Values), len(cols))
	}
	got := map[string]schemas.Value{}
	for i, c := range cols {
		got[c.Name] = row.Values[i]
	}
	if !got["heart_rate"].Null() {
		t.Errorf("heart_rate = %+v; want null (nothing to impute)", got["heart_rate"])
	}
	if v := got["event_timestamp"]; v.Kind != schemas.KindTime || v.Int != 1772359200000 {
		t.Errorf("event_timestamp = %+v", v)
	}
	if v := got["heart_rate_imputed"]; v.Kind != schemas.KindBool || v.Bool {
		t.Errorf("heart_rate_imputed = %+v; want false", v)
	}
	if v := got["reading_id"]; v.Str != group.ReadingID(s, &kept[0]) {
		t.Errorf("reading_id = %+v", v)
	}
	if v := got["ingested_at"]; v.Int != 1772359300000 {
		t.Errorf("ingested_at = %+v", v)
	}
}

func TestSpecErrorsNameFieldAndFix(t *testing.T) {
	base, err := schemas.BuiltinSpecs.ReadFile("specs/vitals.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, from, to, want string
	}{
		{"unknown key field", "{sensor_id}#{timestamp|hour}", "{sensorid}#{timestamp|hour}", `bigtable.tables[0].row_key`},
		{"unknown template function", "{timestamp|hour}", "{timestamp|fortnight}", `unknown function "fortnight"`},
		{"bad type", "type: float, required: true, min: 25", "type: floaty, required: true, min: 25", `fields[3].type`},
		{"typo in key", "key_delimiter:", "key_delimeter:", `line 9: key_delimeter: unknown key; did you mean key_delimiter?`},
		{"bad partition field", "field: event_timestamp}", "field: sensor_id}", `bigquery.time_partitioning.field`},
		{"primary key not a column", "primary_key: [reading_id]", "primary_key: [readingid]", `bigquery.primary_key[0]: "readingid" is not a column of the table; name one of bigquery.columns`},
		{"primary key column listed twice", "primary_key: [reading_id]", "primary_key: [reading_id, reading_id]", `bigquery.primary_key[1]: "reading_id" is listed twice`},
		{"nullable primary key column", "primary_key: [reading_id]", "primary_key: [heart_rate]", `bigquery.primary_key[0]: column "heart_rate" is NULLABLE; make it mode: REQUIRED`},
		{"bad max_staleness", "max_staleness: 15m", "max_staleness: soon", `bigquery.max_staleness: "soon" is not a duration such as 15m`},
		{"max_staleness without a key", "primary_key: [reading_id]", "", `bigquery.max_staleness: "15m" is set but the table has no primary_key`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := strings.Replace(string(base), tt.from, tt.to, 1)
			if data == string(base) {
				t.Fatalf("test edit %q not applied", tt.from)
			}
			_, err := schemas.ParseSpec("vitals.yaml", []byte(data))
			if !errors.Is(err, schemas.ErrSpec) {
				t.Errorf("error %v does not wrap ErrSpec", err)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "vitals.yaml") {
				t.Fatalf("ParseSpec error = %v; want one naming vitals.yaml and %q", err, tt.want)
			}
		})
	}
}

func TestBigQueryKeyAndStaleness(t *testing.T) {
	for _, tc := range []struct {
		name, edit string
		key        string
		staleness  time.Duration
	}{
		{"vitals as built in", "", "[reading_id]", 15 * time.Minute},
		{"max_staleness defaults with a key", "  max_staleness: 15m\n", "[reading_id]", schemas.DefaultMaxStaleness},
		{"no key, no staleness", "  primary_key: [reading_id]\n  max_staleness: 15m\n", "[]", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, err := schemas.BuiltinSpecs.ReadFile("specs/vitals.yaml")
			if err != nil {
				t.Fatal(err)
			}
			data := string(base)
			if tc.edit != "" {
				data = strings.Replace(data, tc.edit, "", 1)
				if data == string(base) {
					t.Fatalf("edit %q not applied", tc.edit)
				}
			}
			s, err := schemas.ParseSpec("vitals.yaml", []byte(data))
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(s.BigQuery.PrimaryKey); got != tc.key {
				t.Errorf("primary key = %s, want %s", got, tc.key)
			}
			if got := s.BigQuery.Staleness(); got != tc.staleness {
				t.Errorf("staleness = %v, want %v", got, tc.staleness)
			}
		})
	}
}
