package schemas

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	// fastjson is chosen by measurement (see BenchmarkDecode in
	// bench_test.go): it scans a line without reflection, lets us tell
	// absent from null from the wrong JSON type, and reuses its arena through
	// a pool, so a typical reading line costs a fraction of encoding/json's time.
	"github.com/valyala/fastjson"
)

// Parser turns input lines into validated Records following a Spec. It is
// safe for concurrent use.
type Parser struct {
	spec     *Spec
	paths    [][]string // per field; nil for fields filled by explode
	eventIdx int
	explode  []string
	pool     fastjson.ParserPool
	arenas   fastjson.ArenaPool
	// minMs and maxMs bound the accepted event times (inclusive); limit
	// says what sets them, for the dead letters' reasons.
	minMs, maxMs int64
	limit        string
	// known are the payload's top-level keys the spec reads.
	known map[string]bool
}

// EventTimeLimits are the event times a run accepts (epoch ms, inclusive)
// and what sets them, for dead-letter reasons.
type EventTimeLimits struct {
	MinMs, MaxMs int64
	Why          string
}

// NewParser prepares a parser for spec, accepting the spec's event-time
// range.
func NewParser(spec *Spec) *Parser {
	lo, hi := spec.EventTimeBounds()
	return NewParserLimited(spec, EventTimeLimits{MinMs: lo, MaxMs: hi, Why: "the spec's event_time_range sets them"})
}

// NewParserLimited is NewParser accepting the event times of lim, which
// must lie within the spec's range (Compiled narrows it to BigQuery's
// writable window).
func NewParserLimited(spec *Spec, lim EventTimeLimits) *Parser {
	p := &Parser{spec: spec, eventIdx: spec.FieldIndex(spec.EventTime), known: map[string]bool{}}
	p.minMs, p.maxMs, p.limit = lim.MinMs, lim.MaxMs, lim.Why
	for _, f := range spec.Fields {
		if ex := spec.Explode; ex != nil && (f.Name == ex.TimeField || f.Name == ex.ValueField) {
			p.paths = append(p.paths, nil)
			continue
		}
		path := f.Path
		if path == "" {
			path = f.Name
		}
		p.paths = append(p.paths, strings.Split(path, "."))
		p.known[p.paths[len(p.paths)-1][0]] = true
	}
	if spec.Explode != nil {
		p.explode = strings.Split(spec.Explode.Path, ".")
		p.known[p.explode[0]] = true
	}
	return p
}

// Input is what a payload's reader knows besides the payload.
type Input struct {
	// Attributes are the Pub/Sub message's attributes (nil for a file's
	// line); fields that declare an attribute take its value.
	Attributes map[string]string
	// Unknown, if set, is called with each top-level payload key the spec
	// does not read, when the spec's unknown_fields is count.
	Unknown func(key string)
}

// Spec returns the parser's spec.
func (p *Parser) Spec() *Spec { return p.spec }

// check classes, in the order their reasons are reported.
const (
	classMissing = iota
	classInvalid
	classTimestamp
	classRange
	numClasses
)

var classReason = [numClasses]error{ErrMissingField, ErrInvalidField, ErrBadTimestamp, ErrOutOfRange}

// Parse appends the records of one input line to dst. A blank line yields no
// record and no error. An invalid line yields an error wrapping one of the
// reason sentinels; when a line has several problems, the reason reported is
// the first of missing_field, invalid_field, bad_timestamp, out_of_range.
func (p *Parser) Parse(dst []Record, line []byte, source string) ([]Record, error) {
	return p.ParseString(dst, string(line), source)
}

// ParseString is Parse for a line already held as a string; the records
// share it as their Raw payload without a copy.
func (p *Parser) ParseString(dst []Record, line, source string) ([]Record, error) {
	return p.ParseInput(dst, line, source, Input{})
}

