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
	seg        *segment
}

// Split cuts a key that t rendered into its segments. A segment ends where
// the literal after it starts (the first unescaped occurrence), or after its
// fixed width (salt buckets, pad:W, reverse); the last one runs to the end
// of the key. A segment whose text may hold the literal that follows it (a
// tag set before its own separators) cannot be split, and is an error.
func (t *Template) Split(key string) ([]KeyPart, error) {
	var parts []KeyPart
	pos := 0
	for i := range t.segs {
		s := &t.segs[i]
		if s.kind == segLiteral {
			if !strings.HasPrefix(key[pos:], s.literal) {
				return nil, fmt.Errorf("key %q does not match %q at byte %d: want %q", key, t.src, pos, s.literal)
			}
			pos += len(s.literal)
			continue
		}
		end := -1
		if w := s.fixedWidth(); w > 0 {
			end = pos + w
			if end > len(key) {
				return nil, fmt.Errorf("key %q is too short for {%s} in %q", key, segSource(s), t.src)
			}
		} else if i+1 < len(t.segs) && t.segs[i+1].kind == segLiteral {
			next := t.segs[i+1].literal
			if s.out == KindTags && strings.ContainsAny(next, ",=") {
				return nil, fmt.Errorf("{%s} in %q may hold %q, so keys cannot be split there", segSource(s), t.src, next)
			}
			end = t.indexUnescaped(key, pos, next)
			if end < 0 {
				return nil, fmt.Errorf("key %q has no %q after {%s} (template %q)", key, next, segSource(s), t.src)
			}
		} else if i+1 == len(t.segs) {
			end = len(key)
		} else {
			return nil, fmt.Errorf("{%s} in %q has neither a fixed width nor a literal after it, so keys cannot be split there", segSource(s), t.src)
		}
		text := key[pos:end]
		if t.escape {
			text = unescapeKeyText(text)
		}
		p := KeyPart{Text: text, Start: pos, End: end, seg: s}
		if s.kind == segField {
			p.Field = s.name
		}
		parts = append(parts, p)
		pos = end
	}
	if pos != len(key) {
		return nil, fmt.Errorf("key %q is longer than %q renders (%d bytes left)", key, t.src, len(key)-pos)
	}
	return parts, nil
}

// fixedWidth is the width of every rendering of s, or 0 when it varies.
func (s *segment) fixedWidth() int {
	if s.kind == segSalt {
		return s.width
	}
	if s.kind != segField || len(s.ops) == 0 {
		return 0
	}
	last := s.ops[len(s.ops)-1]
	switch last.name {
	case "pad":
		w, _ := strconv.Atoi(last.arg)
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
		if t.escape && key[i] == '\\' {
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
	if s == nil || s.kind != segField {
		return Value{}, false
	}
	text := p.Text
	// Undo the ops from the last to the first; each must be invertible.
	cur := Value{Kind: KindString, Str: text}
	for i := len(s.ops) - 1; i >= 0; i-- {
		o := s.ops[i]
		in := s.in
		if i > 0 {
			in = s.opOut(i - 1)
		}
		switch o.name {
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
	if cur.Kind != KindString || s.in == KindString || s.in == KindBytes {
		if cur.Kind == KindString && s.in == KindBytes {
			cur.Kind = KindBytes
		}
		return cur, true
	}
	// No ops left to undo: the text is the field's own text form.
	switch s.in {
	case KindInt, KindTime:
		n, err := strconv.ParseInt(cur.Str, 10, 64)
		if err != nil {
			return Value{}, false
		}
		return Value{Kind: s.in, Int: n}, true
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

// opOut is the kind segment s holds after its i-th op.
func (s *segment) opOut(i int) Kind {
	k := s.in
	for _, o := range s.ops[:i+1] {
		if def, ok := templateFuncs[o.name]; ok && def.out != KindNull {
			k = def.out
		}
	}
	return k
}

// keepsOrder reports whether the segment's text sorts as its values do
// (ascending or, with up false, descending): strings as they are, padded
// integers and times, reverse timestamps (descending), time buckets. Plain
// decimal numbers do not (9 sorts after 10).
func (s *segment) keepsOrder() (ordered, up bool) {
	if s.kind != segField {
		return false, false
	}
	up = true
	for _, o := range s.ops {
		switch o.order {
		case orderNone:
			return false, false
		case orderDown:
			up = !up
		}
	}
	if len(s.ops) == 0 {
		return s.in == KindString || s.in == KindBytes, true
	}
	switch s.ops[len(s.ops)-1].name {
	case "pad", "reverse", "year", "month", "day", "hour", "minute", "hex":
		return true, up
	}
	return false, false
}

// DecodeKey splits a row key of table into its field parts, by name. Salt
// and hash parts are left out.
func DecodeKey(spec *Spec, table, key string) (map[string]KeyPart, error) {
	tmpl, err := tableTemplate(spec, table)
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
// segment: the key prefix whose rows are one series in time order (for a
// reverse-timestamp key, the first row under it is the newest). ok is false
// when the key has no event-time segment.
func TimePrefix(spec *Spec, table, key string) (prefix string, ok bool, err error) {
	tmpl, err := tableTemplate(spec, table)
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
	tmpl, err := tableTemplate(spec, table)
	if err != nil {
		return "", err
	}
	idx := spec.FieldIndex(spec.EventTime)
	for i := range tmpl.segs {
		s := &tmpl.segs[i]
		if s.kind == segField && s.field == idx {
			b, err := tmpl.appendField(nil, s, Value{Kind: KindTime, Int: ms})
			return string(b), err
		}
	}
	return "", fmt.Errorf("table %s: row key %q has no {%s}", table, tmpl.src, spec.EventTime)
}

// ReverseTimeKey reports whether table's key orders time newest first
// (a reverse timestamp), and whether it has a time segment at all.
func ReverseTimeKey(spec *Spec, table string) (reversed, hasTime bool) {
	tmpl, err := tableTemplate(spec, table)
	if err != nil {
		return false, false
	}
	idx := spec.FieldIndex(spec.EventTime)
	for i := range tmpl.segs {
		s := &tmpl.segs[i]
		if s.kind == segField && s.field == idx {
			ordered, up := s.keepsOrder()
			return ordered && !up, ordered
		}
	}
	return false, false
}

func tableTemplate(spec *Spec, table string) (*Template, error) {
	ts := &spec.Bigtable.Tables[0]
	if table != "" {
		if ts = spec.Table(table); ts == nil {
			return nil, fmt.Errorf("spec %s has no table %q", spec.Name, table)
		}
	}
	tmpl, err := CompileTemplate(ts.RowKey, spec)
	if err != nil {
		return nil, err
	}
	return tmpl.WithEscape(ts.Escape), nil
}
