package schemas

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"time"
)

// MaxRowKeyBytes is Bigtable's row-key limit: 4 KB (Cloud Bigtable's
// schema-design guide, https://cloud.google.com/bigtable/docs/schema-design#row-keys).
const MaxRowKeyBytes = 4096

// ReverseWidth is the width of a reverse timestamp: the digits of
// math.MaxInt64, so every reverse timestamp has the same length and sorts
// numerically.
const ReverseWidth = 19

// Template is a compiled row-key or qualifier template such as
// "{sensor_id}#{timestamp|hour}": literal text, and segments in braces. A
// segment is a field piped through functions ({field|fn|fn:arg}), a salt
// ({salt:N|f1,f2}) or a hash of fields ({hash|f1,f2}). See schemas/README.md.
type Template struct {
	src      string
	segs     []segment
	delim    string
	escape   bool
	maxBytes int
}

// Segment kinds.
const (
	segLiteral = iota
	segField
	segSalt
	segHash
)

// segment is a literal (field < 0), a field piped through ops, a salt or a
// hash. Salt and hash segments list their fields in fields; field holds the
// first of them, so field >= 0 means "not a literal".
type segment struct {
	kind    int
	literal string
	field   int
	name    string
	ops     []op
	fields  []int    // salt and hash: the fields hashed
	names   []string // salt and hash: their names
	buckets int      // salt: N
	width   int      // salt: digits of N-1
	// valuesOnly renders a tag set as its values only (the values op).
	valuesOnly bool
	// in is the field's kind; out the kind the segment renders (after its
	// ops).
	in, out Kind
}

// op transforms one value; name and arg are kept for introspection.
type op struct {
	name string
	arg  string
	fn   func(Value) (Value, error)
	// app, when set, renders the op's output straight into the key (no
	// intermediate string); it is used when the op is the segment's last.
	app func(dst []byte, v Value) []byte
	// order is how the op's output sorts against its input: orderUp keeps
	// the order, orderDown reverses it, orderNone scrambles it.
	order int
}

// How an op's output order follows its input's.
const (
	orderUp = iota
	orderDown
	orderNone
)

// opDef is one template function: the kinds it accepts, the kind it
// produces, how its output sorts, and a factory taking the argument (the
// text after ':').
type opDef struct {
	in    []Kind
	out   Kind // KindNull: same as input
	order int
	make  func(arg string) (func(Value) (Value, error), error)
}

var timeKinds = []Kind{KindTime}

// templateFuncs are the functions a template may pipe a field through.
var templateFuncs = map[string]opDef{
	"year":   {timeKinds, KindString, orderUp, timeBucket("2006")},
	"month":  {timeKinds, KindString, orderUp, timeBucket("2006-01")},
	"day":    {timeKinds, KindString, orderUp, timeBucket("2006-01-02")},
	"hour":   {timeKinds, KindString, orderUp, timeBucket("2006-01-02T15")},
	"minute": {timeKinds, KindString, orderUp, timeBucket("2006-01-02T15:04")},
	"ms": {timeKinds, KindInt, orderUp, noArg(func(v Value) (Value, error) {
		return Value{Kind: KindInt, Int: v.Int}, nil
	})},
	"pad":     {[]Kind{KindInt, KindTime}, KindString, orderUp, padOp},
	"reverse": {[]Kind{KindInt, KindTime}, KindString, orderDown, noArg(reverseTs)},
	"base":    {timeKinds, KindInt, orderUp, timeBase(false)},
	"offset":  {timeKinds, KindInt, orderNone, timeBase(true)},
	"values": {[]Kind{KindTags}, KindNull, orderNone, noArg(func(v Value) (Value, error) {
		return v, nil
	})},
	"revdomain": {[]Kind{KindString}, KindString, orderNone, noArg(func(v Value) (Value, error) {
		return Value{Kind: KindString, Str: ReverseDomain(v.Str)}, nil
	})},
	"hash": {nil, KindString, orderNone, noArg(func(v Value) (Value, error) {
		return Value{Kind: KindString, Str: hashHex(AppendText(nil, v))}, nil
	})},
	"hex": {[]Kind{KindString, KindBytes}, KindString, orderUp, noArg(func(v Value) (Value, error) {
		return Value{Kind: KindString, Str: hex.EncodeToString([]byte(v.Str))}, nil
	})},
}

