package packed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/sensorpipe/sensorpipe/schemas"
)

// ErrCodec is a record encoding that cannot be decoded.
var ErrCodec = errors.New("record codec")

// AppendBinary appends r's compact binary form to dst: only the member of
// each value that its kind uses. It is the form Beam shuffles records in
// (see dofns/coders.go); Beam's default row coder writes every member of
// every value.
func AppendBinary(r *schemas.Record, dst []byte) []byte {
	return appendString(appendBody(r, dst), r.Source)
}

// appendBody appends r's compact form but its source.
func appendBody(r *schemas.Record, dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(r.Values)))
	for i := range r.Values {
		v := &r.Values[i]
		dst = append(dst, v.Kind)
		switch v.Kind {
		case schemas.KindString, schemas.KindBytes:
			dst = appendString(dst, v.Str)
		case schemas.KindFloat:
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v.Num))
		case schemas.KindInt, schemas.KindTime:
			dst = binary.AppendVarint(dst, v.Int)
		case schemas.KindBool:
			b := byte(0)
			if v.Bool {
				b = 1
			}
			dst = append(dst, b)
		case schemas.KindTags:
			dst = binary.AppendUvarint(dst, uint64(len(v.Pairs)))
			for _, p := range v.Pairs {
				dst = appendString(appendString(dst, p.K), p.V)
			}
		}
	}
	dst = binary.AppendVarint(dst, r.EventMs)
	return appendString(dst, r.Raw)
}

// AppendRecords appends the compact form of a batch of records to dst:
// their count and the count of all their values, then each record as
// AppendBinary writes it, except that its source is written only where it
// differs from the record before's (a byte 0 says it is the same; a byte 1
// comes before a new one), since a batch's records mostly come from one
// file or subscription. DecodeRecords reads it.
func AppendRecords(dst []byte, recs []schemas.Record) []byte {
	values := 0
	for i := range recs {
		values += len(recs[i].Values)
	}
	dst = binary.AppendUvarint(dst, uint64(len(recs)))
	dst = binary.AppendUvarint(dst, uint64(values))
	for i := range recs {
		r := &recs[i]
		dst = appendBody(r, dst)
		if i > 0 && r.Source == recs[i-1].Source {
			dst = append(dst, 0)
		} else {
			dst = appendString(append(dst, 1), r.Source)
		}
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// DecodeRecord decodes what AppendBinary wrote.
func DecodeRecord(b []byte) (schemas.Record, error) {
	// The strings of the record share one copy of the encoding: one
	// allocation instead of one per string (the Raw line, the source and
	// each string value).
	d := Reader{b: b, src: string(b)}
	n := d.Uvarint()
	if n > uint64(len(b)) {
		return schemas.Record{}, fmt.Errorf("%w: %d values in %d bytes", ErrCodec, n, len(b))
	}
	r, err := d.body(make([]schemas.Value, n))
	if err != nil {
		return schemas.Record{}, err
	}
	r.Source = d.string()
	if err := d.end(); err != nil {
		return schemas.Record{}, err
	}
	return r, nil
}

// DecodeRecords decodes what AppendRecords wrote. The records' strings
// share one copy of b, and their values one slice.
func DecodeRecords(b []byte) ([]schemas.Record, error) {
	d := Reader{b: b, src: string(b)}
	n, nv := d.Uvarint(), d.Uvarint()
	// Each record and each value takes at least a byte.
	if n > uint64(len(b)) || nv > uint64(len(b)) {
		return nil, fmt.Errorf("%w: %d records of %d values in %d bytes", ErrCodec, n, nv, len(b))
	}
	recs, values := make([]schemas.Record, n), make([]schemas.Value, nv)
	for i := range recs {
		k := d.Uvarint()
		if k > uint64(len(values)) {
			return nil, fmt.Errorf("%w: record %d has %d values, more than the %d left", ErrCodec, i, k, len(values))
		}
		r, err := d.body(values[:k:k])
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		values = values[k:]
		mark := d.byte()
		if d.err != nil {
			return nil, d.err
		}
		switch mark {
		case 0:
			if i == 0 {
				return nil, fmt.Errorf("%w: the first record has no source", ErrCodec)
			}
			r.Source = recs[i-1].Source
		case 1:
			r.Source = d.string()
		default:
			return nil, fmt.Errorf("%w: record %d: bad source mark", ErrCodec, i)
		}
		recs[i] = r
	}
	if len(values) != 0 {
		return nil, fmt.Errorf("%w: %d values left after the last record", ErrCodec, len(values))
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	return recs, nil
}

// body decodes a record's values into values, which has their count, and
// its event time and raw payload.
func (d *Reader) body(values []schemas.Value) (schemas.Record, error) {
	r := schemas.Record{Values: values}
	for i := range r.Values {
		v := &r.Values[i]
		v.Kind = d.byte()
		switch v.Kind {
		case schemas.KindNull:
		case schemas.KindString, schemas.KindBytes:
			v.Str = d.string()
		case schemas.KindFloat:
			v.Num = math.Float64frombits(d.Uint64())
		case schemas.KindInt, schemas.KindTime:
			v.Int = d.Varint()
		case schemas.KindBool:
			v.Bool = d.byte() == 1
		case schemas.KindTags:
			np := d.Uvarint()
			if np > uint64(len(d.b)) {
				return r, fmt.Errorf("%w: %d tags in %d bytes", ErrCodec, np, len(d.b))
			}
			v.Pairs = make([]schemas.Pair, np)
			for j := range v.Pairs {
				v.Pairs[j] = schemas.Pair{K: d.string(), V: d.string()}
			}
		default:
			return r, fmt.Errorf("%w: unknown value kind %d", ErrCodec, v.Kind)
		}
	}
	r.EventMs = d.Varint()
	r.Raw = d.string()
	return r, d.err
}

// end reports the first error, or bytes left over.
func (d *Reader) end() error {
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCodec, len(d.b))
	}
	return nil
}

// Reader reads varints, integers and strings; the first short read sets
// Err (ErrCodec), and every read after it gives 0.
type Reader struct {
	b   []byte
	err error
	// src, when set, is b as first given, as a string: string() slices
	// it instead of copying.
	src string
}

// NewReader reads b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Err is the first short read's error; Len the bytes left.
func (d *Reader) Err() error { return d.err }
func (d *Reader) Len() int   { return len(d.b) }

func (d *Reader) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated %s", ErrCodec, what)
	}
	d.b = nil
}

func (d *Reader) Uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *Reader) Varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *Reader) byte() byte {
	if len(d.b) < 1 {
		d.fail("byte")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *Reader) Uint64() uint64 {
	if len(d.b) < 8 {
		d.fail("float")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *Reader) string() string {
	n := d.Uvarint()
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
