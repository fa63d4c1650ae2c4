package bqemu

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"time"

	bq "google.golang.org/api/bigquery/v2"
)

// Internal value representation, per column type:
//
//	STRING, JSON, GEOGRAPHY, INTERVAL, RANGE   string
//	NUMERIC, BIGNUMERIC                        string (canonical decimal)
//	DATETIME, TIME                             string (canonical)
//	BYTES                                      []byte
//	INTEGER                                    int64
//	FLOAT                                      float64
//	BOOLEAN                                    bool
//	TIMESTAMP                                  int64 microseconds since epoch
//	DATE                                       int64 days since epoch
//	RECORD                                     []any aligned with subfields
//	REPEATED mode                              []any of element values
//	NULL                                       nil

// fieldError is a per-row error located at a field.
type fieldError struct {
	location string // dotted field path, may be empty
	message  string
}

func (e *fieldError) Error() string { return e.message }

var epoch = time.Unix(0, 0).UTC()

// convertJSONRow converts one insertAll row (decoded with UseNumber) to the
// internal representation, validating it against fields.
func convertJSONRow(fields []*bq.TableFieldSchema, obj map[string]any, ignoreUnknown bool, path string) ([]any, *fieldError) {
	idx := make(map[string]int, len(fields))
	for i, f := range fields {
		idx[strings.ToLower(f.Name)] = i
	}
	// Report problems deterministically: unknown fields first (by name),
	// then columns in schema order.
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	byCol := make([]any, len(fields))
	for _, k := range keys {
		i, ok := idx[strings.ToLower(k)]
		if !ok {
			if ignoreUnknown {
				continue
			}
			loc := joinPath(path, k)
			return nil, &fieldError{location: loc, message: fmt.Sprintf("no such field: %s.", loc)}
		}
		byCol[i] = obj[k]
	}
	out := make([]any, len(fields))
	for i, f := range fields {
		loc := joinPath(path, f.Name)
		val, ferr := convertJSONField(f, byCol[i], ignoreUnknown, loc)
		if ferr != nil {
			return nil, ferr
		}
		if f.Mode == "REQUIRED" && val == nil {
			return nil, &fieldError{location: loc, message: fmt.Sprintf("Missing required field: %s.", loc)}
		}
		out[i] = val
	}
	return out, nil
}

func convertJSONField(f *bq.TableFieldSchema, v any, ignoreUnknown bool, loc string) (any, *fieldError) {
	if f.Mode == "REPEATED" {
		if v == nil {
			return nil, nil
		}
		arr, ok := v.([]any)
		if !ok {
			return nil, &fieldError{location: loc, message: fmt.Sprintf("Array specified for non-repeated field: %s.", loc)}
		}
		elems := make([]any, 0, len(arr))
		for _, e := range arr {
			if e == nil {
				return nil, &fieldError{location: loc, message: fmt.Sprintf("Array contains a null element for field: %s.", loc)}
			}
			ev, ferr := convertJSONValue(f, e, ignoreUnknown, loc)
			if ferr != nil {
				return nil, ferr
			}
			elems = append(elems, ev)
		}
		return elems, nil
	}
	if v == nil {
		return nil, nil
	}
	if _, ok := v.([]any); ok {
		return nil, &fieldError{location: loc, message: fmt.Sprintf("Array specified for non-repeated field: %s.", loc)}
	}
	return convertJSONValue(f, v, ignoreUnknown, loc)
}

func convertJSONValue(f *bq.TableFieldSchema, v any, ignoreUnknown bool, loc string) (any, *fieldError) {
	if f.Type == "RECORD" {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, &fieldError{location: loc, message: fmt.Sprintf("This field: %s is not a record.", loc)}
		}
		return convertJSONRow(f.Fields, m, ignoreUnknown, loc)
	}
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case json.Number:
		s = x.String()
	case bool:
		if f.Type != "BOOLEAN" && f.Type != "STRING" && f.Type != "JSON" {
			return nil, badValue(f, loc, strconv.FormatBool(x))
		}
		s = strconv.FormatBool(x)
	case map[string]any, []any:
		if f.Type == "JSON" {
			b, err := json.Marshal(x)
			if err != nil {
				return nil, badValue(f, loc, fmt.Sprint(x))
			}
			return string(b), nil
		}
		return nil, &fieldError{location: loc, message: fmt.Sprintf("This field: %s is not a record.", loc)}
	default:
		return nil, badValue(f, loc, fmt.Sprint(x))
	}
	_, isNumber := v.(json.Number)
	val, err := parseScalar(f.Type, s, isNumber)
	if err != nil {
		return nil, badValue(f, loc, s)
	}
	return val, nil
}

