package synth

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

var start = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixMilli()

func compile(t *testing.T, name, format string) *hours.Compiled {
	t.Helper()
	s, err := schemas.BuiltinSpec(name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := hours.Compile(s, hours.CompileOptions{Format: format})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// parse decodes and checks one payload as the pipeline does.
func parse(c *hours.Compiled, payload []byte) ([]schemas.Record, error) {
	recs, err := c.Decoder().ParseString(nil, string(payload), "synth")
	for i := range recs {
		if err == nil {
			err = c.Builder().Check(&recs[i])
		}
	}
	return recs, err
}

// TestEverySpecGeneratesValidReadings: for every built-in spec the
// generated readings are valid, the identity comes from the pool, the
// event time is the one asked for, and the missing share is about as asked.
func TestEverySpecGeneratesValidReadings(t *testing.T) {
	for _, name := range schemas.BuiltinSpecNames() {
		t.Run(name, func(t *testing.T) {
			c := compile(t, name, "json")
			g, err := New(c.Spec, Options{IDs: 20, MissingShare: 0.3, EpochMsShare: 0.5, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			ids := map[string]bool{}
			nulls, optional := 0, 0
			for id := 0; id < 20; id++ {
				for s := 0; s < 50; s++ {
					ms := start + int64(s)*1000 + int64(id)
					line := g.AppendJSON(nil, id, ms)
					recs, err := parse(c, line)
					if err != nil {
						t.Fatalf("%s: %v", line, err)
					}
					if len(recs) != 1 || recs[0].EventMs != ms {
						t.Fatalf("%s: %d records, event time %v; want one at %d", line, len(recs), recs, ms)
					}
					ids[group.IdentityKey(c.Spec, &recs[0])] = true
					var m map[string]any
					if err := json.Unmarshal(line, &m); err != nil {
						t.Fatal(err)
					}
					for _, f := range c.Spec.Fields {
						if !f.Required && f.Path == "" {
							optional++
							if v, ok := m[f.Name]; ok && v == nil {
								nulls++
							}
						}
					}
				}
			}
			if len(ids) != 20 {
				t.Errorf("%d identities; want the pool's 20", len(ids))
			}
			if optional > 0 && (nulls < optional/5 || nulls > optional*2/5) {
				t.Errorf("%d of %d optional values null; want about 30%%", nulls, optional)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	c := compile(t, "traffic", "json")
	a, _ := New(c.Spec, Options{Seed: 3, MissingShare: 0.5})
	b, _ := New(c.Spec, Options{Seed: 3, MissingShare: 0.5})
	o, _ := New(c.Spec, Options{Seed: 4, MissingShare: 0.5})
	if x, y := a.AppendJSON(nil, 7, start), b.AppendJSON(nil, 7, start); !bytes.Equal(x, y) {
		t.Errorf("same seed, id and time: %s and %s", x, y)
	}
	if x, y := a.AppendJSON(nil, 7, start), o.AppendJSON(nil, 7, start); bytes.Equal(x, y) {
		t.Errorf("seeds 3 and 4 give the same reading %s", x)
	}
}

// TestOutOfRange: a bad reading is dead-lettered as out_of_range; a spec
// without ranges has none.
func TestOutOfRange(t *testing.T) {
	for _, tt := range []struct {
		spec string
		ok   bool
	}{{"vitals", true}, {"traffic", true}, {"user_events", false}} {
		t.Run(tt.spec, func(t *testing.T) {
			c := compile(t, tt.spec, "json")
			g, _ := New(c.Spec, Options{Seed: 9})
			for id := 0; id < 30; id++ {
				line, ok := g.AppendOutOfRange(nil, id, start+int64(id))
				if ok != tt.ok {
					t.Fatalf("AppendOutOfRange ok = %v; want %v", ok, tt.ok)
				}
				if !ok {
					return
				}
				if _, err := parse(c, line); !errors.Is(err, schemas.ErrOutOfRange) {
					t.Fatalf("%s: error %v; want out_of_range", line, err)
				}
			}
		})
	}
}

// TestProtoCarriesTheSameReading: the protobuf payload parses to the record
// of its JSON twin; a spec without a proto declaration says so.
func TestProtoCarriesTheSameReading(t *testing.T) {
	cj, cp := compile(t, "vitals", "json"), compile(t, "vitals", "proto")
	g, _ := New(cj.Spec, Options{MissingShare: 0.2, EpochMsShare: 0.3, Seed: 5})
	for id := 0; id < 50; id++ {
		ms := start + int64(id)*997
		j, err := parse(cj, g.AppendJSON(nil, id, ms))
		if err != nil {
			t.Fatal(err)
		}
		b, err := g.AppendProto(nil, id, ms)
		if err != nil {
			t.Fatal(err)
		}
		p, err := parse(cp, b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(j[0].Values, p[0].Values) || j[0].EventMs != p[0].EventMs {
			t.Errorf("id %d: json %+v, proto %+v", id, j[0], p[0])
		}
	}
	tg, _ := New(compile(t, "traffic", "json").Spec, Options{})
	if _, err := tg.AppendProto(nil, 1, start); err == nil {
		t.Error("AppendProto for traffic (no proto declaration): no error")
	}
}

func TestOptions(t *testing.T) {
	c := compile(t, "vitals", "json")
	for _, o := range []Options{{MissingShare: -0.1}, {MissingShare: 1.5}, {EpochMsShare: 2}} {
		if _, err := New(c.Spec, o); err == nil {
			t.Errorf("New(%+v): no error", o)
		}
	}
}
