// Package synth generates readings of any dataset spec from its field
// declarations: identity fields from a pool of ids, the event time given by
// the caller, numbers inside the spec's declared ranges, enums from their
// values, and a configurable share of optional fields left out (null). The
// same reading comes out for the same id, event time and seed, so workloads
// are reproducible. Payloads are JSON objects, or the spec's declared
// protobuf message (codec.ProtoCodec) for --format=proto.
//
// launch/publish (make stream, make samples) and the benchmarks in
// launch/bench generate their input here.
package synth

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
)

// Options shape the generated readings.
type Options struct {
	// IDs is the size of the identity pool: readings of ids 0..IDs-1 (for
	// ranges and baselines; AppendJSON accepts any id). Default 100.
	IDs int
	// MissingShare is the share of optional fields written as null
	// (0..1). Default 0: every field present.
	MissingShare float64
	// EpochMsShare is the share of timestamps written as epoch
	// milliseconds instead of RFC 3339 strings (0..1).
	EpochMsShare float64
	// Seed varies the values; the same seed gives the same readings.
	Seed uint64
}

// Generator makes the readings of one spec. It is safe for concurrent use.
type Generator struct {
	spec   *schemas.Spec
	opts   Options
	fields []field
	codec  *codec.ProtoCodec // nil when the spec declares no protobuf message
}

// field is one declared field and how its values are made.
type field struct {
	spec     schemas.FieldSpec
	path     []string // JSON path segments
	identity int      // position in the spec's identity, or -1
	prefix   string   // of generated strings
	lo, hi   float64  // the value range of numbers
	salt     uint64
}

// New returns a generator for spec (a checked spec: hours.Compile's).
func New(spec *schemas.Spec, opts Options) (*Generator, error) {
	if opts.IDs <= 0 {
		opts.IDs = 100
	}
	if !(opts.MissingShare >= 0 && opts.MissingShare <= 1) || !(opts.EpochMsShare >= 0 && opts.EpochMsShare <= 1) {
		return nil, errors.New("synth: MissingShare and EpochMsShare must be in [0, 1]")
	}
	g := &Generator{spec: spec, opts: opts}
	for i, f := range spec.Fields {
		path := f.Path
		if path == "" {
			path = f.Name
		}
		gf := field{spec: f, path: strings.Split(path, "."), identity: -1, salt: uint64(i+1) * 0x9e3779b97f4a7c15}
		for j, id := range spec.Identity {
			if id == f.Name {
				gf.identity = j
			}
		}
		gf.prefix = strings.TrimSuffix(strings.TrimSuffix(f.Name, "_id"), "Id")
		gf.lo, gf.hi = 0, 100
		switch {
		case f.Min != nil && f.Max != nil:
			gf.lo, gf.hi = *f.Min, *f.Max
		case f.Min != nil:
			gf.lo, gf.hi = *f.Min, *f.Min+100
		case f.Max != nil:
			gf.lo, gf.hi = *f.Max-100, *f.Max
		}
		g.fields = append(g.fields, gf)
	}
	if spec.Proto != nil {
		c, err := codec.NewProtoCodec(spec)
		if err != nil {
			return nil, err
		}
		g.codec = c
	}
	return g, nil
}

// Spec is the spec the generator was made for.
func (g *Generator) Spec() *schemas.Spec { return g.spec }

// rng is a small deterministic random source for one reading: the same id,
// event time and seed give the same values, with no shared state.
type rng struct{ pcg rand.PCG }

func newRNG(seed uint64, id int, ms int64, salt uint64) *rng {
	r := &rng{}
	r.pcg.Seed(seed^uint64(id)*0xbf58476d1ce4e5b9^salt, uint64(ms)*0x94d049bb133111eb+salt)
	return r
}

func (r *rng) float() float64 { return float64(r.pcg.Uint64()>>11) / (1 << 53) }
func (r *rng) intn(n int) int { return int(r.pcg.Uint64() % uint64(n)) }

// AppendJSON appends the reading of identity id at event time ms (epoch
// milliseconds) as a JSON object, without a newline.
func (g *Generator) AppendJSON(dst []byte, id int, ms int64) []byte {
	return g.appendJSON(dst, id, ms, -1)
}

// AppendOutOfRange is AppendJSON with one bounded numeric field (chosen by
// the reading's randomness) set beyond its declared range, so the pipeline
// dead-letters it as out_of_range. ok is false when the spec bounds no
// number.
func (g *Generator) AppendOutOfRange(dst []byte, id int, ms int64) (out []byte, ok bool) {
	var bounded []int
	for i, f := range g.fields {
		if (f.spec.Type == schemas.TypeFloat || f.spec.Type == schemas.TypeInt) && (f.spec.Min != nil || f.spec.Max != nil) && f.identity < 0 {
			bounded = append(bounded, i)
		}
	}
	if len(bounded) == 0 {
		return dst, false
	}
	r := newRNG(g.opts.Seed, id, ms, 0xbad)
	return g.appendJSON(dst, id, ms, bounded[r.intn(len(bounded))]), true
}

// AppendProto appends the reading as the spec's declared protobuf message.
func (g *Generator) AppendProto(dst []byte, id int, ms int64) ([]byte, error) {
	return g.EncodeProto(dst, g.AppendJSON(nil, id, ms))
}

// EncodeProto encodes a JSON reading (AppendJSON's) as the spec's declared
// protobuf message.
func (g *Generator) EncodeProto(dst, obj []byte) ([]byte, error) {
	if g.codec == nil {
		return dst, fmt.Errorf("synth: spec %s declares no protobuf message (proto:), so it has no --format=proto payload", g.spec.Name)
	}
	return g.codec.AppendProto(dst, obj)
}

