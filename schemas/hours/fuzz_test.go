package hours

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/internal/spectest"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
)

// The fuzz targets' seed corpora are the files under the repository's
// testdata/fuzz/<target>/, one input per file (a line, a payload). go test
// runs them as regular tests; make fuzz runs the targets long
// (go test -fuzz), and crashers it finds land in this package's own
// testdata/fuzz, in Go's corpus format.
func addSeeds(f *testing.F, target string) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "fuzz", target, "*"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed corpus under testdata/fuzz/%s", target)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// isReason reports whether err wraps one of the dead-letter reasons.
func isReason(err error) bool {
	for _, r := range schemas.ReasonErrors {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}

// checkRecords asserts what every parsed record must be: its values fit
// the spec's field types, its event time is in the accepted range, its
// payload is the input, and building its cells and BigQuery row cannot
// panic.
func checkRecords(t *testing.T, spec *schemas.Spec, b *Builder, recs []schemas.Record, raw string) {
	minMs, maxMs := spec.EventTimeBounds()
	for i := range recs {
		r := &recs[i]
		if len(r.Values) != spec.NumValues() {
			t.Fatalf("record has %d values; the spec %d", len(r.Values), spec.NumValues())
		}
		if r.EventMs < minMs || r.EventMs > maxMs {
			t.Fatalf("event time %d outside [%d, %d]", r.EventMs, minMs, maxMs)
		}
		if r.Raw != raw {
			t.Fatalf("payload %q; want the input %q", r.Raw, raw)
		}
		for j, f := range spec.Fields {
			v := r.Values[j]
			if v.Kind != schemas.KindNull && v.Kind != schemas.KindOfType(f.Type) {
				t.Fatalf("field %s (%s) holds kind %d", f.Name, f.Type, v.Kind)
			}
			if f.Required && v.Kind == schemas.KindNull {
				t.Fatalf("required field %s is null", f.Name)
			}
		}
		if err := b.Check(r); err != nil {
			continue // a parse caller dead-letters it
		}
		b.Mutations([]schemas.Record{*r})
		if spec.BigQuery != nil {
			b.BQRow(r, 1)
		}
	}
}

// FuzzParseJSON feeds arbitrary lines to the JSON parser of the vitals and
// Heroic specs (the second explodes points): every line ends in records
// that satisfy the spec, or an error carrying a dead-letter reason.
func FuzzParseJSON(f *testing.F) {
	addSeeds(f, "FuzzParseJSON")
	type target struct {
		spec *schemas.Spec
		p    *codec.Parser
		b    *Builder
	}
	var targets []target
	for _, name := range []string{"vitals", "heroic_metrics"} {
		spec := spectest.Must(f, name)
		b, err := NewBuilder(spec)
		if err != nil {
			f.Fatal(err)
		}
		targets = append(targets, target{spec, codec.NewParser(spec), b})
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, tg := range targets {
			recs, err := tg.p.ParseString(nil, string(line), "fuzz")
			if err != nil {
				if !isReason(err) {
					t.Fatalf("%s: error %v carries no dead-letter reason", tg.spec.Name, err)
				}
				continue
			}
			checkRecords(t, tg.spec, tg.b, recs, string(line))
		}
	})
}

// FuzzParseProto feeds arbitrary bytes to the proto parser (the vitals
// spec's declared sensorpipe.v1.Reading per payload), and checks its
// decoding against protobuf's own (dynamicpb).
func FuzzParseProto(f *testing.F) {
	addSeeds(f, "FuzzParseProto")
	spec := spectest.Must(f, "vitals")
	p, err := codec.NewProtoParser(spec)
	if err != nil {
		f.Fatal(err)
	}
	b, err := NewBuilder(spec)
	if err != nil {
		f.Fatal(err)
	}
	pc, err := codec.NewProtoCodec(spec)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		// The spec-declared codec decodes as protobuf's own decoder does.
		if err := checkProtoOracle(pc, payload); err != nil {
			t.Fatal(err)
		}
		recs, err := p.Parse(nil, payload, "fuzz")
		if err != nil {
			if !isReason(err) {
				t.Fatalf("error %v carries no dead-letter reason", err)
			}
			return
		}
		for i := range recs {
			// A proto record's payload is its JSON rendering.
			checkRecords(t, spec, b, recs[i:i+1], recs[i].Raw)
		}
	})
}