// ParseInput is ParseString for a payload read with in: a message's
// attributes fill the fields that name them, and keys the spec does not
// read are reported or rejected as the spec's unknown_fields says.
func (p *Parser) ParseInput(dst []Record, line, source string, in Input) ([]Record, error) {
	// A UTF-8 byte-order mark (some exporters start files and messages
	// with one) is not part of the JSON.
	trimmed := strings.TrimSpace(strings.TrimPrefix(line, utf8BOM))
	if len(trimmed) == 0 {
		return dst, nil
	}
	jp := p.pool.Get()
	defer p.pool.Put(jp)
	root, err := jp.Parse(trimmed)
	if err != nil {
		return dst, reject(ErrMalformed, "not valid JSON: %v", err)
	}
	if root.Type() != fastjson.TypeObject {
		return dst, reject(ErrMalformed, "a line must be a JSON object, got %s", root.Type())
	}
	if k := duplicateKey(root); k != "" {
		// Parsers disagree on which copy wins (fastjson keeps the first,
		// encoding/json the last): refuse to guess.
		return dst, reject(ErrMalformed, "key %q appears twice in the object", k)
	}
	if err := p.unknownKeys(root, in.Unknown); err != nil {
		return dst, err
	}
	raw := line
	values := make([]Value, p.spec.NumValues())
	var errs [numClasses]error
	var arena *fastjson.Arena
	defer func() {
		if arena != nil {
			p.arenas.Put(arena)
		}
	}()
	for i := range p.spec.Fields {
		if p.paths[i] == nil {
			continue
		}
		f := &p.spec.Fields[i]
		v := root.Get(p.paths[i]...)
		if f.Attribute != "" && (v == nil || v.Type() == fastjson.TypeNull || f.AttributeWins) {
			if a, ok := in.Attributes[f.Attribute]; ok {
				if arena == nil {
					arena = p.arenas.Get()
				}
				v = attributeValue(arena, f, a)
			}
		}
		class, err := p.field(&values[i], f, v)
		if err != nil && errs[class] == nil {
			errs[class] = err
		}
	}
	if p.explode == nil {
		if errs[classTimestamp] == nil {
			errs[classRange] = firstNonNil(errs[classRange], p.checkEventTime(values[p.eventIdx].Int))
		}
		if err := firstError(errs); err != nil {
			return dst, err
		}
		return append(dst, Record{Values: values, EventMs: values[p.eventIdx].Int, Raw: raw, Source: source}), nil
	}
	return p.explodePoints(dst, root, values, errs, raw, source)
}