func badValue(f *bq.TableFieldSchema, loc, s string) *fieldError {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return &fieldError{location: loc, message: fmt.Sprintf("Cannot convert value to %s (bad value): %s for field %s.", strings.ToLower(typeWord(f.Type)), s, loc)}
}

func typeWord(t string) string {
	switch t {
	case "INTEGER":
		return "integer"
	case "FLOAT":
		return "floating point"
	case "BOOLEAN":
		return "boolean"
	}
	return t
}

// parseScalar parses the textual form of a scalar value of type typ.
// numeric reports whether the value came from a JSON number.
func parseScalar(typ, s string, numeric bool) (any, error) {
	switch typ {
	case "STRING", "GEOGRAPHY", "INTERVAL", "RANGE":
		return s, nil
	case "JSON":
		if !json.Valid([]byte(s)) {
			return nil, fmt.Errorf("invalid JSON")
		}
		return s, nil
	case "BYTES":
		if numeric {
			return nil, fmt.Errorf("number for BYTES")
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			b, err = base64.URLEncoding.DecodeString(s)
		}
		if err != nil {
			return nil, err
		}
		return b, nil
	case "INTEGER":
		if i, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
			return i, nil
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || f != math.Trunc(f) || math.Abs(f) > 9.2e18 {
			return nil, fmt.Errorf("not an integer")
		}
		return int64(f), nil
	case "FLOAT":
		return strconv.ParseFloat(strings.TrimSpace(s), 64)
	case "NUMERIC", "BIGNUMERIC":
		r, ok := new(big.Rat).SetString(strings.TrimSpace(s))
		if !ok {
			return nil, fmt.Errorf("not a number")
		}
		return formatDecimal(r, typ), nil
	case "BOOLEAN":
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "true", "1":
			return true, nil
		case "false", "0":
			return false, nil
		}
		return nil, fmt.Errorf("not a boolean")
	case "TIMESTAMP":
		return parseTimestamp(s)
	case "DATE":
		d, err := time.Parse("2006-01-02", strings.TrimSpace(s))
		if err != nil {
			return nil, err
		}
		return int64(d.Sub(epoch) / (24 * time.Hour)), nil
	case "DATETIME":
		return parseDateTime(s)
	case "TIME":
		return parseTimeOfDay(s)
	}
	return nil, fmt.Errorf("unsupported type %s", typ)
}

// formatDecimal renders r with at most 9 (NUMERIC) or 38 (BIGNUMERIC)
// fractional digits and no trailing zeros.
func formatDecimal(r *big.Rat, typ string) string {
	prec := 9
	if typ == "BIGNUMERIC" {
		prec = 38
	}
	s := r.FloatString(prec)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

var timestampLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999 Z07:00",
	"2006-01-02 15:04:05.999999999-07",
	"2006-01-02T15:04:05.999999999-07",
	"2006-01-02 15:04:05.999999999 MST",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04",
	"2006-01-02T15:04",
	"2006-01-02",
}

// parseTimestamp parses a TIMESTAMP in any of the forms BigQuery accepts in
// JSON: seconds since the epoch (possibly fractional) or a date-time string
// with optional zone, returning microseconds since the epoch.
func parseTimestamp(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, fmt.Errorf("invalid timestamp")
		}
		return int64(math.Round(f * 1e6)), nil
	}
	s2 := strings.TrimSuffix(s, " UTC")
	for _, l := range timestampLayouts {
		if t, err := time.Parse(l, s2); err == nil {
			return t.UnixMicro(), nil
		}
	}
	return 0, fmt.Errorf("invalid timestamp %q", s)
}

// parseDateTime canonicalizes a DATETIME string to
// YYYY-MM-DDTHH:MM:SS[.ffffff].
func parseDateTime(s string) (string, error) {
	s = strings.TrimSpace(s)
	for _, l := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.Parse(l, s); err == nil {
			return formatDateTime(t), nil
		}
	}
	return "", fmt.Errorf("invalid datetime %q", s)
}