func noArg(fn func(Value) (Value, error)) func(string) (func(Value) (Value, error), error) {
	return func(arg string) (func(Value) (Value, error), error) {
		if arg != "" {
			return nil, fmt.Errorf("takes no argument")
		}
		return fn, nil
	}
}

func timeBucket(layout string) func(string) (func(Value) (Value, error), error) {
	return noArg(func(v Value) (Value, error) {
		return Value{Kind: KindString, Str: time.UnixMilli(v.Int).UTC().Format(layout)}, nil
	})
}

// appenders render some ops' output straight into the key.
var appenders = map[string]func(dst []byte, v Value) []byte{
	"year":   bucketAppender(bucketYear),
	"month":  bucketAppender(bucketMonth),
	"day":    bucketAppender(bucketDay),
	"hour":   bucketAppender(bucketHour),
	"minute": bucketAppender(bucketMinute),
}

// Time-bucket granularities, coarsest first.
const (
	bucketYear = iota
	bucketMonth
	bucketDay
	bucketHour
	bucketMinute
)

// bucketAppender renders a UTC time bucket by appending digits, the same
// text as time.Format with the bucket's layout (2006, 2006-01, 2006-01-02,
// 2006-01-02T15, 2006-01-02T15:04) without building a string: the hour
// bucket is on the hot path of every reading keyed by hour.
func bucketAppender(level int) func(dst []byte, v Value) []byte {
	return func(dst []byte, v Value) []byte {
		y, mo, d, hour, minute := utcFields(v.Int)
		dst = appendDigits(dst, y, 4)
		if level >= bucketMonth {
			dst = appendDigits(append(dst, '-'), mo, 2)
		}
		if level >= bucketDay {
			dst = appendDigits(append(dst, '-'), d, 2)
		}
		if level >= bucketHour {
			dst = appendDigits(append(dst, 'T'), hour, 2)
		}
		if level >= bucketMinute {
			dst = appendDigits(append(dst, ':'), minute, 2)
		}
		return dst
	}
}

// utcFields is the UTC year, month, day, hour and minute of epoch
// milliseconds ms, as time.UnixMilli(ms).UTC() gives them. From 1970 to
// 9999 it computes them directly (the days-to-civil algorithm of
// https://howardhinnant.github.io/date_algorithms.html), several times
// faster than time's Date and Clock; TestUTCFieldsMatchesTime checks it.
func utcFields(ms int64) (year, month, day, hour, minute int) {
	const msPerDay = 86400000
	if ms < 0 || ms >= maxEventMs {
		t := time.UnixMilli(ms).UTC()
		y, mo, d := t.Date()
		return y, int(mo), d, t.Hour(), t.Minute()
	}
	days, rem := ms/msPerDay, ms%msPerDay
	hour, minute = int(rem/3600000), int(rem/60000%60)
	z := days + 719468 // days since 0000-03-01
	era := z / 146097
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	day = int(doy - (153*mp+2)/5 + 1)
	month = int(mp + 3)
	if mp >= 10 {
		month = int(mp - 9)
	}
	year = int(yoe + era*400)
	if month <= 2 {
		year++
	}
	return year, month, day, hour, minute
}

