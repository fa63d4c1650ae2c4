package bqschema

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
)

// ErrBQRead marks a BigQuery row that cannot be read back into a reading:
// a value its column's field cannot take, or no event time.
var ErrBQRead = errors.New("bigquery row cannot be read back")

// ReadPlan reads a spec's BigQuery table back into readings: each column
// maps back to its field through the spec's bigquery.columns. The columns
// of $reading_id and $ingested_at are not fields and are not read; an
// imputed flag's column is read so that the values it marks as imputed are
// dropped (the batch that writes them imputes again).
type ReadPlan struct {
	spec    *schemas.Spec
	columns []string // the columns read, in the spec's order
	targets []int    // per column: its field's Values index, or -1 for $event_time
	event   string   // the $event_time column
	eventIx int      // the event-time field's Values index
}

// NewReadPlan plans the read of spec's BigQuery table. A spec with no
// bigquery section, or whose table has no $event_time column and no
// column of its event-time field, cannot be read back.
func NewReadPlan(spec *schemas.Spec) (*ReadPlan, error) {
	if spec.BigQuery == nil {
		return nil, fmt.Errorf("spec %s has no bigquery section: its readings have no BigQuery table to read", spec.Name)
	}
	p := &ReadPlan{spec: spec, eventIx: spec.FieldIndex(spec.EventTime)}
	for _, c := range spec.BigQuery.Columns {
		switch c.Value {
		case schemas.ValueReadingID, schemas.ValueIngestedAt:
			continue
		case schemas.ValueEventTime:
			if p.event == "" {
				p.event = c.Name
			}
			p.columns = append(p.columns, c.Name)
			p.targets = append(p.targets, -1)
			continue
		}
		idx := spec.FieldIndex(c.Value)
		if idx < 0 {
			continue
		}
		if idx == p.eventIx && p.event == "" && c.Type == "TIMESTAMP" {
			p.event = c.Name
		}
		p.columns = append(p.columns, c.Name)
		p.targets = append(p.targets, idx)
	}
	// An imputed field read without its flag would come back as observed:
	// its imputed values could not be told from the readings' own.
	for _, im := range spec.Impute {
		field, flag := spec.FieldIndex(im.Field), spec.FieldIndex(im.Flag)
		if contains(p.targets, field) && !contains(p.targets, flag) {
			return nil, fmt.Errorf("spec %s imputes %s, which bigquery.columns holds, but no column holds its flag %s: its imputed values could not be told from observed ones; add a column with value: %s", spec.Name, im.Field, im.Flag, im.Flag)
		}
	}
	if p.event == "" || p.eventIx < 0 {
		return nil, fmt.Errorf("spec %s: bigquery.columns has no TIMESTAMP column of the event time ($event_time or %s): its rows cannot be read back as readings", spec.Name, spec.EventTime)
	}
	return p, nil
}

// Columns are the columns the plan reads: a read session's selected
// fields, in the order Record takes their values.
func (p *ReadPlan) Columns() []string { return p.columns }

// EventTimeColumn is the column of the readings' event time, on which
// RowRestriction bounds a read.
func (p *ReadPlan) EventTimeColumn() string { return p.event }

// RowRestriction is the Storage Read row restriction that keeps the rows
// whose event time is in [fromMs, toMs): "" when both bounds are 0
// (unbounded). The partitioning column makes BigQuery read only the
// partitions it names.
func (p *ReadPlan) RowRestriction(fromMs, toMs int64) string {
	var out string
	col := "`" + p.event + "`"
	if fromMs != 0 {
		out = fmt.Sprintf("%s >= TIMESTAMP '%s'", col, time.UnixMilli(fromMs).UTC().Format("2006-01-02 15:04:05.000000+00"))
	}
	if toMs != 0 {
		if out != "" {
			out += " AND "
		}
		out += fmt.Sprintf("%s < TIMESTAMP '%s'", col, time.UnixMilli(toMs).UTC().Format("2006-01-02 15:04:05.000000+00"))
	}
	return out
}

