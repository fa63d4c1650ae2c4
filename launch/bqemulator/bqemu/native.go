package bqemu

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"time"

	bq "google.golang.org/api/bigquery/v2"
)

// NativeValue converts a stored value v of column f to plain Go, for a
// QueryEngine: nil for NULL; string (STRING, JSON, GEOGRAPHY, INTERVAL,
// RANGE); []byte (BYTES); int64 (INTEGER); float64 (FLOAT); bool
// (BOOLEAN); time.Time in UTC (TIMESTAMP, DATE at midnight, DATETIME as if
// UTC, TIME on 0000-01-01); *big.Rat (NUMERIC, BIGNUMERIC); []any of the
// subfields' values, in schema order (RECORD); []any of elements
// (REPEATED).
func NativeValue(f *bq.TableFieldSchema, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	if f.Mode == "REPEATED" {
		arr, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("column %s: stored %T for a REPEATED value", f.Name, v)
		}
		elem := *f
		elem.Mode = "NULLABLE"
		out := make([]any, len(arr))
		for i, e := range arr {
			x, err := NativeValue(&elem, e)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	}
	switch f.Type {
	case "RECORD":
		rec, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("column %s: stored %T for a RECORD", f.Name, v)
		}
		out := make([]any, len(f.Fields))
		for i, sub := range f.Fields {
			if i < len(rec) {
				x, err := NativeValue(sub, rec[i])
				if err != nil {
					return nil, err
				}
				out[i] = x
			}
		}
		return out, nil
	case "TIMESTAMP", "DATE":
		if _, ok := v.(int64); !ok {
			return nil, fmt.Errorf("column %s: stored %T for a %s", f.Name, v, f.Type)
		}
		return valueTime(f.Type, v)
	case "DATETIME", "TIME", "NUMERIC", "BIGNUMERIC":
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("column %s: stored %T for a %s", f.Name, v, f.Type)
		}
		switch f.Type {
		case "DATETIME":
			return valueTime(f.Type, s)
		case "TIME":
			return time.Parse("15:04:05.999999", s)
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			return nil, fmt.Errorf("column %s: stored %q is not a decimal", f.Name, s)
		}
		return r, nil
	}
	return v, nil
}

// StoredValue converts a plain Go value (as NativeValue returns, or the
// wider kinds a query engine may produce: any integer, float32, *big.Int,
// a decimal's String) to the stored form of a value of field f.
func StoredValue(f *bq.TableFieldSchema, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	if f.Mode == "REPEATED" {
		arr, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("column %s: %T for a REPEATED value", f.Name, v)
		}
		elem := *f
		elem.Mode = "NULLABLE"
		out := make([]any, 0, len(arr))
		for _, e := range arr {
			x, err := StoredValue(&elem, e)
			if err != nil {
				return nil, err
			}
			if x == nil {
				return nil, fmt.Errorf("column %s: an array cannot hold NULL", f.Name)
			}
			out = append(out, x)
		}
		return out, nil
	}
	switch f.Type {
	case "RECORD":
		var rec []any
		switch x := v.(type) {
		case []any:
			rec = x
		case map[string]any:
			rec = make([]any, len(f.Fields))
			for i, sub := range f.Fields {
				rec[i] = x[sub.Name]
			}
		default:
			return nil, fmt.Errorf("column %s: %T for a RECORD", f.Name, v)
		}
		out := make([]any, len(f.Fields))
		for i, sub := range f.Fields {
			if i < len(rec) {
				x, err := StoredValue(sub, rec[i])
				if err != nil {
					return nil, err
				}
				out[i] = x
			}
		}
		return out, nil
	case "STRING", "JSON", "GEOGRAPHY", "INTERVAL", "RANGE":
		switch x := v.(type) {
		case string:
			return x, nil
		case []byte:
			return string(x), nil
		case fmt.Stringer:
			return x.String(), nil
		}
		return fmt.Sprint(v), nil
	case "BYTES":
		switch x := v.(type) {
		case []byte:
			return x, nil
		case string:
			return []byte(x), nil
		}
	case "INTEGER":
		switch x := v.(type) {
		case int64:
			return x, nil
		case int:
			return int64(x), nil
		case int32:
			return int64(x), nil
		case int16:
			return int64(x), nil
		case int8:
			return int64(x), nil
		case uint8:
			return int64(x), nil
		case uint16:
			return int64(x), nil
		case uint32:
			return int64(x), nil
		case uint64:
			if x <= math.MaxInt64 {
				return int64(x), nil
			}
		case *big.Int:
			if x.IsInt64() {
				return x.Int64(), nil
			}
			return nil, fmt.Errorf("column %s: %s overflows INT64", f.Name, x)
		}
	case "FLOAT":
		switch x := v.(type) {
		case float64:
			return x, nil
		case float32:
			return float64(x), nil
		case int64:
			return float64(x), nil
		case int32:
			return float64(x), nil
		}
	case "BOOLEAN":
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case "TIMESTAMP":
		if t, ok := v.(time.Time); ok {
			return t.UnixMicro(), nil
		}
	case "DATE":
		if t, ok := v.(time.Time); ok {
			y, m, d := t.Date()
			return int64(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Sub(epoch) / (24 * time.Hour)), nil
		}
	case "DATETIME":
		if t, ok := v.(time.Time); ok {
			return formatDateTime(t), nil
		}
	case "TIME":
		if t, ok := v.(time.Time); ok {
			return parseTimeOfDay(t.Format("15:04:05.999999"))
		}
	case "NUMERIC", "BIGNUMERIC":
		switch x := v.(type) {
		case *big.Rat:
			return formatDecimal(x, f.Type), nil
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("column %s: %v is not a %s", f.Name, x, f.Type)
			}
			return formatDecimal(new(big.Rat).SetFloat64(x), f.Type), nil
		case int64:
			return strconv.FormatInt(x, 10), nil
		case *big.Int:
			return x.String(), nil
		case fmt.Stringer:
			if r, ok := new(big.Rat).SetString(x.String()); ok {
				return formatDecimal(r, f.Type), nil
			}
		case string:
			if r, ok := new(big.Rat).SetString(x); ok {
				return formatDecimal(r, f.Type), nil
			}
		}
	default:
		return v, nil
	}
	return nil, fmt.Errorf("column %s (%s): cannot hold a %T", f.Name, f.Type, v)
}
