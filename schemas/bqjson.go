package schemas

import (
	"fmt"
	"math"
	"time"
)

// BQJSONValue converts v to the value tabledata.insertAll takes for column
// c (the BigQuery client encodes it as JSON), or an error wrapping
// ErrBQValue when c cannot hold it.
func BQJSONValue(c BQColumnSpec, v Value) (any, error) {
	switch c.Type {
	case "STRING":
		if v.Kind != KindTags {
			return string(AppendText(nil, v)), nil
		}
	case "BYTES":
		if v.Kind == KindString || v.Kind == KindBytes {
			return []byte(v.Str), nil // encoding/json sends base64, as BYTES wants
		}
	case "FLOAT64":
		if v.Kind == KindFloat || v.Kind == KindInt {
			x := v.Float()
			switch {
			case math.IsNaN(x):
				return "NaN", nil
			case math.IsInf(x, 1):
				return "Infinity", nil
			case math.IsInf(x, -1):
				return "-Infinity", nil
			}
			return x, nil
		}
	case "INT64":
		switch v.Kind {
		case KindInt, KindTime:
			return v.Int, nil
		case KindFloat:
			if v.Num == math.Trunc(v.Num) && math.Abs(v.Num) < 1<<63 {
				return int64(v.Num), nil
			}
		}
	case "BOOL":
		if v.Kind == KindBool {
			return v.Bool, nil
		}
	case "TIMESTAMP":
		if v.Kind == KindTime {
			return time.UnixMilli(v.Int).UTC(), nil
		}
	}
	return nil, fmt.Errorf("%w: column %s (%s) cannot hold %q", ErrBQValue, c.Name, c.Type, AppendText(nil, v))
}
