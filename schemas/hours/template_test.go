package hours

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
	"github.com/sensorpipe/sensorpipe/schemas/timestamps"
)

// templateSpec is a spec with one field of every kind the template tests
// need; each test case supplies the row key and, optionally, a qualifier.
func templateSpec(t *testing.T, delim, rowKey, qualifier string, escape bool) *schemas.Spec {
	t.Helper()
	if qualifier == "" {
		qualifier = "v"
	}
	src := fmt.Sprintf(`
name: tmpl
key_delimiter: %q
event_time: ts
identity: [id]
fields:
  - {name: id, type: string, required: true}
  - {name: site, type: string}
  - {name: host, type: string}
  - {name: n, type: int}
  - {name: ts, type: timestamp, required: true}
  - {name: tags, type: tags}
  - {name: res, type: tags}
  - {name: raw, type: bytes}
  - {name: x, type: float}
bigtable:
  tables:
    - name: t
      row_key: %q
      escape: %v
      families:
        - name: f
          columns:
            - {qualifier: %q, value: x}
`, delim, rowKey, escape, qualifier)
	s, err := schemas.ParseSpec("tmpl.yaml", []byte(src))
	if err != nil {
		t.Fatalf("spec: %v", err)
	}
	return s
}

func parseOne(t *testing.T, s *schemas.Spec, line string) *schemas.Record {
	t.Helper()
	recs, err := codec.NewParser(s).Parse(nil, []byte(line), "test")
	if err != nil {
		t.Fatalf("parse %s: %v", line, err)
	}
	return &recs[0]
}

// baseLine is a record line: 2026-03-01T10:15:30.250Z is 1772360130250 ms.
const baseLine = `{"id":"s1","site":"gew","host":"www.example.com","n":42,"ts":"2026-03-01T10:15:30.250Z","tags":{"what":"cpu","site":"gew","unit":"%"},"res":{"pod":"p-1","host":"db.example.com"},"raw":"ab","x":1.5}`

