package schemas

import (
	"encoding/hex"
	"fmt"
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
	seg        *Segment
}

// Split cuts a key that t rendered into its segments. A segment ends where
// the literal after it starts (the first unescaped occurrence), or after its
// fixed width (salt buckets, pad:W, reverse); the last one runs to the end
// of the key. A segment whose text may hold the literal that follows it (a
// tag set before its own separators) cannot be split, and is an error.
func (t *Template) Split(key string) ([]KeyPart, error) {
	var parts []KeyPart
	pos := 0
	for i := range t.Segs {
		s := &t.Segs[i]
		if s.Kind == SegLiteral {
			if !strings.HasPrefix(key[pos:], s.Literal) {
				return nil, fmt.Errorf("key %q does not match %q at byte %d: want %q", key, t.Src, pos, s.Literal)
			}
			pos += len(s.Literal)
			continue
		}
		end := -1
		if w := s.fixedWidth(); w > 0 {
			end = pos + w
			if end > len(key) {
				return nil, fmt.Errorf("key %q is too short for {%s} in %q", key, segSource(s), t.Src)
			}
		} else if i+1 < len(t.Segs) && t.Segs[i+1].Kind == SegLiteral {
			next := t.Segs[i+1].Literal
			if s.Out == KindTags && strings.ContainsAny(next, ",=") {
				return nil, fmt.Errorf("{%s} in %q may hold %q, so keys cannot be split there", segSource(s), t.Src, next)
			}
			end = t.indexUnescaped(key, pos, next)
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
		if s.Kind == SegField {
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
func (s *Segment) fixedWidth() int {
	if s.Kind == SegSalt {
		return s.Width
	}
	if s.Kind != SegField || len(s.Ops) == 0 {
		return 0
	}
	last := s.Ops[len(s.Ops)-1]
	switch last.Name {
	case "pad":
		w, _ := strconv.Atoi(last.Arg)
		return w
	case "reverse":
		return ReverseWidth
	}
	return 0
}

// indexUnescaped is the offset of the first occurrence of lit in key at or
// after from that is not escaped by a backslash (when escaping is on).
func (t *Template) indexUnescaped(key string, from int, lit string) int {
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
func (p KeyPart) Decode() (v Value, ok bool) {
	s := p.seg
	if s == nil || s.Kind != SegField {
		return Value{}, false
	}
	text := p.Text
	// Undo the ops from the last to the first; each must be invertible.
	cur := Value{Kind: KindString, Str: text}
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
				return Value{}, false
			}
			cur = Value{Kind: in, Int: n}
		case "reverse":
			n, err := strconv.ParseInt(cur.Str, 10, 64)
			if err != nil {
				return Value{}, false
			}
			cur = Value{Kind: in, Int: math.MaxInt64 - n}
		case "ms":
			if cur.Kind == KindString {
				n, err := strconv.ParseInt(cur.Str, 10, 64)
				if err != nil {
					return Value{}, false
				}
				cur = Value{Kind: KindInt, Int: n}
			}
			cur = Value{Kind: KindTime, Int: cur.Int}
		case "hex":
			b, err := hex.DecodeString(cur.Str)
			if err != nil {
				return Value{}, false
			}
			cur = Value{Kind: in, Str: string(b)}
		case "revdomain":
			cur = Value{Kind: KindString, Str: ReverseDomain(cur.Str)}
		default:
			return Value{}, false
		}
	}
	if cur.Kind != KindString || s.In == KindString || s.In == KindBytes {
		if cur.Kind == KindString && s.In == KindBytes {
			cur.Kind = KindBytes
		}
		return cur, true
	}
	// No ops left to undo: the text is the field's own text form.
	switch s.In {
	case KindInt, KindTime:
		n, err := strconv.ParseInt(cur.Str, 10, 64)
		if err != nil {
			return Value{}, false
		}
		return Value{Kind: s.In, Int: n}, true
	case KindFloat:
		f, err := strconv.ParseFloat(cur.Str, 64)
		if err != nil {
			return Value{}, false
		}
		return Value{Kind: KindFloat, Num: f}, true
	case KindBool:
		b, err := strconv.ParseBool(cur.Str)
		if err != nil {
			return Value{}, false
		}
		return Value{Kind: KindBool, Bool: b}, true
	}
	return Value{}, false
}

// DecodeKey splits a row key of table into its field parts, by name. Salt
// and hash parts are left out.
func DecodeKey(spec *Spec, table, key string) (map[string]KeyPart, error) {
	tmpl, err := TableTemplate(spec, table)
	if err != nil {
		return nil, err
	}
	parts, err := tmpl.Split(key)
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
func TimePrefix(spec *Spec, table, key string) (prefix string, ok bool, err error) {
	tmpl, err := TableTemplate(spec, table)
	if err != nil {
		return "", false, err
	}
	parts, err := tmpl.Split(key)
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
func TimeKeyText(spec *Spec, table string, ms int64) (string, error) {
	tmpl, err := TableTemplate(spec, table)
	if err != nil {
		return "", err
	}
	idx := spec.FieldIndex(spec.EventTime)
	for i := range tmpl.Segs {
		s := &tmpl.Segs[i]
		if s.Kind == SegField && s.Field == idx {
			b, err := tmpl.appendField(nil, s, Value{Kind: KindTime, Int: ms})
			return string(b), err
		}
	}
	return "", fmt.Errorf("table %s: row key %q has no {%s}", table, tmpl.Src, spec.EventTime)
}