func firstError(errs [numClasses]error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// explodePoints emits one record per [timestamp_ms, value] point.
func (p *Parser) explodePoints(dst []Record, root *fastjson.Value, base []Value, errs [numClasses]error, raw, source string) ([]Record, error) {
	ex := p.spec.Explode
	pts := root.Get(p.explode...)
	if pts == nil || pts.Type() == fastjson.TypeNull {
		errs[classMissing] = firstNonNil(errs[classMissing], reject(ErrMissingField, "%s is missing", ex.Path))
	} else if pts.Type() != fastjson.TypeArray {
		errs[classInvalid] = firstNonNil(errs[classInvalid], reject(ErrInvalidField, "%s must be an array of [timestamp_ms, value] points", ex.Path))
	}
	if err := firstError(errs); err != nil {
		return dst, err
	}
	arr, _ := pts.Array()
	if len(arr) == 0 {
		return dst, reject(ErrMissingField, "%s has no points", ex.Path)
	}
	ti, vi := p.spec.FieldIndex(ex.TimeField), p.spec.FieldIndex(ex.ValueField)
	start := len(dst)
	for n, pt := range arr {
		pair, err := pt.Array()
		if err != nil || len(pair) != 2 {
			return dst[:start], reject(ErrInvalidField, "%s[%d] must be a [timestamp_ms, value] pair", ex.Path, n)
		}
		values := append([]Value(nil), base...)
		var perr [numClasses]error
		for _, fv := range []struct {
			idx int
			v   *fastjson.Value
		}{{ti, pair[0]}, {vi, pair[1]}} {
			class, err := p.field(&values[fv.idx], &p.spec.Fields[fv.idx], fv.v)
			if err != nil && perr[class] == nil {
				perr[class] = fmt.Errorf("%s[%d]: %w", ex.Path, n, err)
			}
		}
		if perr[classTimestamp] == nil {
			perr[classRange] = firstNonNil(perr[classRange], p.checkEventTime(values[p.eventIdx].Int))
		}
		if err := firstError(perr); err != nil {
			return dst[:start], err
		}
		dst = append(dst, Record{Values: values, EventMs: values[p.eventIdx].Int, Raw: raw, Source: source})
	}
	return dst, nil
}

// Split cuts a Pub/Sub message's data into the payloads of its readings,
// copied (see Readings).
func (p *Parser) Split(data []byte) ([]string, error) { return splitReadings(p, data) }

// unknownKeys reports each top-level key of root that the spec does not
// read to unknown, or rejects the payload, as the spec's unknown_fields
// says.
func (p *Parser) unknownKeys(root *fastjson.Value, unknown func(string)) error {
	mode := p.spec.UnknownFieldsMode()
	if mode == UnknownIgnore || (mode == UnknownCount && unknown == nil) {
		return nil
	}
	obj, _ := root.Object()
	var first string
	obj.Visit(func(k []byte, _ *fastjson.Value) {
		if p.known[string(k)] {
			return
		}
		if mode == UnknownReject {
			if first == "" {
				first = string(k)
			}
			return
		}
		unknown(string(k))
	})
	if first != "" {
		return reject(ErrUnknownField, "%q is not a field of the spec, which says unknown_fields: reject; declare it, or set unknown_fields: count to count such keys instead", first)
	}
	return nil
}

// attributeValue is a message attribute as the JSON value the field's
// type reads: a number for numeric fields (and a numeric timestamp),
// true/false for bool, else a string, which the field's checks then
// accept or reject as they would the payload's own value.
func attributeValue(a *fastjson.Arena, f *FieldSpec, s string) *fastjson.Value {
	switch f.Type {
	case TypeFloat, TypeInt, TypeTimestamp:
		if _, err := strconv.ParseFloat(s, 64); err == nil && s != "" && !strings.ContainsAny(s, "xXnNiI_") {
			return a.NewNumberString(s)
		}
	case TypeBool:
		switch s {
		case "true":
			return a.NewTrue()
		case "false":
			return a.NewFalse()
		}
	}
	return a.NewString(s)
}

// unitHint names the unit in which n is an accepted event time, if one
// is, else says that none is.
func (p *Parser) unitHint(f *FieldSpec, n int64) string {
	unit := f.Unit
	if unit == "" {
		unit = UnitMillis
	}
	for _, u := range unitOrder {
		if alt, ok := EpochToMillis(n, u); ok && u != unit && alt >= p.minMs && alt <= p.maxMs {
			return fmt.Sprintf("if the device sends %s, set `unit: %s` on field %s", unitNames[u], u, f.Name)
		}
	}
	return fmt.Sprintf("no unit (s, ms, us, ns) puts %d among the accepted event times: check the device's clock", n)
}

// utf8BOM is the UTF-8 encoding of U+FEFF.
const utf8BOM = "\ufeff"

// checkEventTime rejects an event time outside the spec's accepted range.
func (p *Parser) checkEventTime(ms int64) error {
	if ms >= p.minMs && ms <= p.maxMs {
		return nil
	}
	at := time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	lo, hi := time.UnixMilli(p.minMs).UTC().Format(time.RFC3339Nano), time.UnixMilli(p.maxMs).UTC().Format(time.RFC3339Nano)
	why := ""
	if ms < 0 && p.minMs >= 0 {
		why = " (Bigtable cell timestamps cannot be negative)"
	}
	return reject(ErrOutOfRange, "%s %s is outside the accepted event times [%s, %s]%s; %s",
		p.spec.EventTime, at, lo, hi, why, p.limit)
}

// duplicateKey returns a key that appears more than once in obj, or "".
// The keys are compared as the parser's own byte slices: no allocation for
// the usual object of a few keys.
func duplicateKey(root *fastjson.Value) string {
	obj, _ := root.Object()
	var (
		seen [16][]byte
		n    int
		more map[string]bool
		dup  string
	)
	obj.Visit(func(k []byte, _ *fastjson.Value) {
		if dup != "" {
			return
		}
		if n < len(seen) {
			for _, s := range seen[:n] {
				if string(s) == string(k) {
					dup = string(k)
					return
				}
			}
			seen[n] = k
			n++
			return
		}
		if more == nil {
			more = make(map[string]bool, 2*len(seen))
			for _, s := range seen {
				more[string(s)] = true
			}
		}
		if more[string(k)] {
			dup = string(k)
		}
		more[string(k)] = true
	})
	return dup
}

func firstNonNil(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// field decodes and validates one field into out, returning the check class
// of any error.
func (p *Parser) field(out *Value, f *FieldSpec, v *fastjson.Value) (int, error) {
	if v == nil || v.Type() == fastjson.TypeNull {
		if f.Required {
			return classMissing, reject(ErrMissingField, "%s is required", f.Name)
		}
		return 0, nil
	}
	switch f.Type {
	case TypeString, TypeBytes:
		b, err := v.StringBytes()
		if err != nil {
			return classInvalid, reject(ErrInvalidField, "%s must be a string, got %s", f.Name, v.Type())
		}
		if len(b) == 0 && f.Required {
			return classMissing, reject(ErrMissingField, "%s is empty", f.Name)
		}
		kind := KindString
		if f.Type == TypeBytes {
			kind = KindBytes
		}
		*out = Value{Kind: kind, Str: string(b)}
		if f.MaxLength > 0 && len(b) > f.MaxLength {
			return classInvalid, reject(ErrInvalidField, "%s is %d bytes; at most %d allowed", f.Name, len(b), f.MaxLength)
		}
		if len(f.Enum) > 0 && !contains(f.Enum, out.Str) {
			return classInvalid, reject(ErrInvalidField, "%s %q is not one of %s", f.Name, out.Str, strings.Join(f.Enum, ", "))
		}
	case TypeFloat:
		if v.Type() != fastjson.TypeNumber {
			return classInvalid, reject(ErrInvalidField, "%s must be a number, got %s", f.Name, v.Type())
		}
		n, err := v.Float64()
		if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
			return classInvalid, reject(ErrInvalidField, "%s %s is not a finite 64-bit number", f.Name, v)
		}
		*out = Value{Kind: KindFloat, Num: n}
		return classRange, checkRange(f, n)
	case TypeInt:
		n, err := v.Int64()
		if v.Type() != fastjson.TypeNumber || err != nil {
			return classInvalid, reject(ErrInvalidField, "%s must be an integer, got %s", f.Name, v)
		}
		*out = Value{Kind: KindInt, Int: n}
		return classRange, checkRange(f, float64(n))
	case TypeBool:
		switch v.Type() {
		case fastjson.TypeTrue:
			*out = Value{Kind: KindBool, Bool: true}
		case fastjson.TypeFalse:
			*out = Value{Kind: KindBool}
		default:
			return classInvalid, reject(ErrInvalidField, "%s must be true or false, got %s", f.Name, v.Type())
		}
	case TypeTimestamp:
		ms, err := p.timestamp(v, f)
		if errors.Is(err, errOutsideYears) && f.Name == p.spec.EventTime {
			if n, ierr := v.Int64(); ierr == nil && n >= 0 {
				return classTimestamp, reject(ErrBadTimestamp, "%s: %v; %s", f.Name, err, p.unitHint(f, n))
			}
		}
		if err != nil {
			return classTimestamp, reject(ErrBadTimestamp, "%s: %v", f.Name, err)
		}
		if err := p.plausible(f, v, ms); err != nil {
			return classTimestamp, err
		}
		*out = Value{Kind: KindTime, Int: ms}
	case TypeTags:
		obj, err := v.Object()
		if err != nil {
			return classInvalid, reject(ErrInvalidField, "%s must be an object of strings, got %s", f.Name, v.Type())
		}
		pairs := make([]Pair, 0, obj.Len())
		var bad error
		obj.Visit(func(k []byte, tv *fastjson.Value) {
			s, err := tv.StringBytes()
			if err != nil && bad == nil {
				bad = reject(ErrInvalidField, "%s.%s must be a string", f.Name, k)
			}
			pairs = append(pairs, Pair{K: string(k), V: string(s)})
		})
		if bad != nil {
			return classInvalid, bad
		}
		sort.Slice(pairs, func(i, j int) bool { return pairs[i].K < pairs[j].K })
		*out = Value{Kind: KindTags, Pairs: pairs}
	}
	return 0, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func checkRange(f *FieldSpec, n float64) error {
	if (f.Min != nil && n < *f.Min) || (f.Max != nil && n > *f.Max) {
		return reject(ErrOutOfRange, "%s %v is outside %s", f.Name, n, rangeText(f))
	}
	return nil
}

func rangeText(f *FieldSpec) string {
	switch {
	case f.Min != nil && f.Max != nil:
		return fmt.Sprintf("[%v, %v]", *f.Min, *f.Max)
	case f.Min != nil:
		return fmt.Sprintf("[%v, ∞)", *f.Min)
	default:
		return fmt.Sprintf("(-∞, %v]", *f.Max)
	}
}

// Bounds of a usable event time: years 1 to 9999, so every time renders in
// the four-digit-year key forms.
var (
	minEventMs = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	maxEventMs = time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC).UnixMilli()
)

// unitNames are the timestamp units a field may declare, and their names
// in messages.
var unitNames = map[string]string{UnitSeconds: "seconds", UnitMillis: "milliseconds", UnitMicros: "microseconds", UnitNanos: "nanoseconds"}

// unitOrder is the order hints try the units in.
var unitOrder = []string{UnitSeconds, UnitMillis, UnitMicros, UnitNanos}

// EpochToMillis converts n epoch units (UnitSeconds, UnitMillis, UnitMicros
// or UnitNanos; "" is milliseconds) to epoch milliseconds, rounding toward
// the past; ok is false when the result would overflow.
func EpochToMillis(n int64, unit string) (ms int64, ok bool) {
	switch unit {
	case UnitSeconds:
		if n > math.MaxInt64/1000 || n < math.MinInt64/1000 {
			return 0, false
		}
		return n * 1000, true
	case UnitMicros:
		return floorDiv(n, 1000), true
	case UnitNanos:
		return floorDiv(n, 1_000_000), true
	}
	return n, true
}

// errOutsideYears marks a number that is no time of years 1 to 9999 in
// its unit.
var errOutsideYears = errors.New("no four-digit year")

// timestampValue reads an RFC 3339 string (any UTC offset, optional
// fraction) or a number of epoch units (unit: "" or ms, s, us, ns): an
// integer, or with seconds a decimal fraction.
func timestampValue(v *fastjson.Value, unit string) (int64, error) {
	if unit == "" {
		unit = UnitMillis
	}
	switch v.Type() {
	case fastjson.TypeString:
		b, _ := v.StringBytes()
		if ms, ok := parseUTCTimestamp(b); ok {
			return ms, nil
		}
		return ParseTimestamp(string(b))
	case fastjson.TypeNumber:
		n, err := v.Int64()
		if err != nil && unit == UnitSeconds {
			if x, ferr := v.Float64(); ferr == nil && !math.IsInf(x, 0) && math.Abs(x) < float64(maxEventMs/1000) {
				return int64(math.Floor(x * 1000)), nil
			}
		}
		if err != nil {
			return 0, fmt.Errorf("%s is not an integer of epoch %s", v, unitNames[unit])
		}
		ms, ok := EpochToMillis(n, unit)
		if !ok || ms < minEventMs || ms > maxEventMs {
			return 0, fmt.Errorf("%d epoch %s is outside years 1 to 9999: %w", n, unitNames[unit], errOutsideYears)
		}
		return ms, nil
	}
	return 0, fmt.Errorf("want an RFC 3339 string or a number of epoch %s, got %s", unitNames[unit], v.Type())
}

// plausible rejects, as bad_timestamp, a non-negative number given as the
// event time that is outside the accepted event times in the field's
// unit: a unit mistake (seconds read as milliseconds) or a clock that was
// never set (0, 86400). The reason says what the number is in the declared
// unit, what sets the limit, and which unit would fit if one does. A
// negative number, before 1970 in every unit, is left to the range check
// (out_of_range), as is an RFC 3339 string.
func (p *Parser) plausible(f *FieldSpec, v *fastjson.Value, ms int64) error {
	if f.Name != p.spec.EventTime || v.Type() != fastjson.TypeNumber || ms < 0 || (ms >= p.minMs && ms <= p.maxMs) {
		return nil
	}
	unit := f.Unit
	if unit == "" {
		unit = UnitMillis
	}
	hint := fmt.Sprintf("no unit (s, ms, us, ns) puts %s there: check the device's clock", v)
	if n, err := v.Int64(); err == nil {
		hint = p.unitHint(f, n)
	}
	return reject(ErrBadTimestamp, "%s: %s is %s as %s, outside the accepted event times [%s, %s] (%s); %s",
		f.Name, v, time.UnixMilli(ms).UTC().Format(time.RFC3339Nano), unitNames[unit],
		time.UnixMilli(p.minMs).UTC().Format(time.RFC3339), time.UnixMilli(p.maxMs).UTC().Format(time.RFC3339), p.limit, hint)
}

// parseUTCTimestamp is a fast path for the common form
// YYYY-MM-DDTHH:MM:SS[.fraction]Z, parsed from the bytes without a string.
// It reports false for anything else (other offsets, odd lengths, invalid
// dates), which then goes through ParseTimestamp; where it succeeds it gives
// exactly ParseTimestamp's result.
func parseUTCTimestamp(b []byte) (int64, bool) {
	n := len(b)
	if n < 20 || n > 30 || (b[n-1] != 'Z' && b[n-1] != 'z') ||
		b[4] != '-' || b[7] != '-' || (b[10] != 'T' && b[10] != 't') || b[13] != ':' || b[16] != ':' {
		return 0, false
	}
	num := func(i, w int) (int, bool) {
		v := 0
		for _, c := range b[i : i+w] {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 2)
	day, ok3 := num(8, 2)
	hour, ok4 := num(11, 2)
	minute, ok5 := num(14, 2)
	sec, ok6 := num(17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || sec > 59 {
		return 0, false
	}
	if day > daysInMonth(year, month) {
		return 0, false
	}
	ms := 0
	if n > 20 {
		// A fraction: '.', one to nine digits, then Z.
		if b[19] != '.' || n-21 < 1 || n-21 > 9 {
			return 0, false
		}
		frac, ok := num(20, n-21)
		if !ok {
			return 0, false
		}
		for i := n - 21; i < 3; i++ {
			frac *= 10
		}
		for i := n - 21; i > 3; i-- {
			frac /= 10
		}
		ms = frac
	}
	return (daysFromCivil(year, month, day)*86400+int64(hour*3600+minute*60+sec))*1000 + int64(ms), true
}

// daysInMonth is the number of days of month (1-12) in year, proleptic
// Gregorian as the time package counts them.
func daysInMonth(year, month int) int {
	if month == 2 {
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	}
	return 30 + (month+month/8)%2
}

// daysFromCivil is the days from 1970-01-01 to year-month-day (year 0 to
// 9999), as time.Date counts them, without time.Date's normalisation:
// Howard Hinnant's days_from_civil
// (https://howardhinnant.github.io/date_algorithms.html), the inverse of
// utcFields. TestUTCTimestampFastPathAgreesWithTimeParse and
// FuzzUTCTimestampFastPath check it through parseUTCTimestamp.
func daysFromCivil(year, month, day int) int64 {
	y := int64(year)
	if month <= 2 {
		y--
	}
	era := y / 400
	if y < 0 {
		era = (y - 399) / 400
	}
	yoe := y - era*400
	mp := int64(month + 9)
	if month > 2 {
		mp = int64(month - 3)
	}
	doy := (153*mp+2)/5 + int64(day) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// ParseTimestamp parses an RFC 3339 timestamp with any UTC offset and an
// optional fraction, returning epoch milliseconds (sub-millisecond digits are
// truncated toward the past). A space may stand for the T between date and
// time, as RFC 3339 (section 5.6) allows and exports write it.
func ParseTimestamp(s string) (int64, error) {
	text := strings.ToUpper(s)
	if len(text) > 10 && text[10] == ' ' {
		text = text[:10] + "T" + text[11:]
	}
	t, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		return 0, fmt.Errorf("%q is not RFC 3339 (e.g. 2026-03-01T10:15:30.250Z or 2026-03-01T12:15:30+02:00)", s)
	}
	return t.UnixMilli(), nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
