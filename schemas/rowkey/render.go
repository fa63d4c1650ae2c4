package rowkey

import (
	"bytes"
	"github.com/sensorpipe/sensorpipe/schemas"
	"strings"
)

// Render appends the rendered template for r to dst. A field value that
// contains the delimiter is rejected with ErrInvalidField unless escaping is
// on; a tag set is checked element by element, since its own "," and "="
// separators are part of the rendering. A key over MaxRowKeyBytes is
// rejected too.
func Render(t *schemas.Template, dst []byte, r *schemas.Record) ([]byte, error) {
	start := len(dst)
	var err error
	for i := range t.Segs {
		s := &t.Segs[i]
		switch s.Kind {
		case schemas.SegLiteral:
			dst = append(dst, s.Literal...)
			continue
		case schemas.SegSalt, schemas.SegHash:
			if dst, err = appendMulti(s, dst, r.Values); err != nil {
				return dst[:start], err
			}
			continue
		}
		v := r.Values[s.Field]
		if v.Kind == schemas.KindNull && s.In == schemas.KindTags {
			v = schemas.Value{Kind: schemas.KindTags} // an absent tag set is the empty set
		}
		if v.Kind == schemas.KindNull {
			return dst[:start], schemas.Reject(schemas.ErrMissingField, "%s is needed for the key but has no value", s.Name)
		}
		if dst, err = appendField(t, dst, s, v); err != nil {
			return dst[:start], err
		}
	}
	if n := len(dst) - start; t.MaxBytes > 0 && n > t.MaxBytes {
		return dst[:start], schemas.Reject(schemas.ErrInvalidField, "row key is %d bytes; Bigtable allows at most %d", n, t.MaxBytes)
	}
	return dst, nil
}

// appendField renders one field segment of value v.
func appendField(t *schemas.Template, dst []byte, s *schemas.Segment, v schemas.Value) ([]byte, error) {
	var err error
	var app func([]byte, schemas.Value) []byte
	for i, o := range s.Ops {
		if i == len(s.Ops)-1 && o.App != nil {
			app = o.App
			break
		}
		if v, err = o.Fn(v); err != nil {
			return dst, schemas.Reject(schemas.ErrInvalidField, "%s|%s: %v", s.Name, o.Name, err)
		}
	}
	if v.Kind == schemas.KindTags && app == nil {
		return appendTags(t, dst, s, v.Pairs)
	}
	segStart := len(dst)
	if app != nil {
		dst = app(dst, v)
	} else {
		dst = schemas.AppendText(dst, v)
	}
	if t.Delim != "" && bytes.Contains(dst[segStart:], delimBytes(t)) {
		if !t.Escape {
			return dst, schemas.Reject(schemas.ErrInvalidField, "%s %q contains the key delimiter %q", s.Name, string(dst[segStart:]), t.Delim)
		}
		esc := escapeText(t, string(dst[segStart:]))
		dst = append(dst[:segStart], esc...)
	} else if t.Escape && bytes.IndexByte(dst[segStart:], '\\') >= 0 {
		esc := escapeText(t, string(dst[segStart:]))
		dst = append(dst[:segStart], esc...)
	}
	return dst, nil
}

func delimBytes(t *schemas.Template) []byte {
	if len(t.Delim) == 1 {
		return []byte{t.Delim[0]}[:1:1]
	}
	return []byte(t.Delim)
}

func escapeText(t *schemas.Template, s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	if t.Delim != "" {
		s = strings.ReplaceAll(s, t.Delim, `\`+t.Delim)
	}
	return s
}

// appendTags renders a sorted tag set as k=v,k=v (or v,v with values),
// checking each key and value: none may hold the tag separators "," or "="
// (keys) or the key delimiter, unless escaping is on for the delimiter.
func appendTags(t *schemas.Template, dst []byte, s *schemas.Segment, pairs []schemas.Pair) ([]byte, error) {
	elem := func(what, x string, seps string) (string, error) {
		if strings.ContainsAny(x, seps) {
			return "", schemas.Reject(schemas.ErrInvalidField, "%s %s %q contains one of %q, which separate tag elements", s.Name, what, x, seps)
		}
		if t.Delim != "" && strings.Contains(x, t.Delim) {
			if !t.Escape {
				return "", schemas.Reject(schemas.ErrInvalidField, "%s %s %q contains the key delimiter %q", s.Name, what, x, t.Delim)
			}
			return escapeText(t, x), nil
		}
		return x, nil
	}
	for i, p := range pairs {
		if i > 0 {
			dst = append(dst, ',')
		}
		if !s.ValuesOnly {
			k, err := elem("tag key", p.K, ",=")
			if err != nil {
				return dst, err
			}
			dst = append(append(dst, k...), '=')
		}
		v, err := elem("tag value", p.V, ",")
		if err != nil {
			return dst, err
		}
		dst = append(dst, v...)
	}
	return dst, nil
}

// appendMulti renders a salt or hash segment from its fields' text.
func appendMulti(s *schemas.Segment, dst []byte, vals []schemas.Value) ([]byte, error) {
	texts := make([][]byte, len(s.Fields))
	for i, f := range s.Fields {
		if vals[f].Kind == schemas.KindNull {
			return dst, schemas.Reject(schemas.ErrMissingField, "%s is needed for the key's %s but has no value", s.Names[i], s.Name)
		}
		texts[i] = schemas.AppendText(nil, vals[f])
	}
	return appendMultiText(s, dst, texts), nil
}

func appendMultiText(s *schemas.Segment, dst []byte, texts [][]byte) []byte {
	if s.Kind == schemas.SegSalt {
		return append(dst, schemas.SaltText(schemas.SaltBucket(s.Buckets, texts...), s.Buckets)...)
	}
	var joined []byte
	for i, t := range texts {
		if i > 0 {
			joined = append(joined, 0x1f)
		}
		joined = append(joined, t...)
	}
	return append(dst, schemas.HashHex(joined)...)
}
