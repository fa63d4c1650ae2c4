package packed

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/sensorpipe/sensorpipe/schemas"
)

// A stream keeps each identity-hour's readings in state until the hour
// closes plus the allowed lateness, so that late firings can re-impute the
// hour and rewrite what moved. AppendHeld packs them for that state with
// only what re-imputation, the rollup and a rewrite need: each reading's
// event time, its source, and its observed values. It leaves out the raw
// payload (a reading that must be dead-lettered later gets its
// CanonicalJSON) and imputed values (re-imputation recomputes them), and it
// writes a value only where it differs from the previous reading's (an
// identity's readings share their identity fields and often more), times
// and integers as deltas, and floats as their shortest decimal text. A
// vitals reading takes about 20 bytes instead of about 300.

// A held value starts with one byte: its kind in the low four bits, and in
// the high four a float's encoding: 0 for its 8 bytes, else the length of
// its shortest round-trip decimal text, which follows (a vitals reading's
// values are 2 to 4 characters). Times follow as their delta from the
// reading's event time (usually 0: one byte), integers as their delta from
// the previous reading's.
const (
	heldKindBits = 0x0f
	heldMaxText  = 0x0f // the longest float text held as text
)

// AppendHeld appends recs, packed as described above, to dst.
func AppendHeld(s *schemas.Spec, dst []byte, recs []schemas.Record) []byte {
	nv := s.NumValues()
	dst = binary.AppendUvarint(dst, uint64(len(recs)))
	// The distinct sources, each once.
	var sources []string
	index := map[string]int{}
	for i := range recs {
		if _, ok := index[recs[i].Source]; !ok {
			index[recs[i].Source] = len(sources)
			sources = append(sources, recs[i].Source)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(sources)))
	for _, src := range sources {
		dst = appendString(dst, src)
	}
	prev := make([]schemas.Value, nv)
	cur := make([]schemas.Value, nv)
	var prevMs int64
	same := make([]byte, (nv+7)/8)
	for i := range recs {
		r := &recs[i]
		s.Observed(cur, r)
		dst = binary.AppendVarint(dst, r.EventMs-prevMs)
		dst = binary.AppendUvarint(dst, uint64(index[r.Source]))
		clear(same)
		for j := range cur {
			if cur[j].Same(&prev[j]) {
				same[j/8] |= 1 << (j % 8)
			}
		}
		dst = append(dst, same...)
		for j := range cur {
			if same[j/8]&(1<<(j%8)) == 0 {
				dst = appendHeldValue(dst, &cur[j], &prev[j], r.EventMs)
			}
		}
		prev, cur = cur, prev
		prevMs = r.EventMs
	}
	return dst
}

// appendHeldValue appends v: a time as its delta from eventMs, an integer
// as its delta from prev when prev is one too.
func appendHeldValue(dst []byte, v, prev *schemas.Value, eventMs int64) []byte {
	switch v.Kind {
	case schemas.KindString, schemas.KindBytes:
		dst = appendString(append(dst, v.Kind), v.Str)
	case schemas.KindFloat:
		var buf [24]byte
		text := strconv.AppendFloat(buf[:0], v.Num, 'g', -1, 64)
		if len(text) <= heldMaxText {
			dst = append(append(dst, v.Kind|byte(len(text))<<4), text...)
		} else {
			dst = binary.LittleEndian.AppendUint64(append(dst, v.Kind), math.Float64bits(v.Num))
		}
	case schemas.KindTime:
		dst = binary.AppendVarint(append(dst, v.Kind), v.Int-eventMs)
	case schemas.KindInt:
		base := int64(0)
		if prev.Kind == v.Kind {
			base = prev.Int
		}
		dst = binary.AppendVarint(append(dst, v.Kind), v.Int-base)
	case schemas.KindBool:
		b := byte(0)
		if v.Bool {
			b = 1
		}
		dst = append(dst, v.Kind, b)
	case schemas.KindTags:
		dst = binary.AppendUvarint(append(dst, v.Kind), uint64(len(v.Pairs)))
		for _, p := range v.Pairs {
			dst = appendString(appendString(dst, p.K), p.V)
		}
	default:
		dst = append(dst, v.Kind)
	}
	return dst
}

