package schemas

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// KeepsInt64BE reports whether a column of field with the int64be encoding
// holds the field's value: int, time and bool fields; any other kind is
// truncated to an integer.
func KeepsInt64BE(s *Spec, field int) bool {
	return KindIn(FieldKind(s, field), []Kind{KindInt, KindTime, KindBool})
}

// AsQualifier makes t render a column qualifier: whole, with no
// delimiter and no byte limit of a row key.
func (t *Template) AsQualifier() { t.Delim, t.MaxBytes = "", 0 }

// DecodeCell decodes a Bigtable cell's bytes as the value of field: text
// (see AppendText) or, with int64be, an 8-byte big-endian integer.
func DecodeCell(s *Spec, field int, int64be bool, b []byte) (Value, error) {
	kind := FieldKind(s, field)
	if int64be {
		if len(b) != 8 {
			return Value{}, fmt.Errorf("int64be cell of %d bytes", len(b))
		}
		n := int64(binary.BigEndian.Uint64(b))
		if kind == KindBool {
			return Value{Kind: KindBool, Bool: n != 0}, nil
		}
		return Value{Kind: kind, Int: n}, nil
	}
	return textValue(kind, string(b))
}

// textValue parses the text AppendText renders for a value of kind.
func textValue(kind Kind, text string) (Value, error) {
	switch kind {
	case KindString, KindBytes:
		return Value{Kind: kind, Str: text}, nil
	case KindFloat:
		n, err := strconv.ParseFloat(text, 64)
		return Value{Kind: KindFloat, Num: n}, err
	case KindInt, KindTime:
		n, err := strconv.ParseInt(text, 10, 64)
		return Value{Kind: kind, Int: n}, err
	case KindBool:
		b, err := strconv.ParseBool(text)
		return Value{Kind: KindBool, Bool: b}, err
	case KindTags:
		return ParseTags(text)
	}
	return Value{}, fmt.Errorf("unknown kind %d", kind)
}

// UsesOnly reports whether every field the template renders is in fields.
func (t *Template) UsesOnly(fields map[int]bool) bool {
	for _, s := range t.Segs {
		switch s.Kind {
		case SegField:
			if !fields[s.Field] {
				return false
			}
		case SegSalt, SegHash:
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
func (t *Template) KeyFields() map[int]bool {
	out := map[int]bool{}
	for i := range t.Segs {
		if t.Segs[i].Kind != SegLiteral && !t.splittableAt(i) {
			return map[int]bool{}
		}
	}
	for i := range t.Segs {
		if s := &t.Segs[i]; s.Kind == SegField && s.invertible() {
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
func (t *Template) DecodeFields(key string, fields map[int]bool, vals []Value) bool {
	parts, err := t.Split(key)
	if err != nil {
		return false
	}
	for _, p := range parts {
		if p.seg.Kind != SegField || !fields[p.seg.Field] {
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