// line is baseLine with the members of extra (",k":v,...) replacing its own.
func line(extra string) string {
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal([]byte(baseLine), &m); err != nil {
		panic(err)
	}
	if extra != "" {
		if err := json.Unmarshal([]byte("{"+strings.TrimPrefix(extra, ",")+"}"), &m); err != nil {
			panic(err)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestTemplateRendersEveryFeature(t *testing.T) {
	rev := fmt.Sprintf("%019d", int64(math.MaxInt64)-1772360130250)
	tests := []struct {
		name, delim, key, want string
	}{
		{"field promotion with #", "#", "{id}#{site}#{host}", "s1#gew#www.example.com"},
		{"field promotion with another delimiter", "|", "{id}|{site}", "s1|gew"},
		{"zero-padded integer", "#", "{id}#{n|pad:6}", "s1#000042"},
		{"hour bucket", "#", "{id}#{ts|hour}", "s1#2026-03-01T10"},
		{"day bucket", "#", "{id}#{ts|day}", "s1#2026-03-01"},
		{"month bucket", "#", "{id}#{ts|month}", "s1#2026-03"},
		{"year and minute buckets", "#", "{ts|year}#{id}#{ts|minute}", "2026#s1#2026-03-01T10:15"},
		{"epoch milliseconds", "#", "{id}#{ts|ms}", "s1#1772360130250"},
		{"epoch milliseconds fixed width", "#", "{id}#{ts|ms|pad:15}", "s1#001772360130250"},
		{"reverse timestamp", "#", "{id}#{ts|reverse}", "s1#" + rev},
		{"salt of one field (FNV-1a 32 mod 8)", "#", "{salt:8|id}#{id}", "1#s1"},
		{"salt of two fields, two digits", "#", "{salt:16|id,site}#{id}", "11#s1"},
		{"sorted tag set", "#", "{id}#{tags}", "s1#site=gew,unit=%,what=cpu"},
		{"tag values only", "#", "{id}#{res|values}", "s1#db.example.com,p-1"},
		{"reversed domain", "#", "{host|revdomain}#{id}", "com.example.www#s1"},
		{"constant prefix", "#", "vitals#{id}#{ts|hour}", "vitals#s1#2026-03-01T10"},
		{"heroic time base", ",", "{id},{ts|base:32}", "s1,1769526525952"},
		{"hash of fields", "#", "{hash|id,site}", schemas.HashHex([]byte("s1\x1fgew"))},
		{"hex of bytes", "#", "{raw|hex}#{id}", "6162#s1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := templateSpec(t, tc.delim, tc.key, "", false)
			tmpl, err := schemas.CompileTemplate(tc.key, s)
			if err != nil {
				t.Fatal(err)
			}
			got, err := rowkey.Render(tmpl, nil, parseOne(t, s, line("")))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("Render(%s) = %q, want %q", tc.key, got, tc.want)
			}
		})
	}
}

func TestTemplateRejects(t *testing.T) {
	long := strings.Repeat("a", schemas.MaxRowKeyBytes)
	tests := []struct {
		name, delim, key, extra string
		escape                  bool
		want                    error
		wantKey                 string // with escape, the key it renders instead
	}{
		{name: "value holding the delimiter", delim: "#", key: "{site}#{id}", extra: `,"site":"a#b"`, want: schemas.ErrInvalidField},
		{name: "value holding the delimiter, escaped", delim: "#", key: "{site}#{id}", extra: `,"site":"a#b\\c"`, escape: true, wantKey: `a\#b\\c#s1`},
		{name: "tag value holding a comma", delim: "#", key: "{tags}", extra: `,"tags":{"site":"gew,lon"}`, want: schemas.ErrInvalidField},
		{name: "tag key holding =", delim: "#", key: "{tags}", extra: `,"tags":{"a=b":"c"}`, want: schemas.ErrInvalidField},
		{name: "tag value holding the delimiter", delim: ",", key: "{id},{res|values}", extra: `,"res":{"host":"a,b"}`, want: schemas.ErrInvalidField},
		{name: "tags whose own separators match the delimiter", delim: ",", key: "{id},{tags}", wantKey: "s1,site=gew,unit=%,what=cpu"},
		{name: "key over 4 KiB", delim: "#", key: "{site}#{id}", extra: `,"site":"` + long + `"`, want: schemas.ErrInvalidField},
		{name: "negative value padded", delim: "#", key: "{n|pad:4}", extra: `,"n":-3`, want: schemas.ErrInvalidField},
		{name: "value wider than its pad", delim: "#", key: "{n|pad:2}", extra: `,"n":123`, want: schemas.ErrInvalidField},
		{name: "missing key field", delim: "#", key: "{site}#{id}", extra: `,"site":null`, want: schemas.ErrMissingField},
		{name: "missing salt field", delim: "#", key: "{salt:4|site}#{id}", extra: `,"site":null`, want: schemas.ErrMissingField},
		{name: "absent tag set is empty", delim: "#", key: "{id}#{res|values}", extra: `,"res":null`, wantKey: "s1#"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := templateSpec(t, tc.delim, tc.key, "", tc.escape)
			tmpl, err := schemas.CompileTemplate(tc.key, s)
			if err != nil {
				t.Fatal(err)
			}
			got, err := rowkey.Render(tmpl.WithEscape(tc.escape), nil, parseOne(t, s, line(tc.extra)))
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("Render = %q, %v; want %v", got, err, tc.want)
				}
				return
			}
			if err != nil || string(got) != tc.wantKey {
				t.Fatalf("Render = %q, %v; want %q", got, err, tc.wantKey)
			}
		})
	}
}

