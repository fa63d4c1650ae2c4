package rowkey

import (
	"encoding/hex"
	"fmt"
	"github.com/sensorpipe/sensorpipe/schemas"
	"math"
	"strconv"
	"strings"
)

// KeyPart is one non-literal segment of a row key as it was rendered: a
// field (Field names it), a salt or a hash (Field is "").
type KeyPart struct {
	Field string
	// Text is the segment's text, unescaped.
	Text string
	// Start and End are its byte offsets in the key.
	Start, End int
	seg        *schemas.Segment
}

// Split cuts a key that t rendered into its segments. A segment ends where
// the literal after it starts (the first unescaped occurrence), or after its
// fixed width (salt buckets, pad:W, reverse); the last one runs to the end
// of the key. A segment whose text may hold the literal that follows it (a
// tag set before its own separators) cannot be split, and is an error.
func Split(t *schemas.Template, key string) ([]KeyPart, error) {
	var parts []KeyPart
	pos := 0
	for i := range t.Segs {
		s := &t.Segs[i]
		if s.Kind == schemas.SegLiteral {
			if !strings.HasPrefix(key[pos:], s.Literal) {
				return nil, fmt.Errorf("key %q does not match %q at byte %d: want %q", key, t.Src, pos, s.Literal)
			}
			pos += len(s.Literal)
			continue
		}
		end := -1
		if w := fixedWidth(s); w > 0 {
			end = pos + w
			if end > len(key) {
				return nil, fmt.Errorf("key %q is too short for {%s} in %q", key, segSource(s), t.Src)
			}
		} else if i+1 < len(t.Segs) && t.Segs[i+1].Kind == schemas.SegLiteral {
			next := t.Segs[i+1].Literal
			if s.Out == schemas.KindTags && strings.ContainsAny(next, ",=") {
				return nil, fmt.Errorf("{%s} in %q may hold %q, so keys cannot be split there", segSource(s), t.Src, next)
			}
			end = indexUnescaped(t, key, pos, next)
			if end < 0 {
				return nil, fmt.Errorf("key %q has no %q after {%s} (template %q)", key, next, segSource(s), t.Src)
			}
		} else if i+1 == len(t.Segs) {
			end = len(key)
		} else {
			return nil, fmt.Errorf("{%s} in %q has neither a fixed width nor a literal after it, so keys cannot be split there", segSource(s), t.Src)
		}
		text := key[pos:end]
		if t.Escape {
			text = unescapeKeyText(text)
		}
		p := KeyPart{Text: text, Start: pos, End: end, seg: s}
		if s.Kind == schemas.SegField {
			p.Field = s.Name
		}
		parts = append(parts, p)
		pos = end
	}
	if pos != len(key) {
		return nil, fmt.Errorf("key %q is longer than %q renders (%d bytes left)", key, t.Src, len(key)-pos)
	}
	return parts, nil
}

// fixedWidth is the width of every rendering of s, or 0 when it varies.
func fixedWidth(s *schemas.Segment) int {
	if s.Kind == schemas.SegSalt {
		return s.Width
	}
	if s.Kind != schemas.SegField || len(s.Ops) == 0 {
		return 0
	}
	last := s.Ops[len(s.Ops)-1]
	switch last.Name {
	case "pad":
		w, _ := strconv.Atoi(last.Arg)
		return w
	case "reverse":
		return schemas.ReverseWidth
	}
	return 0
}

// indexUnescaped is the offset of the first occurrence of lit in key at or
// after from that is not escaped by a backslash (when escaping is on).
func indexUnescaped(t *schemas.Template, key string, from int, lit string) int {
	for i := from; i < len(key); i++ {
		if t.Escape && key[i] == '\\' {
			i++ // skip the escaped byte
			continue
		}
		if strings.HasPrefix(key[i:], lit) {
			return i
		}
	}
	return -1
}