// appendDigits appends n (0 <= n) zero-padded to width digits.
func appendDigits(dst []byte, n, width int) []byte {
	if width == 2 && n >= 0 && n < 100 {
		return append(dst, byte('0'+n/10), byte('0'+n%10))
	}
	var b [20]byte
	i := len(b)
	for n > 0 || i > len(b)-width {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return append(dst, b[i:]...)
}

// padOp renders a non-negative integer zero-padded to a fixed width.
func padOp(arg string) (func(Value) (Value, error), error) {
	w, err := strconv.Atoi(arg)
	if err != nil || w < 1 || w > 19 {
		return nil, fmt.Errorf("pad:%s: give a width between 1 and 19, e.g. pad:13", arg)
	}
	return func(v Value) (Value, error) {
		if v.Int < 0 {
			return v, fmt.Errorf("%d is negative; pad needs a value >= 0 to keep the sort order", v.Int)
		}
		s := strconv.FormatInt(v.Int, 10)
		if len(s) > w {
			return v, fmt.Errorf("%d does not fit in %d digits", v.Int, w)
		}
		return Value{Kind: KindString, Str: strings.Repeat("0", w-len(s)) + s}, nil
	}, nil
}

// ReverseTimestamp is math.MaxInt64 - ms, zero-padded to ReverseWidth
// digits, so newer times sort first.
func ReverseTimestamp(ms int64) string {
	s := strconv.FormatInt(math.MaxInt64-ms, 10)
	return strings.Repeat("0", ReverseWidth-len(s)) + s
}

func reverseTs(v Value) (Value, error) {
	if v.Int < 0 {
		return v, fmt.Errorf("%d is negative; reverse needs a value >= 0", v.Int)
	}
	return Value{Kind: KindString, Str: ReverseTimestamp(v.Int)}, nil
}

// timeBase splits a time Heroic-style: base:B is ms - ms mod 2^B (the row
// base) and offset:B is ms mod 2^B (the qualifier). B defaults to 32, about
// 50 days.
func timeBase(offset bool) func(string) (func(Value) (Value, error), error) {
	return func(arg string) (func(Value) (Value, error), error) {
		bits := 32
		if arg != "" {
			b, err := strconv.Atoi(arg)
			if err != nil || b < 1 || b > 62 {
				return nil, fmt.Errorf("%q: give the bits of the period, 1 to 62 (32 is Heroic's 2^32 ms)", arg)
			}
			bits = b
		}
		period := int64(1) << bits
		return func(v Value) (Value, error) {
			if v.Int < 0 {
				return v, fmt.Errorf("%d is before 1970; base and offset need a time >= 0", v.Int)
			}
			if offset {
				return Value{Kind: KindInt, Int: v.Int % period}, nil
			}
			return Value{Kind: KindInt, Int: v.Int - v.Int%period}, nil
		}, nil
	}
}

// ReverseDomain reverses the dot-separated labels of a domain name:
// www.example.com becomes com.example.www.
func ReverseDomain(d string) string {
	labels := strings.Split(d, ".")
	for i, j := 0, len(labels)-1; i < j; i, j = i+1, j-1 {
		labels[i], labels[j] = labels[j], labels[i]
	}
	return strings.Join(labels, ".")
}

// hashHex is the 16 hex digits of the 64-bit FNV-1a hash of b.
func hashHex(b []byte) string {
	h := fnv.New64a()
	h.Write(b)
	return fmt.Sprintf("%016x", h.Sum64())
}

// SaltBucket is the salt of the given field texts: the 32-bit FNV-1a hash of
// the texts joined by 0x1f (unit separator), mod n. Readers recompute it to
// find a key's bucket.
func SaltBucket(n int, texts ...[]byte) int {
	h := fnv.New32a()
	for i, t := range texts {
		if i > 0 {
			h.Write([]byte{0x1f})
		}
		h.Write(t)
	}
	return int(h.Sum32() % uint32(n))
}

// SaltText renders bucket b of n zero-padded to the digits of n-1.
func SaltText(b, n int) string {
	w := len(strconv.Itoa(n - 1))
	s := strconv.Itoa(b)
	return strings.Repeat("0", w-len(s)) + s
}

// kindOfType maps a field type to the Kind its values have.
func kindOfType(t string) Kind {
	switch t {
	case TypeString:
		return KindString
	case TypeFloat:
		return KindFloat
	case TypeInt:
		return KindInt
	case TypeBool:
		return KindBool
	case TypeTimestamp:
		return KindTime
	case TypeTags:
		return KindTags
	case TypeBytes:
		return KindBytes
	}
	return KindNull
}

var kindNames = map[Kind]string{KindString: "string", KindFloat: "float", KindInt: "int", KindBool: "bool", KindTime: "timestamp", KindTags: "tags", KindBytes: "bytes"}

// CompileTemplate parses src against spec's fields and the table's delimiter.
func CompileTemplate(src string, spec *Spec) (*Template, error) {
	t := &Template{src: src, delim: spec.KeyDelimiter, maxBytes: MaxRowKeyBytes}
	rest := src
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			t.segs = append(t.segs, segment{literal: rest, field: -1})
			break
		}
		if open > 0 {
			t.segs = append(t.segs, segment{literal: rest[:open], field: -1})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("template %q: unclosed '{'", src)
		}
		seg, err := compileSegment(rest[open+1:open+end], spec)
		if err != nil {
			return nil, fmt.Errorf("template %q: %w", src, err)
		}
		t.segs = append(t.segs, seg)
		rest = rest[open+end+1:]
	}
	for _, s := range t.segs {
		if s.kind == segLiteral && strings.ContainsRune(s.literal, '}') {
			return nil, fmt.Errorf("template %q: stray '}' outside a {field}", src)
		}
	}
	return t, nil
}

