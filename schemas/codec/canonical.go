package codec

import (
	"github.com/sensorpipe/sensorpipe/schemas"
	"math"
	"strconv"
	"strings"
	"time"
)

// CanonicalJSON renders a record as one JSON line that the spec's parser
// reads back into the same values: each field at its path (nested objects
// for dotted paths), in spec order; strings and bytes as JSON strings;
// numbers in shortest round-trip decimal; timestamps as RFC 3339 UTC with
// milliseconds; tag sets as objects. With an explode section the event time
// and value become one [timestamp_ms, value] point at its path. Null fields
// are left out, and so are imputed values (those whose flag is true): they
// are not the reading's own. It is the payload of a reading that has no raw
// input, one rebuilt from Bigtable by ReadBack.
func CanonicalJSON(s *schemas.Spec, r *schemas.Record) string {
	if s.Explode == nil && len(s.Fields) <= 64 && flatPaths(s) {
		return string(appendFlat(make([]byte, 0, 32+16*len(s.Fields)), s, r))
	}
	return canonicalTree(s, r)
}

// flatPaths reports whether every field's path is one key, and no two
// fields share one: the rendered object then has a key a field, in spec
// order, and appendFlat writes it without building the tree.
func flatPaths(s *schemas.Spec) bool {
	for i := range s.Fields {
		p := fieldKey(&s.Fields[i])
		if strings.IndexByte(p, '.') >= 0 {
			return false
		}
		for j := range i {
			if fieldKey(&s.Fields[j]) == p {
				return false
			}
		}
	}
	return true
}

// fieldKey is the path a field is rendered at.
func fieldKey(f *schemas.FieldSpec) string {
	if f.Path == "" {
		return f.Name
	}
	return f.Path
}

// appendFlat appends CanonicalJSON's object for a spec of flat paths
// (flatPaths) and no explode section, of at most 64 fields.
func appendFlat(dst []byte, s *schemas.Spec, r *schemas.Record) []byte {
	var imputed uint64
	for i, im := range s.Impute {
		if f := len(s.Fields) + i; f < len(r.Values) && r.Values[f].Bool {
			if fi := s.FieldIndex(im.Field); fi >= 0 {
				imputed |= 1 << fi
			}
		}
	}
	dst = append(dst, '{')
	first := true
	for i := range s.Fields {
		if i >= len(r.Values) || imputed&(1<<i) != 0 || r.Values[i].Kind == schemas.KindNull {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(AppendJSONString(dst, fieldKey(&s.Fields[i])), ':')
		dst = jsonValue(dst, r.Values[i])
	}
	return append(dst, '}')
}

// canonicalTree is CanonicalJSON for any spec: the object built as a tree
// of keys, then written.
func canonicalTree(s *schemas.Spec, r *schemas.Record) string {
	root := &jsonObject{}
	imputed := map[int]bool{}
	for i, im := range s.Impute {
		if f := len(s.Fields) + i; f < len(r.Values) && r.Values[f].Bool {
			imputed[s.FieldIndex(im.Field)] = true
		}
	}
	var timeIdx, valueIdx = -1, -1
	if ex := s.Explode; ex != nil {
		timeIdx, valueIdx = s.FieldIndex(ex.TimeField), s.FieldIndex(ex.ValueField)
	}
	for i := range s.Fields {
		if i >= len(r.Values) || i == timeIdx || i == valueIdx || imputed[i] || r.Values[i].Kind == schemas.KindNull {
			continue
		}
		path := s.Fields[i].Path
		if path == "" {
			path = s.Fields[i].Name
		}
		root.set(strings.Split(path, "."), jsonValue(nil, r.Values[i]))
	}
	if ex := s.Explode; ex != nil && valueIdx < len(r.Values) {
		pt := append([]byte("[["), strconv.AppendInt(nil, r.Values[timeIdx].Int, 10)...)
		pt = append(append(pt, ','), jsonValue(nil, r.Values[valueIdx])...)
		root.set(strings.Split(ex.Path, "."), append(pt, "]]"...))
	}
	return string(root.append(nil))
}

// jsonObject is a JSON object that keeps its keys in insertion order.
type jsonObject struct {
	keys []string
	vals []any // []byte (encoded) or *jsonObject
}

func (o *jsonObject) set(path []string, v []byte) {
	for i, k := range o.keys {
		if k != path[0] {
			continue
		}
		if sub, ok := o.vals[i].(*jsonObject); ok && len(path) > 1 {
			sub.set(path[1:], v)
			return
		}
		if len(path) == 1 {
			o.vals[i] = v
			return
		}
	}
	o.keys = append(o.keys, path[0])
	if len(path) == 1 {
		o.vals = append(o.vals, v)
		return
	}
	sub := &jsonObject{}
	sub.set(path[1:], v)
	o.vals = append(o.vals, sub)
}

func (o *jsonObject) append(dst []byte) []byte {
	dst = append(dst, '{')
	for i, k := range o.keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendJSONString(dst, k)
		dst = append(dst, ':')
		switch v := o.vals[i].(type) {
		case []byte:
			dst = append(dst, v...)
		case *jsonObject:
			dst = v.append(dst)
		}
	}
	return append(dst, '}')
}

// jsonValue appends v as JSON.
func jsonValue(dst []byte, v schemas.Value) []byte {
	switch v.Kind {
	case schemas.KindString, schemas.KindBytes:
		return AppendJSONString(dst, v.Str)
	case schemas.KindFloat:
		if math.IsNaN(v.Num) || math.IsInf(v.Num, 0) {
			// Not JSON: kept as text, so the payload still says what it was.
			return AppendJSONString(dst, strconv.FormatFloat(v.Num, 'g', -1, 64))
		}
		return strconv.AppendFloat(dst, v.Num, 'f', -1, 64)
	case schemas.KindInt:
		return strconv.AppendInt(dst, v.Int, 10)
	case schemas.KindBool:
		return strconv.AppendBool(dst, v.Bool)
	case schemas.KindTime:
		return AppendJSONString(dst, time.UnixMilli(v.Int).UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	case schemas.KindTags:
		dst = append(dst, '{')
		for i, p := range v.Pairs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(AppendJSONString(dst, p.K), ':')
			dst = AppendJSONString(dst, p.V)
		}
		return append(dst, '}')
	}
	return append(dst, "null"...)
}