func unescapeKeyText(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Decode turns a field part's text back into the field's value, undoing its
// functions: pad and ms give the number back, reverse the time, hex and
// revdomain the string. ok is false when the rendering loses information
// (time buckets, hash, base and offset, salts) or the text does not parse.
func (p KeyPart) Decode() (v schemas.Value, ok bool) {
	s := p.seg
	if s == nil || s.Kind != schemas.SegField {
		return schemas.Value{}, false
	}
	text := p.Text
	// Undo the ops from the last to the first; each must be invertible.
	cur := schemas.Value{Kind: schemas.KindString, Str: text}
	for i := len(s.Ops) - 1; i >= 0; i-- {
		o := s.Ops[i]
		in := s.In
		if i > 0 {
			in = s.OpOut(i - 1)
		}
		switch o.Name {
		case "pad":
			n, err := strconv.ParseInt(cur.Str, 10, 64)
			if err != nil {
				return schemas.Value{}, false
			}
			cur = schemas.Value{Kind: in, Int: n}
		case "reverse":
			n, err := strconv.ParseInt(cur.Str, 10, 64)
			if err != nil {
				return schemas.Value{}, false
			}
			cur = schemas.Value{Kind: in, Int: math.MaxInt64 - n}
		case "ms":
			if cur.Kind == schemas.KindString {
				n, err := strconv.ParseInt(cur.Str, 10, 64)
				if err != nil {
					return schemas.Value{}, false
				}
				cur = schemas.Value{Kind: schemas.KindInt, Int: n}
			}
			cur = schemas.Value{Kind: schemas.KindTime, Int: cur.Int}
		case "hex":
			b, err := hex.DecodeString(cur.Str)
			if err != nil {
				return schemas.Value{}, false
			}
			cur = schemas.Value{Kind: in, Str: string(b)}
		case "revdomain":
			cur = schemas.Value{Kind: schemas.KindString, Str: schemas.ReverseDomain(cur.Str)}
		default:
			return schemas.Value{}, false
		}
	}
	if cur.Kind != schemas.KindString || s.In == schemas.KindString || s.In == schemas.KindBytes {
		if cur.Kind == schemas.KindString && s.In == schemas.KindBytes {
			cur.Kind = schemas.KindBytes
		}
		return cur, true
	}
	// No ops left to undo: the text is the field's own text form.
	switch s.In {
	case schemas.KindInt, schemas.KindTime:
		n, err := strconv.ParseInt(cur.Str, 10, 64)
		if err != nil {
			return schemas.Value{}, false
		}
		return schemas.Value{Kind: s.In, Int: n}, true
	case schemas.KindFloat:
		f, err := strconv.ParseFloat(cur.Str, 64)
		if err != nil {
			return schemas.Value{}, false
		}
		return schemas.Value{Kind: schemas.KindFloat, Num: f}, true
	case schemas.KindBool:
		b, err := strconv.ParseBool(cur.Str)
		if err != nil {
			return schemas.Value{}, false
		}
		return schemas.Value{Kind: schemas.KindBool, Bool: b}, true
	}
	return schemas.Value{}, false
}

// DecodeKey splits a row key of table into its field parts, by name. Salt
// and hash parts are left out.
func DecodeKey(spec *schemas.Spec, table, key string) (map[string]KeyPart, error) {
	tmpl, err := schemas.TableTemplate(spec, table)
	if err != nil {
		return nil, err
	}
	parts, err := Split(tmpl, key)
	if err != nil {
		return nil, err
	}
	out := map[string]KeyPart{}
	for _, p := range parts {
		if p.Field != "" {
			if _, dup := out[p.Field]; !dup {
				out[p.Field] = p
			}
		}
	}
	return out, nil
}

// TimePrefix is the part of a row key of table before its event-time
// Segment: the key prefix whose rows are one series in time order (for a
// reverse-timestamp key, the first row under it is the newest). ok is false
// when the key has no event-time segment.
func TimePrefix(spec *schemas.Spec, table, key string) (prefix string, ok bool, err error) {
	tmpl, err := schemas.TableTemplate(spec, table)
	if err != nil {
		return "", false, err
	}
	parts, err := Split(tmpl, key)
	if err != nil {
		return "", false, err
	}
	for _, p := range parts {
		if p.Field == spec.EventTime {
			return key[:p.Start], true, nil
		}
	}
	return "", false, nil
}

// TimeKeyText renders the event-time segment of table's key for ms, e.g. a
// reverse timestamp, so a reader can seek within a series.
func TimeKeyText(spec *schemas.Spec, table string, ms int64) (string, error) {
	tmpl, err := schemas.TableTemplate(spec, table)
	if err != nil {
		return "", err
	}
	idx := spec.FieldIndex(spec.EventTime)
	for i := range tmpl.Segs {
		s := &tmpl.Segs[i]
		if s.Kind == schemas.SegField && s.Field == idx {
			b, err := appendField(tmpl, nil, s, schemas.Value{Kind: schemas.KindTime, Int: ms})
			return string(b), err
		}
	}
	return "", fmt.Errorf("table %s: row key %q has no {%s}", table, tmpl.Src, spec.EventTime)
}