func compileSegment(body string, spec *Spec) (segment, error) {
	parts := strings.Split(body, "|")
	head := strings.TrimSpace(parts[0])
	if n, ok := strings.CutPrefix(head, "salt:"); ok || (head == "hash" && spec.FieldIndex("hash") < 0) {
		return compileMulti(head, n, parts[1:], spec)
	}
	idx := spec.FieldIndex(head)
	if idx < 0 {
		return segment{}, fmt.Errorf("unknown field %q; declare it under fields or fix the name", head)
	}
	seg := segment{kind: segField, field: idx, name: head, in: fieldKind(spec, idx), out: fieldKind(spec, idx)}
	for i, p := range parts[1:] {
		fname, arg, _ := strings.Cut(strings.TrimSpace(p), ":")
		def, ok := templateFuncs[fname]
		if !ok {
			return segment{}, fmt.Errorf("unknown function %q after %q; see schemas/README.md for the functions", fname, head)
		}
		if def.in != nil && !kindIn(seg.out, def.in) {
			return segment{}, fmt.Errorf("%s|%s: %s takes a %s, but %s is a %s here", head, fname, fname, kindList(def.in), head, kindNames[seg.out])
		}
		fn, err := def.make(arg)
		if err != nil {
			return segment{}, fmt.Errorf("%s: %w", fname, err)
		}
		if fname == "values" {
			if i != len(parts)-2 {
				return segment{}, fmt.Errorf("%s|values: values must be the last function", head)
			}
			seg.valuesOnly = true
		}
		if def.out != KindNull {
			seg.out = def.out
		}
		seg.ops = append(seg.ops, op{name: fname, arg: arg, fn: fn, app: appenders[fname], order: def.order})
	}
	return seg, nil
}

// compileMulti compiles {salt:N|f1,f2} and {hash|f1,f2}.
func compileMulti(head, n string, rest []string, spec *Spec) (segment, error) {
	seg := segment{kind: segHash, name: head, out: KindString}
	if strings.HasPrefix(head, "salt:") {
		b, err := strconv.Atoi(n)
		if err != nil || b < 2 || b > 10000 {
			return segment{}, fmt.Errorf("%s: give the number of salt buckets, 2 to 10000, e.g. {salt:8|sensor_id}", head)
		}
		seg.kind, seg.buckets, seg.width = segSalt, b, len(strconv.Itoa(b-1))
	}
	if len(rest) != 1 || strings.TrimSpace(rest[0]) == "" {
		return segment{}, fmt.Errorf("{%s|...}: list the fields after one '|', comma-separated, e.g. {%s|sensor_id}", head, head)
	}
	for _, f := range strings.Split(rest[0], ",") {
		f = strings.TrimSpace(f)
		idx := spec.FieldIndex(f)
		if idx < 0 {
			return segment{}, fmt.Errorf("%s: unknown field %q", head, f)
		}
		seg.fields = append(seg.fields, idx)
		seg.names = append(seg.names, f)
	}
	seg.field = seg.fields[0]
	return seg, nil
}

