package rowkey

import (
	"encoding/binary"
	"fmt"
	"github.com/sensorpipe/sensorpipe/schemas"
	"strconv"
)

// KeepsInt64BE reports whether a column of field with the int64be encoding
// holds the field's value: int, time and bool fields; any other kind is
// truncated to an integer.
func KeepsInt64BE(s *schemas.Spec, field int) bool {
	return schemas.KindIn(schemas.FieldKind(s, field), []schemas.Kind{schemas.KindInt, schemas.KindTime, schemas.

		// AsQualifier makes t render a column qualifier: whole, with no
		// delimiter and no byte limit of a row key.
		KindBool})
}

func AsQualifier(t *schemas.Template) { t.Delim, t.MaxBytes = "", 0 }

// DecodeCell decodes a Bigtable cell's bytes as the value of field: text
// (see AppendText) or, with int64be, an 8-byte big-endian integer.
func DecodeCell(s *schemas.Spec, field int, int64be bool, b []byte) (schemas.Value, error) {
	kind := schemas.FieldKind(s, field)
	if int64be {
		if len(b) != 8 {
			return schemas.Value{}, fmt.Errorf("int64be cell of %d bytes", len(b))
		}
		n := int64(binary.BigEndian.Uint64(b))
		if kind == schemas.KindBool {
			return schemas.Value{Kind: schemas.KindBool, Bool: n != 0}, nil
		}
		return schemas.Value{Kind: kind, Int: n}, nil
	}
	return textValue(kind, string(b))
}

// textValue parses the text AppendText renders for a value of kind.
func textValue(kind schemas.Kind, text string) (schemas.Value, error) {
	switch kind {
	case schemas.KindString, schemas.KindBytes:
		return schemas.Value{Kind: kind, Str: text}, nil
	case schemas.KindFloat:
		n, err := strconv.ParseFloat(text, 64)
		return schemas.Value{Kind: schemas.KindFloat, Num: n}, err
	case schemas.KindInt, schemas.KindTime:
		n, err := strconv.ParseInt(text, 10, 64)
		return schemas.Value{Kind: kind, Int: n}, err
	case schemas.KindBool:
		b, err := strconv.ParseBool(text)
		return schemas.Value{Kind: schemas.KindBool, Bool: b}, err
	case schemas.KindTags:
		return schemas.ParseTags(text)
	}
	return schemas.Value{}, fmt.Errorf("unknown kind %d", kind)
}

// UsesOnly reports whether every field the template renders is in fields.
func UsesOnly(t *schemas.Template, fields map[int]bool) bool {
	for _, s := range t.Segs {
		switch s.Kind {
		case schemas.SegField:
			if !fields[s.Field] {
				return false
			}
		case schemas.SegSalt, schemas.SegHash:
			for _, f := range s.Fields {
				if !fields[f] {
					return false
				}
			}
		}
	}
	return true
}

// KeyFields are the fields Split and Decode recover from every key the
// template renders: none when some segment cannot be split.
func KeyFields(t *schemas.Template) map[int]bool {
	out := map[int]bool{}
	for i := range t.Segs {
		if t.Segs[i].Kind != schemas.SegLiteral && !splittableAt(t, i) {
			return map[int]bool{}
		}
	}
	for i := range t.Segs {
		if s := &t.Segs[i]; s.Kind == schemas.SegField && invertible(s) {
			out[s.Field] = true
		}
	}
	return out
}

// DecodeFields decodes into vals the fields of key in fields (see
// KeyFields). It reports false when the key does not have the template's
// shape or a field does not decode. A key can split in more than one way
// (a field value holding a literal other than the delimiter): callers
// render the key again to check.
func DecodeFields(t *schemas.Template, key string, fields map[int]bool, vals []schemas.Value) bool {
	parts, err := Split(t, key)
	if err != nil {
		return false
	}
	for _, p := range parts {
		if p.seg.Kind != schemas.SegField || !fields[p.seg.Field] {
			continue
		}
		v, ok := p.Decode()
		if !ok {
			return false
		}
		vals[p.seg.Field] = v
	}
	return true
}
