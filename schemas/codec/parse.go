package codec

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	// fastjson is chosen by measurement (see BenchmarkDecode in
	// bench_test.go): it scans a line without reflection, lets us tell
	// absent from null from the wrong JSON type, and reuses its arena through
	// a pool, so a typical reading line costs a fraction of encoding/json's time.
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/timestamps"
	"github.com/valyala/fastjson"
)

// Parser turns input lines into validated Records following a Spec. It is
// safe for concurrent use.
type Parser struct {
	spec     *schemas.Spec
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
func NewParser(spec *schemas.Spec) *Parser {
	lo, hi := spec.EventTimeBounds()
	return NewParserLimited(spec, EventTimeLimits{MinMs: lo, MaxMs: hi, Why: "the spec's event_time_range sets them"})
}

// NewParserLimited is NewParser accepting the event times of lim, which
// must lie within the spec's range (Compiled narrows it to BigQuery's
// writable window).
func NewParserLimited(spec *schemas.Spec, lim EventTimeLimits) *Parser {
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
func (p *Parser) Spec() *schemas.Spec { return p.spec }

// check classes, in the order their reasons are reported.
const (
	classMissing = iota
	classInvalid
	classTimestamp
	classRange
	numClasses
)

var classReason = [numClasses]error{schemas.ErrMissingField, schemas.ErrInvalidField, schemas.ErrBadTimestamp,

	// Parse appends the records of one input line to dst. A blank line yields no
	// record and no error. An invalid line yields an error wrapping one of the
	// reason sentinels; when a line has several problems, the reason reported is
	// the first of missing_field, invalid_field, bad_timestamp, out_of_range.
	schemas.ErrOutOfRange}

func (p *Parser) Parse(dst []schemas.Record, line []byte, source string) ([]schemas.Record, error) {
	return p.ParseString(dst, string(line), source)
}

// ParseString is Parse for a line already held as a string; the records
// share it as their Raw payload without a copy.
func (p *Parser) ParseString(dst []schemas.Record, line, source string) ([]schemas.Record, error) {
	return p.ParseInput(dst, line, source, Input{})
}

// ParseInput is ParseString for a payload read with in: a message's
// attributes fill the fields that name them, and keys the spec does not
// read are reported or rejected as the spec's unknown_fields says.
func (p *Parser) ParseInput(dst []schemas.Record, line, source string, in Input) ([]schemas.Record, error) {
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
		return dst, schemas.Reject(schemas.ErrMalformed, "not valid JSON: %v", err)
	}
	if root.Type() != fastjson.TypeObject {
		return dst, schemas.Reject(schemas.ErrMalformed, "a line must be a JSON object, got %s", root.Type())
	}
	if k := duplicateKey(root); k != "" {
		// Parsers disagree on which copy wins (fastjson keeps the first,
		// encoding/json the last): refuse to guess.
		return dst, schemas.Reject(schemas.ErrMalformed, "key %q appears twice in the object", k)
	}
	if err := p.unknownKeys(root, in.Unknown); err != nil {
		return dst, err
	}
	raw := line
	values := make([]schemas.Value, p.spec.NumValues())
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
		return append(dst, schemas.Record{Values: values, EventMs: values[p.eventIdx].Int, Raw: raw, Source: source}), nil
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
func (p *Parser) explodePoints(dst []schemas.Record, root *fastjson.Value, base []schemas.Value, errs [numClasses]error, raw, source string) ([]schemas.Record, error) {
	ex := p.spec.Explode
	pts := root.Get(p.explode...)
	if pts == nil || pts.Type() == fastjson.TypeNull {
		errs[classMissing] = firstNonNil(errs[classMissing], schemas.Reject(schemas.ErrMissingField, "%s is missing", ex.Path))
	} else if pts.Type() != fastjson.TypeArray {
		errs[classInvalid] = firstNonNil(errs[classInvalid], schemas.Reject(schemas.ErrInvalidField, "%s must be an array of [timestamp_ms, value] points", ex.Path))
	}
	if err := firstError(errs); err != nil {
		return dst, err
	}
	arr, _ := pts.Array()
	if len(arr) == 0 {
		return dst, schemas.Reject(schemas.ErrMissingField, "%s has no points", ex.Path)
	}
	ti, vi := p.spec.FieldIndex(ex.TimeField), p.spec.FieldIndex(ex.ValueField)
	start := len(dst)
	for n, pt := range arr {
		pair, err := pt.Array()
		if err != nil || len(pair) != 2 {
			return dst[:start], schemas.Reject(schemas.ErrInvalidField, "%s[%d] must be a [timestamp_ms, value] pair", ex.Path, n)
		}
		values := append([]schemas.Value(nil), base...)
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
		dst = append(dst, schemas.Record{Values: values, EventMs: values[p.eventIdx].Int, Raw: raw, Source: source})
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
	if mode == schemas.UnknownIgnore || (mode == schemas.UnknownCount && unknown == nil) {
		return nil
	}
	obj, _ := root.Object()
	var first string
	obj.Visit(func(k []byte, _ *fastjson.Value) {
		if p.known[string(k)] {
			return
		}
		if mode == schemas.UnknownReject {
			if first == "" {
				first = string(k)
			}
			return
		}
		unknown(string(k))
	})
	if first != "" {
		return schemas.Reject(schemas.ErrUnknownField, "%q is not a field of the spec, which says unknown_fields: reject; declare it, or set unknown_fields: count to count such keys instead", first)
	}
	return nil
}

// attributeValue is a message attribute as the JSON value the field's
// type reads: a number for numeric fields (and a numeric timestamp),
// true/false for bool, else a string, which the field's checks then
// accept or reject as they would the payload's own value.
func attributeValue(a *fastjson.Arena, f *schemas.FieldSpec, s string) *fastjson.Value {
	switch f.Type {
	case schemas.TypeFloat, schemas.TypeInt, schemas.TypeTimestamp:
		if _, err := strconv.ParseFloat(s, 64); err == nil && s != "" && !strings.ContainsAny(s, "xXnNiI_") {
			return a.NewNumberString(s)
		}
	case schemas.TypeBool:
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
func (p *Parser) unitHint(f *schemas.FieldSpec, n int64) string {
	unit := f.Unit
	if unit == "" {
		unit = timestamps.UnitMillis
	}
	for _, u := range timestamps.UnitOrder {
		if alt, ok := timestamps.EpochToMillis(n, u); ok && u != unit && alt >= p.minMs && alt <= p.maxMs {
			return fmt.Sprintf("if the device sends %s, set `unit: %s` on field %s", timestamps.UnitNames[u], u, f.Name)
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
	return schemas.Reject(schemas.ErrOutOfRange, "%s %s is outside the accepted event times [%s, %s]%s; %s",
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
func (p *Parser) field(out *schemas.Value, f *schemas.FieldSpec, v *fastjson.Value) (int, error) {
	if v == nil || v.Type() == fastjson.TypeNull {
		if f.Required {
			return classMissing, schemas.Reject(schemas.ErrMissingField, "%s is required", f.Name)
		}
		return 0, nil
	}
	switch f.Type {
	case schemas.TypeString, schemas.TypeBytes:
		b, err := v.StringBytes()
		if err != nil {
			return classInvalid, schemas.Reject(schemas.ErrInvalidField, "%s must be a string, got %s", f.Name, v.Type())
		}
		if len(b) == 0 && f.Required {
			return classMissing, schemas.Reject(schemas.ErrMissingField, "%s is empty", f.Name)
		}
		kind := schemas.KindString
		if f.Type == schemas.TypeBytes {
			kind = schemas.KindBytes
		}
		*out = schemas.Value{Kind: kind, Str: string(b)}
		if f.MaxLength > 0 && len(b) > f.MaxLength {
			return classInvalid, schemas.Reject(schemas.ErrInvalidField, "%s is %d bytes; at most %d allowed", f.Name, len(b), f.MaxLength)
		}
		if len(f.Enum) > 0 && !slices.Contains(f.Enum, out.Str) {
			return classInvalid, schemas.Reject(schemas.ErrInvalidField, "%s %q is not one of %s", f.Name, out.Str, strings.Join(f.Enum, ", "))
		}
	case schemas.TypeFloat:
		if v.Type() != fastjson.TypeNumber {
			return classInvalid, schemas.Reject(schemas.ErrInvalidField, "%s must be a number, got %s", f.Name, v.Type())
		}
		n, err := v.Float64()
		if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
			return classInvalid, schemas.Reject(schemas.ErrInvalidField, "%s %s is not a finite 64-bit number", f.Name, v)
		}
		*out = schemas.Value{Kind: schemas.KindFloat, Num: n}
		return classRange, checkRange(f, n)
	case schemas.TypeInt:
		n, err := v.Int64()
		if v.Type() != fastjson.TypeNumber || err != nil {
			return classInvalid, schemas.Reject(schemas.ErrInvalidField, "%s must be an integer, got %s", f.Name, v)
		}
		*out = schemas.Value{Kind: schemas.KindInt, Int: n}
		return classRange, checkRange(f, float64(n))
	case schemas.TypeBool:
		switch v.Type() {
		case fastjson.TypeTrue:
			*out = schemas.Value{Kind: schemas.KindBool, Bool: true}
		case fastjson.TypeFalse:
			*out = schemas.Value{Kind: schemas.KindBool}
		default:
			return classInvalid, schemas.Reject(schemas.ErrInvalidField, "%s must be true or false, got %s", f.Name, v.Type())
		}
	case schemas.TypeTimestamp:
		ms, err := p.timestamp(v, f)
		if errors.Is(err, timestamps.ErrOutsideYears) && f.Name == p.spec.EventTime {
			if n, ierr := v.Int64(); ierr == nil && n >= 0 {
				return classTimestamp, schemas.Reject(schemas.ErrBadTimestamp, "%s: %v; %s", f.Name, err, p.unitHint(f, n))
			}
		}
		if err != nil {
			return classTimestamp, schemas.Reject(schemas.ErrBadTimestamp, "%s: %v", f.Name, err)
		}
		if err := p.plausible(f, v, ms); err != nil {
			return classTimestamp, err
		}
		*out = schemas.Value{Kind: schemas.KindTime, Int: ms}
	case schemas.TypeTags:
		obj, err := v.Object()
		if err != nil {
			return classInvalid, schemas.Reject(schemas.ErrInvalidField, "%s must be an object of strings, got %s", f.Name, v.Type())
		}
		pairs := make([]schemas.Pair, 0, obj.Len())
		var bad error
		obj.Visit(func(k []byte, tv *fastjson.Value) {
			s, err := tv.StringBytes()
			if err != nil && bad == nil {
				bad = schemas.Reject(schemas.ErrInvalidField, "%s.%s must be a string", f.Name, k)
			}
			pairs = append(pairs, schemas.Pair{K: string(k), V: string(s)})
		})
		if bad != nil {
			return classInvalid, bad
		}
		sort.Slice(pairs, func(i, j int) bool { return pairs[i].K < pairs[j].K })
		*out = schemas.Value{Kind: schemas.KindTags, Pairs: pairs}
	}
	return 0, nil
}

func checkRange(f *schemas.FieldSpec, n float64) error {
	if (f.Min != nil && n < *f.Min) || (f.Max != nil && n > *f.Max) {
		return schemas.Reject(schemas.ErrOutOfRange, "%s %v is outside %s", f.Name, n, rangeText(f))
	}
	return nil
}

func rangeText(f *schemas.FieldSpec) string {
	switch {
	case f.Min != nil && f.Max != nil:
		return fmt.Sprintf("[%v, %v]", *f.Min, *f.Max)
	case f.Min != nil:
		return fmt.Sprintf("[%v, ∞)", *f.Min)
	default:
		return fmt.Sprintf("(-∞, %v]", *f.Max)
	}
}

// timestampValue reads an RFC 3339 string (any UTC offset, optional
// fraction) or a number of epoch units (unit: "" or ms, s, us, ns): an
// integer, or with seconds a decimal fraction.
func timestampValue(v *fastjson.Value, unit string) (int64, error) {
	if unit == "" {
		unit = timestamps.UnitMillis
	}
	switch v.Type() {
	case fastjson.TypeString:
		b, _ := v.StringBytes()
		if ms, ok := timestamps.ParseUTCTimestamp(b); ok {
			return ms, nil
		}
		return timestamps.ParseTimestamp(string(b))
	case fastjson.TypeNumber:
		n, err := v.Int64()
		if err != nil && unit == timestamps.UnitSeconds {
			if x, ferr := v.Float64(); ferr == nil && !math.IsInf(x, 0) && math.Abs(x) < float64(timestamps.MaxEventMs/1000) {
				return int64(math.Floor(x * 1000)), nil
			}
		}
		if err != nil {
			return 0, fmt.Errorf("%s is not an integer of epoch %s", v, timestamps.UnitNames[unit])
		}
		ms, ok := timestamps.EpochToMillis(n, unit)
		if !ok || ms < timestamps.MinEventMs || ms > timestamps.MaxEventMs {
			return 0, fmt.Errorf("%d epoch %s is outside years 1 to 9999: %w", n, timestamps.UnitNames[unit], timestamps.ErrOutsideYears)
		}
		return ms, nil
	}
	return 0, fmt.Errorf("want an RFC 3339 string or a number of epoch %s, got %s", timestamps.UnitNames[unit], v.Type())
}

// plausible rejects, as bad_timestamp, a non-negative number given as the
// event time that is outside the accepted event times in the field's
// unit: a unit mistake (seconds read as milliseconds) or a clock that was
// never set (0, 86400). The reason says what the number is in the declared
// unit, what sets the limit, and which unit would fit if one does. A
// negative number, before 1970 in every unit, is left to the range check
// (out_of_range), as is an RFC 3339 string.
func (p *Parser) plausible(f *schemas.FieldSpec, v *fastjson.Value, ms int64) error {
	if f.Name != p.spec.EventTime || v.Type() != fastjson.TypeNumber || ms < 0 || (ms >= p.minMs && ms <= p.maxMs) {
		return nil
	}
	unit := f.Unit
	if unit == "" {
		unit = timestamps.UnitMillis
	}
	hint := fmt.Sprintf("no unit (s, ms, us, ns) puts %s there: check the device's clock", v)
	if n, err := v.Int64(); err == nil {
		hint = p.unitHint(f, n)
	}
	return schemas.Reject(schemas.ErrBadTimestamp, "%s: %s is %s as %s, outside the accepted event times [%s, %s] (%s); %s",
		f.Name, v, time.UnixMilli(ms).UTC().Format(time.RFC3339Nano), timestamps.UnitNames[unit], time.UnixMilli(p.minMs).UTC().Format(time.RFC3339), time.UnixMilli(p.maxMs).UTC().Format(time.RFC3339), p.limit, hint)
}