// FuzzRowKey renders the row keys of every built-in spec's tables for
// fuzzed field values (each input line is field=value pairs, one a line)
// and decodes them back: a key renders or is refused with a reason, fits
// Bigtable's 4 KB, and gives back the fields its template keeps whole.
func FuzzRowKey(f *testing.F) {
	addSeeds(f, "FuzzRowKey")
	var specs []*schemas.Spec
	for _, name := range schemas.BuiltinSpecNames() {
		specs = append(specs, spectest.Must(f, name))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		vals := map[string]string{}
		for _, kv := range strings.Split(string(in), "\n") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				vals[k] = v
			}
		}
		for _, spec := range specs {
			r := schemas.Record{Values: make([]schemas.Value, spec.NumValues())}
			for i, fs := range spec.Fields {
				v, ok := vals[fs.Name]
				if !ok {
					continue
				}
				r.Values[i] = fuzzValue(fs.Type, v)
			}
			r.EventMs = r.Values[spec.FieldIndex(spec.EventTime)].Int
			for _, tbl := range spec.Bigtable.Tables {
				tmpl, err := schemas.CompileTemplate(tbl.RowKey, spec)
				if err != nil {
					t.Fatalf("%s: %v", spec.Name, err)
				}
				tmpl = tmpl.WithEscape(tbl.Escape)
				key, err := rowkey.Render(tmpl, nil, &r)
				if err != nil {
					if !isReason(err) {
						t.Fatalf("%s %s: render error %v carries no dead-letter reason", spec.Name, tbl.Name, err)
					}
					continue
				}
				if len(key) > 4096 {
					t.Fatalf("%s %s: a key of %d bytes", spec.Name, tbl.Name, len(key))
				}
				parts, err := rowkey.DecodeKey(spec, tbl.Name, string(key))
				if err != nil {
					continue // a template that cannot be split (a tag set before its own separator)
				}
				for field, part := range parts {
					got, ok := part.Decode()
					if !ok {
						continue // a lossy rendering: a bucket, a hash
					}
					want := r.Values[spec.FieldIndex(field)]
					if string(schemas.AppendText(nil, got)) != string(schemas.AppendText(nil, want)) {
						t.Fatalf("%s %s: key %q gives %s=%q back; rendered from %q", spec.Name, tbl.Name, key, field, schemas.AppendText(nil, got), schemas.AppendText(nil, want))
					}
				}
			}
		}
	})
}

// fuzzValue turns a fuzzed text into a value of a field type.
func fuzzValue(typ, s string) schemas.Value {
	switch typ {
	case schemas.TypeInt:
		var n int64
		for _, c := range s {
			n = n*31 + int64(c)
		}
		return schemas.Value{Kind: schemas.KindInt, Int: n}
	case schemas.TypeFloat:
		return schemas.Value{Kind: schemas.KindFloat, Num: float64(len(s)) / 7}
	case schemas.TypeTimestamp:
		var n int64
		for _, c := range s {
			n = n*131 + int64(c)
		}
		return schemas.Value{Kind: schemas.KindTime, Int: n % (253402300799999 + 1)}
	case schemas.TypeBool:
		return schemas.Value{Kind: schemas.KindBool, Bool: len(s)%2 == 0}
	case schemas.TypeTags:
		var pairs []schemas.Pair
		for _, kv := range strings.Split(s, ",") {
			k, v, _ := strings.Cut(kv, ":")
			pairs = append(pairs, schemas.Pair{K: k, V: v})
		}
		return schemas.Value{Kind: schemas.KindTags, Pairs: pairs}
	case schemas.TypeBytes:
		return schemas.Value{Kind: schemas.KindBytes, Str: s}
	}
	return schemas.Value{Kind: schemas.KindString, Str: s}
}

// FuzzDeadLetter encodes a dead letter of any payload as the dead-letter
// writers do (JSON) and decodes it: the payload comes back byte for byte,
// through payload_base64 when it is not valid UTF-8.
func FuzzDeadLetter(f *testing.F) {
	addSeeds(f, "FuzzDeadLetter")
	f.Fuzz(func(t *testing.T, payload []byte) {
		d := deadletter.NewDeadLetter(deadletter.SinkParse, string(payload), "src", schemas.ErrMalformed, time.Unix(0, 0))
		line, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		if !utf8.Valid(line) || strings.ContainsAny(string(line), "\n\r") {
			t.Fatalf("encoded dead letter %q is not one line of UTF-8", line)
		}
		var back deadletter.DeadLetter
		if err := json.Unmarshal(line, &back); err != nil {
			t.Fatalf("unmarshal %q: %v", line, err)
		}
		got, err := back.PayloadBytes()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(payload) {
			t.Fatalf("payload %q came back as %q", payload, got)
		}
		if back.Reason != "malformed" || back.Sink != deadletter.SinkParse {
			t.Fatalf("reason %q sink %q", back.Reason, back.Sink)
		}
	})
}
