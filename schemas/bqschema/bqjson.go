package bqschema

import (
	"fmt"
	"github.com/sensorpipe/sensorpipe/schemas"
	"math"
	"time"
)

// BQJSONValue converts v to the value tabledata.insertAll takes for column
// c (the BigQuery client encodes it as JSON), or an error wrapping
// ErrBQValue when c cannot hold it.
func BQJSONValue(c schemas.BQColumnSpec, v schemas.Value) (any, error) {
	switch c.Type {
	case "STRING":
		if v.Kind != schemas.KindTags {
			return string(schemas.AppendText(nil, v)), nil
		}
	case "BYTES":
		if v.Kind == schemas.KindString || v.Kind == schemas.KindBytes {
			return []byte(v.Str), nil // encoding/json sends base64, as BYTES wants
		}
	case "FLOAT64":
		if v.Kind == schemas.KindFloat || v.Kind == schemas.KindInt {
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
		case schemas.KindInt, schemas.KindTime:
			return v.Int, nil
		case schemas.KindFloat:
			if v.Num == math.Trunc(v.Num) && math.Abs(v.Num) < 1<<63 {
				return int64(v.Num), nil
			}
		}
	case "BOOL":
		if v.Kind == schemas.KindBool {
			return v.Bool, nil
		}
	case "TIMESTAMP":
		if v.Kind == schemas.KindTime {
			return time.UnixMilli(v.Int).UTC(), nil
		}
	}
	return nil, fmt.Errorf("%w: column %s (%s) cannot hold %q", ErrBQValue, c.Name, c.Type, schemas.AppendText(nil, v))
}