// DecodeHeld appends the readings AppendHeld packed in b to dst. Their Raw
// is empty; their values are the observed ones, with null flags.
func DecodeHeld(s *schemas.Spec, dst []schemas.Record, b []byte) ([]schemas.Record, error) {
	nv := s.NumValues()
	d := Reader{b: b}
	n := d.Uvarint()
	if n > uint64(len(b)) {
		return dst, fmt.Errorf("%w: %d held readings in %d bytes", ErrCodec, n, len(b))
	}
	ns := d.Uvarint()
	if ns > uint64(len(b)) {
		return dst, fmt.Errorf("%w: %d sources in %d bytes", ErrCodec, ns, len(b))
	}
	sources := make([]string, ns)
	for i := range sources {
		sources[i] = d.string()
	}
	// One allocation for the values of every reading.
	values := make([]schemas.Value, int(n)*nv)
	var prev []schemas.Value
	var ms int64
	for i := 0; i < int(n) && d.err == nil; i++ {
		cur := values[i*nv : (i+1)*nv : (i+1)*nv]
		ms += d.Varint()
		src := d.Uvarint()
		if src >= uint64(len(sources)) {
			return dst, fmt.Errorf("%w: held reading's source %d of %d", ErrCodec, src, len(sources))
		}
		same := d.heldBytes((nv + 7) / 8)
		for j := range cur {
			var p *schemas.Value
			if prev != nil {
				p = &prev[j]
			} else {
				p = &schemas.Value{}
			}
			if len(same) == (nv+7)/8 && same[j/8]&(1<<(j%8)) != 0 {
				cur[j] = *p
				continue
			}
			if err := d.heldValue(&cur[j], p, ms); err != nil {
				return dst, err
			}
		}
		dst = append(dst, schemas.Record{Values: cur, EventMs: ms, Source: sources[src]})
		prev = cur
	}
	if d.err != nil {
		return dst, d.err
	}
	if len(d.b) != 0 {
		return dst, fmt.Errorf("%w: %d bytes after the held readings", ErrCodec, len(d.b))
	}
	return dst, nil
}

// heldValue decodes what appendHeldValue wrote into v.
func (d *Reader) heldValue(v, prev *schemas.Value, eventMs int64) error {
	head := d.byte()
	v.Kind = head & heldKindBits
	switch v.Kind {
	case schemas.KindNull:
	case schemas.KindString, schemas.KindBytes:
		v.Str = d.string()
	case schemas.KindFloat:
		if n := int(head >> 4); n > 0 {
			text := d.heldBytes(n)
			f, err := strconv.ParseFloat(string(text), 64)
			if err != nil && d.err == nil {
				return fmt.Errorf("%w: held float: %v", ErrCodec, err)
			}
			v.Num = f
		} else {
			v.Num = math.Float64frombits(d.Uint64())
		}
	case schemas.KindTime:
		v.Int = eventMs + d.Varint()
	case schemas.KindInt:
		base := int64(0)
		if prev.Kind == v.Kind {
			base = prev.Int
		}
		v.Int = base + d.Varint()
	case schemas.KindBool:
		v.Bool = d.byte() == 1
	case schemas.KindTags:
		np := d.Uvarint()
		if np > uint64(len(d.b)) {
			return fmt.Errorf("%w: %d tags in %d bytes", ErrCodec, np, len(d.b))
		}
		v.Pairs = make([]schemas.Pair, np)
		for j := range v.Pairs {
			v.Pairs[j] = schemas.Pair{K: d.string(), V: d.string()}
		}
	default:
		return fmt.Errorf("%w: unknown value kind %d", ErrCodec, v.Kind)
	}
	return d.err
}

// heldBytes takes the next n bytes.
func (d *Reader) heldBytes(n int) []byte {
	if len(d.b) < n {
		d.fail("bitmap")
		return nil
	}
	b := d.b[:n]
	d.b = d.b[n:]
	return b
}
