package schemas

import (
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas/timestamps"
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
// Segment is a field piped through functions ({field|fn|fn:arg}), a salt
// ({salt:N|f1,f2}) or a hash of fields ({hash|f1,f2}). See schemas/README.md.
type Template struct {
	Src      string
	Segs     []Segment
	Delim    string
	Escape   bool
	MaxBytes int
}

// Segment kinds.
const (
	SegLiteral = iota
	SegField
	SegSalt
	SegHash
)

// Segment is a literal (field < 0), a field piped through ops, a salt or a
// hash. Salt and hash segments list their fields in fields; field holds the
// first of them, so field >= 0 means "not a literal".
type Segment struct {
	Kind    int
	Literal string
	Field   int
	Name    string
	Ops     []op
	Fields  []int    // salt and hash: the fields hashed
	Names   []string // salt and hash: their names
	Buckets int      // salt: N
	Width   int      // salt: digits of N-1
	// valuesOnly renders a tag set as its values only (the values op).
	ValuesOnly bool
	// in is the field's kind; out the kind the segment renders (after its
	// ops).
	In, Out Kind
}

// op transforms one value; name and arg are kept for introspection.
type op struct {
	Name string
	Arg  string
	Fn   func(Value) (Value, error)
	// app, when set, renders the op's output straight into the key (no
	// intermediate string); it is used when the op is the segment's last.
	App func(dst []byte, v Value) []byte
	// order is how the op's output sorts against its input: orderUp keeps
	// the order, orderDown reverses it, orderNone scrambles it.
	Order int
}

// How an op's output order follows its input's.
const (
	OrderUp = iota
	OrderDown
	OrderNone
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
	"year":   {timeKinds, KindString, OrderUp, timeBucket("2006")},
	"month":  {timeKinds, KindString, OrderUp, timeBucket("2006-01")},
	"day":    {timeKinds, KindString, OrderUp, timeBucket("2006-01-02")},
	"hour":   {timeKinds, KindString, OrderUp, timeBucket("2006-01-02T15")},
	"minute": {timeKinds, KindString, OrderUp, timeBucket("2006-01-02T15:04")},
	"ms": {timeKinds, KindInt, OrderUp, noArg(func(v Value) (Value, error) {
		return Value{Kind: KindInt, Int: v.Int}, nil
	})},
	"pad":     {[]Kind{KindInt, KindTime}, KindString, OrderUp, padOp},
	"reverse": {[]Kind{KindInt, KindTime}, KindString, OrderDown, noArg(reverseTs)},
	"base":    {timeKinds, KindInt, OrderUp, timeBase(false)},
	"offset":  {timeKinds, KindInt, OrderNone, timeBase(true)},
	"values": {[]Kind{KindTags}, KindNull, OrderNone, noArg(func(v Value) (Value, error) {
		return v, nil
	})},
	"revdomain": {[]Kind{KindString}, KindString, OrderNone, noArg(func(v Value) (Value, error) {
		return Value{Kind: KindString, Str: ReverseDomain(v.Str)}, nil
	})},
	"hash": {nil, KindString, OrderNone, noArg(func(v Value) (Value, error) {
		return Value{Kind: KindString, Str: HashHex(AppendText(nil, v))}, nil
	})},
	"hex": {[]Kind{KindString, KindBytes}, KindString, OrderUp, noArg(func(v Value) (Value, error) {
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

// Appenders render some ops' output straight into the key.
var Appenders = map[string]func(dst []byte, v Value) []byte{
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
	if ms < 0 || ms >= timestamps.MaxEventMs {
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

// HashHex is the 16 hex digits of the 64-bit FNV-1a hash of b.
func HashHex(b []byte) string {
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

// KindOfType maps a field type to the Kind its values have.
func KindOfType(t string) Kind {
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
	t := &Template{Src: src, Delim: spec.KeyDelimiter, MaxBytes: MaxRowKeyBytes}
	rest := src
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			t.Segs = append(t.Segs, Segment{Literal: rest, Field: -1})
			break
		}
		if open > 0 {
			t.Segs = append(t.Segs, Segment{Literal: rest[:open], Field: -1})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("template %q: unclosed '{'", src)
		}
		seg, err := compileSegment(rest[open+1:open+end], spec)
		if err != nil {
			return nil, fmt.Errorf("template %q: %w", src, err)
		}
		t.Segs = append(t.Segs, seg)
		rest = rest[open+end+1:]
	}
	for _, s := range t.Segs {
		if s.Kind == SegLiteral && strings.ContainsRune(s.Literal, '}') {
			return nil, fmt.Errorf("template %q: stray '}' outside a {field}", src)
		}
	}
	return t, nil
}

func compileSegment(body string, spec *Spec) (Segment, error) {
	parts := strings.Split(body, "|")
	head := strings.TrimSpace(parts[0])
	if n, ok := strings.CutPrefix(head, "salt:"); ok || (head == "hash" && spec.FieldIndex("hash") < 0) {
		return compileMulti(head, n, parts[1:], spec)
	}
	idx := spec.FieldIndex(head)
	if idx < 0 {
		return Segment{}, fmt.Errorf("unknown field %q; declare it under fields or fix the name", head)
	}
	seg := Segment{Kind: SegField, Field: idx, Name: head, In: FieldKind(spec, idx), Out: FieldKind(spec, idx)}
	for i, p := range parts[1:] {
		fname, arg, _ := strings.Cut(strings.TrimSpace(p), ":")
		def, ok := templateFuncs[fname]
		if !ok {
			return Segment{}, fmt.Errorf("unknown function %q after %q; see schemas/README.md for the functions", fname, head)
		}
		if def.in != nil && !KindIn(seg.Out, def.in) {
			return Segment{}, fmt.Errorf("%s|%s: %s takes a %s, but %s is a %s here", head, fname, fname, kindList(def.in), head, kindNames[seg.Out])
		}
		fn, err := def.make(arg)
		if err != nil {
			return Segment{}, fmt.Errorf("%s: %w", fname, err)
		}
		if fname == "values" {
			if i != len(parts)-2 {
				return Segment{}, fmt.Errorf("%s|values: values must be the last function", head)
			}
			seg.ValuesOnly = true
		}
		if def.out != KindNull {
			seg.Out = def.out
		}
		seg.Ops = append(seg.Ops, op{Name: fname, Arg: arg, Fn: fn, App: Appenders[fname], Order: def.order})
	}
	return seg, nil
}

// compileMulti compiles {salt:N|f1,f2} and {hash|f1,f2}.
func compileMulti(head, n string, rest []string, spec *Spec) (Segment, error) {
	seg := Segment{Kind: SegHash, Name: head, Out: KindString}
	if strings.HasPrefix(head, "salt:") {
		b, err := strconv.Atoi(n)
		if err != nil || b < 2 || b > 10000 {
			return Segment{}, fmt.Errorf("%s: give the number of salt buckets, 2 to 10000, e.g. {salt:8|sensor_id}", head)
		}
		seg.Kind, seg.Buckets, seg.Width = SegSalt, b, len(strconv.Itoa(b-1))
	}
	if len(rest) != 1 || strings.TrimSpace(rest[0]) == "" {
		return Segment{}, fmt.Errorf("{%s|...}: list the fields after one '|', comma-separated, e.g. {%s|sensor_id}", head, head)
	}
	for _, f := range strings.Split(rest[0], ",") {
		f = strings.TrimSpace(f)
		idx := spec.FieldIndex(f)
		if idx < 0 {
			return Segment{}, fmt.Errorf("%s: unknown field %q", head, f)
		}
		seg.Fields = append(seg.Fields, idx)
		seg.Names = append(seg.Names, f)
	}
	seg.Field = seg.Fields[0]
	return seg, nil
}

func FieldKind(spec *Spec, idx int) Kind {
	if idx < len(spec.Fields) {
		return KindOfType(spec.Fields[idx].Type)
	}
	return KindBool // an imputed flag
}

func KindIn(k Kind, ks []Kind) bool {
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
func (t *Template) String() string { return t.Src }

// WithEscape makes Render escape the delimiter in field values (as "\#",
// with a backslash itself written "\\") instead of rejecting them.
func (t *Template) WithEscape(escape bool) *Template { t.Escape = escape; return t }

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

// OpOut is the kind segment s holds after its i-th op.
func (s *Segment) OpOut(i int) Kind {
	k := s.In
	for _, o := range s.Ops[:i+1] {
		if def, ok := templateFuncs[o.Name]; ok && def.out != KindNull {
			k = def.out
		}
	}
	return k
}

// KeepsOrder reports whether the segment's text sorts as its values do
// (ascending or, with up false, descending): strings as they are, padded
// integers and times, reverse timestamps (descending), time buckets. Plain
// decimal numbers do not (9 sorts after 10).
func (s *Segment) KeepsOrder() (ordered, up bool) {
	if s.Kind != SegField {
		return false, false
	}
	up = true
	for _, o := range s.Ops {
		switch o.Order {
		case OrderNone:
			return false, false
		case OrderDown:
			up = !up
		}
	}
	if len(s.Ops) == 0 {
		return s.In == KindString || s.In == KindBytes, true
	}
	switch s.Ops[len(s.Ops)-1].Name {
	case "pad", "reverse", "year", "month", "day", "hour", "minute", "hex":
		return true, up
	}
	return false, false
}

// ReverseTimeKey reports whether table's key orders time newest first
// (a reverse timestamp), and whether it has a time segment at all.
func ReverseTimeKey(spec *Spec, table string) (reversed, hasTime bool) {
	tmpl, err := TableTemplate(spec, table)
	if err != nil {
		return false, false
	}
	idx := spec.FieldIndex(spec.EventTime)
	for i := range tmpl.Segs {
		s := &tmpl.Segs[i]
		if s.Kind == SegField && s.Field == idx {
			ordered, up := s.KeepsOrder()
			return ordered && !up, ordered
		}
	}
	return false, false
}

func TableTemplate(spec *Spec, table string) (*Template, error) {
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