func TestCompileTemplateErrors(t *testing.T) {
	s := templateSpec(t, "#", "{id}", "", false)
	tests := []struct{ src, want string }{
		{"{nope}", "unknown field"},
		{"{id|hour}", "hour takes a timestamp"},
		{"{ts|frobnicate}", "unknown function"},
		{"{n|pad:0}", "width"},
		{"{n|pad:x}", "width"},
		{"{salt:1|id}", "salt buckets"},
		{"{salt:8}", "list the fields"},
		{"{salt:8|nope}", "unknown field"},
		{"{tags|values|hash}", "values must be the last"},
		{"{ts|base:99}", "bits"},
		{"{id", "unclosed"},
		{"{id}}", "stray"},
	}
	for _, tc := range tests {
		t.Run(tc.src, func(t *testing.T) {
			_, err := schemas.CompileTemplate(tc.src, s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CompileTemplate(%q) = %v, want an error containing %q", tc.src, err, tc.want)
			}
		})
	}
}

func TestQualifierTemplate(t *testing.T) {
	s := templateSpec(t, ",", "{id},{ts|base:32}", "{ts|offset:32}", false)
	b, err := NewBuilder(s)
	if err != nil {
		t.Fatal(err)
	}
	muts, rej := b.Mutations([]schemas.Record{*parseOne(t, s, line(""))})
	if len(rej) > 0 {
		t.Fatal(rej[0].Err)
	}
	// 1772360130250 = 1769526525952 + 2833604298.
	if got := muts[0].RowKey; got != "s1,1769526525952" {
		t.Errorf("row key = %q, want s1,1769526525952", got)
	}
	if got := muts[0].Cells[0].Qualifier; got != "2833604298" {
		t.Errorf("qualifier = %q, want 2833604298", got)
	}
}

func TestHelpers(t *testing.T) {
	tests := []struct{ name, got, want string }{
		{"ReverseDomain", schemas.ReverseDomain("www.example.com"), "com.example.www"},
		{"ReverseDomain of one label", schemas.ReverseDomain("localhost"), "localhost"},
		{"ReverseTimestamp of 0", schemas.ReverseTimestamp(0), "9223372036854775807"},
		{"ReverseTimestamp is fixed width", fmt.Sprint(len(schemas.ReverseTimestamp(1772360130250))), "19"},
		{"SaltText pads", schemas.SaltText(3, 100), "03"},
		{"SaltText of 8 buckets", schemas.SaltText(7, 8), "7"},
		{"PrefixSuccessor", rowkey.PrefixSuccessor("s1#"), "s1$"},
		{"PrefixSuccessor past 0xff", rowkey.PrefixSuccessor("a\xff"), "b"},
		{"PrefixSuccessor of all 0xff", rowkey.PrefixSuccessor("\xff\xff"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
	// Newer times sort first under a reverse timestamp.
	if !(schemas.ReverseTimestamp(2000) < schemas.ReverseTimestamp(1000)) {
		t.Error("reverse timestamps do not sort newest first")
	}
	// The salt is FNV-1a 32 of the texts joined by 0x1f, mod N, so readers
	// in any language can recompute it: FNV-1a("s1") = 0x0851b8c9, mod 8 is 1.
	if got := schemas.SaltBucket(8, []byte("s1")); got != 1 {
		t.Errorf("SaltBucket(8, s1) = %d, want 1", got)
	}
}

func TestBucketAppendersMatchTimeFormat(t *testing.T) {
	layouts := map[string]string{"year": "2006", "month": "2006-01", "day": "2006-01-02", "hour": "2006-01-02T15", "minute": "2006-01-02T15:04"}
	times := []int64{0, -1, 1772360130250, timestamps.MinEventMs, timestamps.MaxEventMs, 951782400000 /* 2000-02-29 */, -62135596800000 + 3600_000}
	for name, layout := range layouts {
		for _, ms := range times {
			want := time.UnixMilli(ms).UTC().Format(layout)
			if got := string(schemas.Appenders[name](nil, schemas.Value{Kind: schemas.KindTime, Int: ms})); got != want {
				t.Errorf("%s(%d) = %q; want %q", name, ms, got, want)
			}
		}
	}
}