func formatDateTime(t time.Time) string {
	out := t.Format("2006-01-02T15:04:05")
	if us := t.Nanosecond() / 1000; us != 0 {
		out += strings.TrimRight(fmt.Sprintf(".%06d", us), "0")
	}
	return out
}

// parseTimeOfDay canonicalizes a TIME string to HH:MM:SS[.ffffff].
func parseTimeOfDay(s string) (string, error) {
	s = strings.TrimSpace(s)
	for _, l := range []string{"15:04:05.999999999", "15:04"} {
		if t, err := time.Parse(l, s); err == nil {
			out := t.Format("15:04:05")
			if us := t.Nanosecond() / 1000; us != 0 {
				out += strings.TrimRight(fmt.Sprintf(".%06d", us), "0")
			}
			return out, nil
		}
	}
	return "", fmt.Errorf("invalid time %q", s)
}

// valueTime returns the instant of a partitioning column value.
func valueTime(typ string, v any) (time.Time, error) {
	switch typ {
	case "TIMESTAMP":
		return time.UnixMicro(v.(int64)).UTC(), nil
	case "DATE":
		return epoch.AddDate(0, 0, int(v.(int64))), nil
	case "DATETIME":
		return time.Parse("2006-01-02T15:04:05.999999", v.(string))
	}
	return time.Time{}, fmt.Errorf("type %s cannot be used for partitioning", typ)
}

// formatScalarForMessage renders a value for an error message.
func formatScalarForMessage(typ string, v any) string {
	switch typ {
	case "TIMESTAMP":
		return time.UnixMicro(v.(int64)).UTC().Format("2006-01-02T15:04:05.999999Z")
	case "DATE":
		return epoch.AddDate(0, 0, int(v.(int64))).Format("2006-01-02")
	}
	return fmt.Sprint(v)
}

// Output in tabledata.list shape.

// formatRow renders a stored row in BigQuery's {"f":[{"v":...}]} shape.
func formatRow(fields []*bq.TableFieldSchema, row []any, int64TS bool) *bq.TableRow {
	cells := make([]*bq.TableCell, len(fields))
	for i, f := range fields {
		var v any
		if i < len(row) {
			v = row[i]
		}
		cells[i] = &bq.TableCell{V: formatField(f, v, int64TS)}
	}
	return &bq.TableRow{F: cells}
}

func formatField(f *bq.TableFieldSchema, v any, int64TS bool) any {
	if f.Mode == "REPEATED" {
		arr, _ := v.([]any)
		out := make([]any, len(arr))
		for i, e := range arr {
			out[i] = map[string]any{"v": formatValue(f, e, int64TS)}
		}
		return out
	}
	if v == nil {
		return nil
	}
	return formatValue(f, v, int64TS)
}

func formatValue(f *bq.TableFieldSchema, v any, int64TS bool) any {
	if v == nil {
		return nil
	}
	switch f.Type {
	case "RECORD":
		return formatRow(f.Fields, v.([]any), int64TS)
	case "BYTES":
		return base64.StdEncoding.EncodeToString(v.([]byte))
	case "INTEGER":
		return strconv.FormatInt(v.(int64), 10)
	case "FLOAT":
		x := v.(float64)
		switch {
		case math.IsNaN(x):
			return "NaN"
		case math.IsInf(x, 1):
			return "Infinity"
		case math.IsInf(x, -1):
			return "-Infinity"
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case "BOOLEAN":
		return strconv.FormatBool(v.(bool))
	case "TIMESTAMP":
		us := v.(int64)
		if int64TS {
			return strconv.FormatInt(us, 10)
		}
		return javaDouble(float64(us) / 1e6)
	case "DATE":
		return epoch.AddDate(0, 0, int(v.(int64))).Format("2006-01-02")
	default:
		return v.(string)
	}
}

// javaDouble formats f in scientific notation the way BigQuery renders
// TIMESTAMP values as float seconds, e.g. "1.7000000001234E9".
func javaDouble(f float64) string {
	s := strconv.FormatFloat(f, 'E', -1, 64)
	mant, exp, _ := strings.Cut(s, "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(e)
}