func fieldKind(spec *Spec, idx int) Kind {
	if idx < len(spec.Fields) {
		return kindOfType(spec.Fields[idx].Type)
	}
	return KindBool // an imputed flag
}

func kindIn(k Kind, ks []Kind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

func kindList(ks []Kind) string {
	var names []string
	for _, k := range ks {
		names = append(names, kindNames[k])
	}
	return strings.Join(names, " or ")
}

// String returns the template source.
func (t *Template) String() string { return t.src }

// WithEscape makes Render escape the delimiter in field values (as "\#",
// with a backslash itself written "\\") instead of rejecting them.
func (t *Template) WithEscape(escape bool) *Template { t.escape = escape; return t }

// Render appends the rendered template for r to dst. A field value that
// contains the delimiter is rejected with ErrInvalidField unless escaping is
// on; a tag set is checked element by element, since its own "," and "="
// separators are part of the rendering. A key over MaxRowKeyBytes is
// rejected too.
func (t *Template) Render(dst []byte, r *Record) ([]byte, error) {
	start := len(dst)
	var err error
	for i := range t.segs {
		s := &t.segs[i]
		switch s.kind {
		case segLiteral:
			dst = append(dst, s.literal...)
			continue
		case segSalt, segHash:
			if dst, err = s.appendMulti(dst, r.Values); err != nil {
				return dst[:start], err
			}
			continue
		}
		v := r.Values[s.field]
		if v.Kind == KindNull && s.in == KindTags {
			v = Value{Kind: KindTags} // an absent tag set is the empty set
		}
		if v.Kind == KindNull {
			return dst[:start], reject(ErrMissingField, "%s is needed for the key but has no value", s.name)
		}
		if dst, err = t.appendField(dst, s, v); err != nil {
			return dst[:start], err
		}
	}
	if n := len(dst) - start; t.maxBytes > 0 && n > t.maxBytes {
		return dst[:start], reject(ErrInvalidField, "row key is %d bytes; Bigtable allows at most %d", n, t.maxBytes)
	}
	return dst, nil
}

// appendField renders one field segment of value v.
func (t *Template) appendField(dst []byte, s *segment, v Value) ([]byte, error) {
	var err error
	var app func([]byte, Value) []byte
	for i, o := range s.ops {
		if i == len(s.ops)-1 && o.app != nil {
			app = o.app
			break
		}
		if v, err = o.fn(v); err != nil {
			return dst, reject(ErrInvalidField, "%s|%s: %v", s.name, o.name, err)
		}
	}
	if v.Kind == KindTags && app == nil {
		return t.appendTags(dst, s, v.Pairs)
	}
	segStart := len(dst)
	if app != nil {
		dst = app(dst, v)
	} else {
		dst = AppendText(dst, v)
	}
	if t.delim != "" && bytes.Contains(dst[segStart:], t.delimBytes()) {
		if !t.escape {
			return dst, reject(ErrInvalidField, "%s %q contains the key delimiter %q", s.name, string(dst[segStart:]), t.delim)
		}
		esc := t.escapeText(string(dst[segStart:]))
		dst = append(dst[:segStart], esc...)
	} else if t.escape && bytes.IndexByte(dst[segStart:], '\\') >= 0 {
		esc := t.escapeText(string(dst[segStart:]))
		dst = append(dst[:segStart], esc...)
	}
	return dst, nil
}

func (t *Template) delimBytes() []byte {
	if len(t.delim) == 1 {
		return []byte{t.delim[0]}[:1:1]
	}
	return []byte(t.delim)
}

func (t *Template) escapeText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	if t.delim != "" {
		s = strings.ReplaceAll(s, t.delim, `\`+t.delim)
	}
	return s
}

// appendTags renders a sorted tag set as k=v,k=v (or v,v with values),
// checking each key and value: none may hold the tag separators "," or "="
// (keys) or the key delimiter, unless escaping is on for the delimiter.
func (t *Template) appendTags(dst []byte, s *segment, pairs []Pair) ([]byte, error) {
	elem := func(what, x string, seps string) (string, error) {
		if strings.ContainsAny(x, seps) {
			return "", reject(ErrInvalidField, "%s %s %q contains one of %q, which separate tag elements", s.name, what, x, seps)
		}
		if t.delim != "" && strings.Contains(x, t.delim) {
			if !t.escape {
				return "", reject(ErrInvalidField, "%s %s %q contains the key delimiter %q", s.name, what, x, t.delim)
			}
			return t.escapeText(x), nil
		}
		return x, nil
	}
	for i, p := range pairs {
		if i > 0 {
			dst = append(dst, ',')
		}
		if !s.valuesOnly {
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
func (s *segment) appendMulti(dst []byte, vals []Value) ([]byte, error) {
	texts := make([][]byte, len(s.fields))
	for i, f := range s.fields {
		if vals[f].Kind == KindNull {
			return dst, reject(ErrMissingField, "%s is needed for the key's %s but has no value", s.names[i], s.name)
		}
		texts[i] = AppendText(nil, vals[f])
	}
	return s.appendMultiText(dst, texts), nil
}

func (s *segment) appendMultiText(dst []byte, texts [][]byte) []byte {
	if s.kind == segSalt {
		return append(dst, SaltText(SaltBucket(s.buckets, texts...), s.buckets)...)
	}
	var joined []byte
	for i, t := range texts {
		if i > 0 {
			joined = append(joined, 0x1f)
		}
		joined = append(joined, t...)
	}
	return append(dst, hashHex(joined)...)
}

// AppendText appends v's text form: shortest round-trip decimal for floats
// (strconv.FormatFloat(v, 'f', -1, 64)), decimal integers, true/false,
// strings as they are, epoch milliseconds for times, and k=v,k=v for tags.
func AppendText(dst []byte, v Value) []byte {
	switch v.Kind {
	case KindString, KindBytes:
		return append(dst, v.Str...)
	case KindFloat:
		return appendFloat(dst, v.Num)
	case KindInt, KindTime:
		return strconv.AppendInt(dst, v.Int, 10)
	case KindBool:
		return strconv.AppendBool(dst, v.Bool)
	case KindTags:
		for i, p := range v.Pairs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, p.K...)
			dst = append(dst, '=')
			dst = append(dst, p.V...)
		}
	}
	return dst
}

// decimalScales are the powers of ten appendFloat's fast path tries.
var decimalScales = [...]float64{1, 10, 100, 1000}

// appendFloat is strconv.AppendFloat(dst, x, 'f', -1, 64), byte for byte,
// with a fast path for what sensors send: numbers of at most three
// decimals below 1e9 in magnitude (72, 36.6, 97.25). When n/10^k, computed
// with one correctly rounded division, is x, the decimal n·10^-k reads back
// as x; below 1e9 a float64's spacing is under 10^-6, so no other decimal
// of at most three places (nor a shorter one) reads back as x, and that
// decimal is the shortest form strconv would print. It is printed as an
// integer and a fraction, without strconv's general shortest-digits search.
// TestAppendFloatMatchesStrconv checks it against strconv.
func appendFloat(dst []byte, x float64) []byte {
	if x == 0 || !(x > -1e9 && x < 1e9) {
		return strconv.AppendFloat(dst, x, 'f', -1, 64)
	}
	neg := x < 0
	if neg {
		x = -x
	}
	for k, scale := range decimalScales {
		y := x * scale
		n := int64(y)
		if float64(n) != y || float64(n)/scale != x {
			continue
		}
		for ; k > 0 && n%10 == 0; k-- {
			n /= 10
		}
		if neg {
			dst = append(dst, '-')
		}
		if k == 0 {
			return strconv.AppendInt(dst, n, 10)
		}
		p := int64(1)
		for range k {
			p *= 10
		}
		dst = append(strconv.AppendInt(dst, n/p, 10), '.')
		return appendDigits(dst, int(n%p), k)
	}
	if neg {
		x = -x
	}
	return strconv.AppendFloat(dst, x, 'f', -1, 64)
}