// Record reads one row back into a reading: vals are the row's values of
// Columns, each nil (NULL), string, []byte, int64, float64, bool or
// time.Time. A value its column's field cannot take is an error wrapping
// ErrBQRead. The imputed flags are set from their columns, so that
// Spec.CanonicalJSON leaves the imputed values out.
func (p *ReadPlan) Record(vals []any) (schemas.Record, error) {
	s := p.spec
	if len(vals) != len(p.columns) {
		return schemas.Record{}, fmt.Errorf("%w: %d values for %d columns", ErrBQRead, len(vals), len(p.columns))
	}
	r := schemas.Record{Values: make([]schemas.Value, s.NumValues())}
	haveEvent := false
	for i, v := range vals {
		if v == nil {
			continue
		}
		target := p.targets[i]
		if target < 0 {
			target = p.eventIx
		}
		kind := schemas.KindBool
		if target < len(s.Fields) {
			kind = kindOf(s.Fields[target].Type)
		}
		got, err := readValue(s, target, kind, v)
		if err != nil {
			return schemas.Record{}, fmt.Errorf("%w: column %s: %v", ErrBQRead, p.columns[i], err)
		}
		r.Values[target] = got
		if target == p.eventIx {
			r.EventMs, haveEvent = got.Int, true
		}
	}
	if !haveEvent {
		return schemas.Record{}, fmt.Errorf("%w: column %s is NULL: a reading needs its event time", ErrBQRead, p.event)
	}
	return r, nil
}

// Line reads one row back into a reading's JSON payload
// (Spec.CanonicalJSON), which the spec's JSON parser reads as it reads an
// input line: the imputed values are left out.
func (p *ReadPlan) Line(vals []any) (string, error) {
	r, err := p.Record(vals)
	if err != nil {
		return "", err
	}
	return codec.CanonicalJSON(p.spec, &r), nil
}

// kindOf is the value kind of a field type.
func kindOf(typ string) schemas.Kind {
	switch typ {
	case schemas.TypeString:
		return schemas.KindString
	case schemas.TypeFloat:
		return schemas.KindFloat
	case schemas.TypeInt:
		return schemas.KindInt
	case schemas.TypeBool:
		return schemas.KindBool
	case schemas.TypeTimestamp:
		return schemas.KindTime
	case schemas.TypeTags:
		return schemas.KindTags
	case schemas.TypeBytes:
		return schemas.KindBytes
	}
	return schemas.KindNull
}

// readValue converts a BigQuery value to a value of field (of kind): the
// inverse of what BQJSONValue and BQEncoder.Append write into each column
// type.
func readValue(s *schemas.Spec, field int, kind schemas.Kind, v any) (schemas.Value, error) {
	bad := func() (schemas.Value, error) {
		return schemas.Value{}, fmt.Errorf("%T %v cannot be read as a %s", v, v, kindWord(kind))
	}
	switch x := v.(type) {
	case string:
		if kind == schemas.KindTags {
			return bad()
		}
		out, err := rowkey.DecodeCell(s, field, false, []byte(x)) // the text AppendText writes
		if err != nil {
			return bad()
		}
		return out, nil
	case []byte:
		if kind != schemas.KindString && kind != schemas.KindBytes {
			return bad()
		}
		return schemas.Value{Kind: kind, Str: string(x)}, nil
	case int64:
		switch kind {
		case schemas.KindInt, schemas.KindTime:
			return schemas.Value{Kind: kind, Int: x}, nil
		case schemas.KindFloat:
			return schemas.Value{Kind: kind, Num: float64(x)}, nil
		}
	case float64:
		switch kind {
		case schemas.KindFloat:
			return schemas.Value{Kind: kind, Num: x}, nil
		case schemas.KindInt:
			if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
				return schemas.Value{Kind: kind, Int: int64(x)}, nil
			}
		}
	case bool:
		if kind == schemas.KindBool {
			return schemas.Value{Kind: kind, Bool: x}, nil
		}
	case time.Time:
		if kind == schemas.KindTime {
			return schemas.Value{Kind: kind, Int: x.UnixMilli()}, nil
		}
	}
	return bad()
}

// kindWord names a kind for messages.
func kindWord(k schemas.Kind) string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return "kind " + strconv.Itoa(int(k))
}

// contains reports whether xs holds x.
func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
