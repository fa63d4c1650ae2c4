package hours

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
)

// TestCompile: every check happens in Compile, and its errors name the
// file, the YAML path or the format, and the fix.
func TestCompile(t *testing.T) {
	vitals := func(edit func(*schemas.Spec)) *schemas.Spec {
		s, err := schemas.BuiltinSpec("vitals")
		if err != nil {
			t.Fatal(err)
		}
		if edit != nil {
			edit(s)
		}
		return s
	}
	for _, tc := range []struct {
		name   string
		spec   *schemas.Spec
		opts   CompileOptions
		is     error
		substr []string
	}{
		{name: "vitals as json", spec: vitals(nil)},
		{name: "vitals as proto", spec: vitals(nil), opts: CompileOptions{Format: "proto"}},
		{name: "no spec", is: schemas.ErrSpec},
		{name: "unknown format", spec: vitals(nil), opts: CompileOptions{Format: "avro"}, is: codec.ErrFormat,
			substr: []string{`"avro"`, "json, proto"}},
		{name: "a field proto cannot carry", spec: vitals(func(s *schemas.Spec) { s.Fields[0].Path = "device.serial" }),
			opts: CompileOptions{Format: "proto"}, is: codec.ErrFormat, substr: []string{"device.serial", "--format=json"}},
		{name: "proto without a declaration", spec: vitals(func(s *schemas.Spec) { s.Proto = nil }),
			opts: CompileOptions{Format: "proto"}, is: codec.ErrFormat, substr: []string{"vitals.yaml", "proto: missing", "message", "--format=json"}},
		{name: "proto declaration of an unknown field", spec: vitals(func(s *schemas.Spec) { s.Proto.Fields[3].Field = "hart_rate" }),
			is: schemas.ErrSpec, substr: []string{"vitals.yaml", "proto.fields[3].field", `"hart_rate" is not a declared field`}},
		{name: "proto declaration with a duplicate number", spec: vitals(func(s *schemas.Spec) { s.Proto.Fields[4].Number = 4 }),
			is: schemas.ErrSpec, substr: []string{"proto.fields[4].number", "also proto.fields[3]'s", "its own number"}},
		{name: "proto declaration with a reserved number", spec: vitals(func(s *schemas.Spec) { s.Proto.Fields[4].Number = 19001 }),
			is: schemas.ErrSpec, substr: []string{"proto.fields[4].number", "reserved"}},
		{name: "proto wire type unfit for the field", spec: vitals(func(s *schemas.Spec) { s.Proto.Fields[0].Type = "double" }),
			is: schemas.ErrSpec, substr: []string{"proto.fields[0].type", "fixed64", "cannot carry string field \"sensor_id\"", "use string"}},
		{name: "proto type unknown", spec: vitals(func(s *schemas.Spec) { s.Proto.Fields[3].Type = "float64" }),
			is: schemas.ErrSpec, substr: []string{"proto.fields[3].type", `unknown protobuf type "float64"`, "double"}},
		{name: "proto field carried twice", spec: vitals(func(s *schemas.Spec) { s.Proto.Fields[4].Field = "heart_rate" }),
			is: schemas.ErrSpec, substr: []string{"proto.fields[4].field", "already carried by proto.fields[3]"}},
		{name: "proto without message name", spec: vitals(func(s *schemas.Spec) { s.Proto.Message = "" }),
			is: schemas.ErrSpec, substr: []string{"proto.message", "missing"}},
		{name: "proto leaves a required field out", spec: vitals(func(s *schemas.Spec) { s.Proto.Fields = s.Proto.Fields[:6] }),
			opts: CompileOptions{Format: "proto"}, is: codec.ErrFormat, substr: []string{"proto.fields", `required field "battery_level"`, "add {number: N, field: battery_level, type: double}"}},
		{name: "rollup family missing", spec: vitals(func(s *schemas.Spec) { s.Rollup.Family = "" }), is: schemas.ErrSpec,
			substr: []string{"vitals.yaml", "rollup.family", "name the Bigtable column family"}},
		{name: "field check", spec: vitals(func(s *schemas.Spec) { s.EventTime = "nope" }), is: schemas.ErrSpec,
			substr: []string{"vitals.yaml", "event_time", `"nope"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Compile(tc.spec, tc.opts)
			if tc.is == nil {
				if err != nil {
					t.Fatalf("Compile: %v", err)
				}
				if c.Builder() == nil || c.Decoder() == nil || len(c.BigQueryTables()) != 2 {
					t.Errorf("compiled %+v lacks its builder, decoder or the two BigQuery tables", c)
				}
				return
			}
			if !errors.Is(err, tc.is) {
				t.Fatalf("Compile = %v; want an error wrapping %v", err, tc.is)
			}
			for _, s := range tc.substr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if strings.Contains(err.Error(), "schemas.") {
				t.Errorf("error %q names a Go type", err)
			}
		})
	}
}

// TestCompiledJSON: a DoFn's copy (Beam encodes DoFns as JSON) decodes
// compiled, with its options and file.
func TestCompiledJSON(t *testing.T) {
	s, err := schemas.BuiltinSpec("vitals")
	if err != nil {
		t.Fatal(err)
	}
	c := MustCompile(s, CompileOptions{Format: "proto"})
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var got Compiled
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Options().Format != "proto" || got.File() != "vitals.yaml" || got.Builder() == nil || got.Roller() == nil {
		t.Errorf("decoded %+v: want format proto, file vitals.yaml, a builder and a roller", got)
	}
	if err := json.Unmarshal([]byte(`{"spec":{"Name":""}}`), &got); !errors.Is(err, schemas.ErrSpec) {
		t.Errorf("decoding a bad spec = %v; want ErrSpec", err)
	}
}

// TestDefaultSpecIsBuiltin: specs/DEFAULT names a built-in spec that
// compiles, for the tools' defaults.
func TestDefaultSpecIsBuiltin(t *testing.T) {
	s, err := schemas.BuiltinSpec(schemas.DefaultSpecName())
	if err != nil {
		t.Fatalf("DefaultSpecName %q: %v", schemas.DefaultSpecName(), err)
	}
	if _, err := Compile(s, CompileOptions{}); err != nil {
		t.Fatal(err)
	}
}
