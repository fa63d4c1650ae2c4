package schemas

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrCodec is a record encoding that cannot be decoded.
var ErrCodec = errors.New("record codec")

// AppendBinary appends r's compact binary form to dst: only the member of
// each value that its kind uses. It is the form Beam shuffles records in
// (see dofns/coders.go); Beam's default row coder writes every member of
// every value.
func (r *Record) AppendBinary(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(r.Values)))
	for i := range r.Values {
		v := &r.Values[i]
		dst = append(dst, v.Kind)
		switch v.Kind {
		case KindString, KindBytes:
			dst = appendString(dst, v.Str)
		case KindFloat:
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v.Num))
		case KindInt, KindTime:
			dst = binary.AppendVarint(dst, v.Int)
		case KindBool:
			b := byte(0)
			if v.Bool {
				b = 1
			}
			dst = append(dst, b)
		case KindTags:
			dst = binary.AppendUvarint(dst, uint64(len(v.Pairs)))
			for _, p := range v.Pairs {
				dst = appendString(appendString(dst, p.K), p.V)
			}
		}
	}
	dst = binary.AppendVarint(dst, r.EventMs)
	dst = appendString(dst, r.Raw)
	return appendString(dst, r.Source)
}

func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// DecodeRecord decodes what AppendBinary wrote.
func DecodeRecord(b []byte) (Record, error) {
	// The strings of the record share one copy of the encoding: one
	// allocation instead of one per string (the Raw line, the source and
	// each string value).
	d := decoder{b: b, src: string(b)}
	var r Record
	n := d.uvarint()
	if n > uint64(len(b)) {
		return r, fmt.Errorf("%w: %d values in %d bytes", ErrCodec, n, len(b))
	}
	r.Values = make([]Value, n)
	for i := range r.Values {
		v := &r.Values[i]
		v.Kind = d.byte()
		switch v.Kind {
		case KindNull:
		case KindString, KindBytes:
			v.Str = d.string()
		case KindFloat:
			v.Num = math.Float64frombits(d.uint64())
		case KindInt, KindTime:
			v.Int = d.varint()
		case KindBool:
			v.Bool = d.byte() == 1
		case KindTags:
			np := d.uvarint()
			if np > uint64(len(b)) {
				return r, fmt.Errorf("%w: %d tags in %d bytes", ErrCodec, np, len(b))
			}
			v.Pairs = make([]Pair, np)
			for j := range v.Pairs {
				v.Pairs[j] = Pair{K: d.string(), V: d.string()}
			}
		default:
			return r, fmt.Errorf("%w: unknown value kind %d", ErrCodec, v.Kind)
		}
	}
	r.EventMs = d.varint()
	r.Raw = d.string()
	r.Source = d.string()
	if d.err != nil {
		return Record{}, d.err
	}
	if len(d.b) != 0 {
		return Record{}, fmt.Errorf("%w: %d trailing bytes", ErrCodec, len(d.b))
	}
	return r, nil
}

// decoder reads the encoding, remembering the first error.
type decoder struct {
	b   []byte
	err error
	// src, when set, is b as first given, as a string: string() slices
	// it instead of copying.
	src string
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated %s", ErrCodec, what)
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail("byte")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uint64() uint64 {
	if len(d.b) < 8 {
		d.fail("float")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("string")
		return ""
	}
	var s string
	if d.src != "" {
		at := len(d.src) - len(d.b)
		s = d.src[at : at+int(n)]
	} else {
		s = string(d.b[:n])
	}
	d.b = d.b[n:]
	return s
}