// member is one rendered JSON member: a path and its value's JSON.
type member struct {
	path []string
	val  []byte
}

func (g *Generator) appendJSON(dst []byte, id int, ms int64, outOfRange int) []byte {
	ex := g.spec.Explode
	members := make([]member, 0, len(g.fields)+1)
	var point []byte
	for i := range g.fields {
		f := &g.fields[i]
		if ex != nil && (f.spec.Name == ex.TimeField || f.spec.Name == ex.ValueField) {
			continue
		}
		members = append(members, member{f.path, g.value(nil, f, id, ms, i == outOfRange)})
	}
	if ex != nil {
		// One [time, value] point in the exploded array.
		point = append(point, "[["...)
		point = strconv.AppendInt(point, ms, 10)
		point = append(point, ',')
		vf := g.spec.Field(ex.ValueField)
		for i := range g.fields {
			if g.fields[i].spec.Name == vf.Name {
				v := g.value(nil, &g.fields[i], id, ms, i == outOfRange)
				if string(v) == "null" {
					v = []byte("0")
				}
				point = append(point, v...)
			}
		}
		point = append(point, "]]"...)
		members = append(members, member{strings.Split(ex.Path, "."), point})
	}
	return appendObject(dst, members, 0)
}

// appendObject writes members as one JSON object, members sharing a first
// path segment nested in one object, in declaration order.
func appendObject(dst []byte, members []member, depth int) []byte {
	dst = append(dst, '{')
	done := make([]bool, len(members))
	first := true
	for i, m := range members {
		if done[i] {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		b, _ := json.Marshal(m.path[depth])
		dst = append(dst, b...)
		dst = append(dst, ':')
		if len(m.path) == depth+1 {
			dst = append(dst, m.val...)
			continue
		}
		var sub []member
		for j := i; j < len(members); j++ {
			if !done[j] && len(members[j].path) > depth+1 && members[j].path[depth] == m.path[depth] {
				sub = append(sub, members[j])
				done[j] = true
			}
		}
		dst = appendObject(dst, sub, depth+1)
	}
	return append(dst, '}')
}

// value appends f's JSON value in the reading of id at ms.
func (g *Generator) value(dst []byte, f *field, id int, ms int64, outOfRange bool) []byte {
	r := newRNG(g.opts.Seed, id, ms, f.salt)
	s := &f.spec
	if !s.Required && f.identity < 0 && !outOfRange && r.float() < g.opts.MissingShare {
		return append(dst, "null"...)
	}
	switch s.Type {
	case schemas.TypeTimestamp:
		if r.float() < g.opts.EpochMsShare {
			return strconv.AppendInt(dst, ms, 10)
		}
		dst = append(dst, '"')
		dst = time.UnixMilli(ms).UTC().AppendFormat(dst, "2006-01-02T15:04:05.000Z07:00")
		return append(dst, '"')
	case schemas.TypeFloat, schemas.TypeInt:
		v := f.number(g.opts.Seed, id, r)
		if f.identity >= 0 {
			v = f.lo + float64(id%int(math.Max(1, f.hi-f.lo+1)))
		}
		if outOfRange {
			span := math.Max(1, (f.hi-f.lo)*0.1)
			if s.Max != nil {
				v = *s.Max + span*(0.1+r.float())
			} else {
				v = *s.Min - span*(0.1+r.float())
			}
		}
		if s.Type == schemas.TypeInt {
			if outOfRange && s.Max != nil {
				v = math.Ceil(v) // beyond an inclusive max even after rounding
			} else if outOfRange {
				v = math.Floor(v)
			}
			return strconv.AppendInt(dst, int64(math.Round(v)), 10)
		}
		v = math.Round(v*10) / 10
		if !outOfRange {
			v = math.Max(f.lo, math.Min(f.hi, v))
		}
		return strconv.AppendFloat(dst, v, 'f', -1, 64)
	case schemas.TypeBool:
		return strconv.AppendBool(dst, r.intn(2) == 1)
	case schemas.TypeTags:
		n := id // an identity's tags are the id's
		if f.identity < 0 {
			n = r.intn(max(1, g.opts.IDs))
		}
		return fmt.Appendf(dst, `{"host":"host-%d"}`, n)
	default: // string, bytes
		var v string
		switch {
		case len(s.Enum) > 0 && f.identity >= 0:
			v = s.Enum[id%len(s.Enum)]
		case len(s.Enum) > 0:
			v = s.Enum[r.intn(len(s.Enum))]
		case f.identity >= 0:
			v = f.prefix + "-" + pad(id, 5)
		default:
			v = f.prefix + "-" + pad(r.intn(max(1, g.opts.IDs)), 5)
		}
		if s.MaxLength > 0 && len(v) > s.MaxLength {
			v = v[len(v)-s.MaxLength:]
		}
		b, _ := json.Marshal(v) // a string always marshals
		return append(dst, b...)
	}
}

// number is a value near id's baseline: each id has its own level in the
// middle half of the range, and readings vary around it by 2% of the range.
func (f *field) number(seed uint64, id int, r *rng) float64 {
	base := newRNG(seed, id, 0, f.salt^0xba5e).float()
	span := f.hi - f.lo
	v := f.lo + span*(0.25+0.5*base) + span*0.02*(2*r.float()-1)
	return math.Max(f.lo, math.Min(f.hi, v))
}

func pad(n, width int) string {
	s := strconv.Itoa(n)
	if len(s) < width {
		s = strings.Repeat("0", width-len(s)) + s
	}
	return s
}
