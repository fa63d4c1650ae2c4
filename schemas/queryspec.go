package schemas

import (
	"fmt"
	"strings"
	"time"
)

// Aggregate functions a query may declare.
const (
	AggCount    = "count"    // the readings
	AggDuration = "duration" // the readings times an interval (heartbeats)
	AggSum      = "sum"
	AggMin      = "min"
	AggMax      = "max"
	AggAvg      = "avg"
)

// AggregateSpec turns the rows a query reads into one number, or one per
// group: count the readings, count × interval for heartbeats, or the sum,
// min, max or mean of a field's values.
type AggregateSpec struct {
	Fn string `yaml:"fn" jsonschema:"required,enum=count,enum=duration,enum=sum,enum=min,enum=max,enum=avg"`
	// Column names the field whose values sum, min, max and avg take: the
	// value of one of the table's columns.
	Column string `yaml:"column,omitempty"`
	// Interval is how long each reading stands for (duration): a Go
	// duration such as 5s.
	Interval string `yaml:"interval,omitempty" jsonschema:"example=5s"`
	// GroupBy lists fields (in the key, or a column) to answer per value.
	GroupBy []string `yaml:"group_by,omitempty"`
}

// IntervalDuration is the parsed Interval (0 when unset or invalid).
func (a *AggregateSpec) IntervalDuration() time.Duration {
	d, _ := time.ParseDuration(a.Interval)
	return d
}

// String renders the aggregate as the query tool's --aggregate flag.
func (a *AggregateSpec) String() string {
	switch a.Fn {
	case AggDuration:
		return a.Fn + ":" + a.Interval
	case AggSum, AggMin, AggMax, AggAvg:
		return a.Fn + ":" + a.Column
	}
	return a.Fn
}

// ParseAggregate reads the query tool's --aggregate: count, duration:5s,
// or sum|min|max|avg:FIELD.
func ParseAggregate(text string) (*AggregateSpec, error) {
	fn, arg, _ := strings.Cut(text, ":")
	a := &AggregateSpec{Fn: fn}
	switch fn {
	case AggCount:
		if arg != "" {
			return nil, fmt.Errorf("aggregate %q: count takes no argument", text)
		}
	case AggDuration:
		a.Interval = arg
	case AggSum, AggMin, AggMax, AggAvg:
		a.Column = arg
	default:
		return nil, fmt.Errorf("aggregate %q: use count, duration:INTERVAL (e.g. duration:5s) or sum|min|max|avg:FIELD", text)
	}
	return a, nil
}

// check validates a against spec.
func (a *AggregateSpec) check(s *Spec) error {
	switch a.Fn {
	case AggCount:
	case AggDuration:
		if d, err := time.ParseDuration(a.Interval); err != nil || d <= 0 {
			return fmt.Errorf("duration needs interval: a positive Go duration such as 5s (each reading stands for it), not %q", a.Interval)
		}
	case AggSum, AggMin, AggMax, AggAvg:
		f := s.Field(a.Column)
		if f == nil || (f.Type != TypeFloat && f.Type != TypeInt) {
			return fmt.Errorf("%s needs column: a numeric field held in a column, not %q", a.Fn, a.Column)
		}
	default:
		return fmt.Errorf("fn %q: use count, duration, sum, min, max or avg", a.Fn)
	}
	for _, g := range a.GroupBy {
		if s.Field(g) == nil {
			return fmt.Errorf("group_by %q is not a declared field", g)
		}
	}
	return nil
}

// QueryParam is one parameter of a named query: a field the caller fixes
// with a value or a range, with an optional default.
type QueryParam struct {
	Field      string
	Default    string
	HasDefault bool
}

// Params lists q's parameters in declaration order.
func (q *QuerySpec) Params() []QueryParam {
	out := make([]QueryParam, 0, len(q.Where))
	for _, w := range q.Where {
		name, def, has := strings.Cut(w, "=")
		out = append(out, QueryParam{Field: strings.TrimSpace(name), Default: strings.TrimSpace(def), HasDefault: has})
	}
	return out
}

// Query returns the query named name, or nil.
func (s *Spec) Query(name string) *QuerySpec {
	for i := range s.Queries {
		if s.Queries[i].Name == name {
			return &s.Queries[i]
		}
	}
	return nil
}

// QueryNames lists the named queries.
func (s *Spec) QueryNames() []string {
	var out []string
	for _, q := range s.Queries {
		out = append(out, q.Name)
	}
	return out
}

func (s *Spec) validateQuery(qw string, q *QuerySpec) error {
	if q.Name == "" || strings.ContainsAny(q.Name, " =") || strings.HasPrefix(q.Name, "-") {
		return s.Errorf(qw+".name", "%q; give the query a name such as sensor_last_hour (letters, digits, _ and -)", q.Name)
	}
	for _, p := range q.Params() {
		f := s.Field(p.Field)
		if f == nil {
			return s.Errorf(qw+".where", "%q is not a declared field", p.Field)
		}
		if !p.HasDefault {
			continue
		}
		texts := []string{p.Default}
		if r, ok := ParseRange(p.Default); ok {
			texts = []string{r.Lo, r.Hi}
		}
		for _, t := range texts {
			if _, err := ParseValue(f, t); err != nil {
				return s.Errorf(qw+".where", "default %s=%s: %w", p.Field, p.Default, err)
			}
		}
	}
	if q.Table != "" && s.Table(q.Table) == nil {
		return s.Errorf(qw+".table", "%q is not one of the bigtable tables", q.Table)
	}
	if q.Since != "" {
		if _, err := ParseSince(q.Since); err != nil {
			return s.Errorf(qw+".since", "%v", err)
		}
	}
	if q.Limit < 0 {
		return s.Errorf(qw+".limit", "%d; give a row count >= 0", q.Limit)
	}
	if q.Aggregate != nil {
		if err := q.Aggregate.check(s); err != nil {
			return s.Errorf(qw+".aggregate", "%w", err)
		}
		if q.Latest {
			return s.Errorf(qw+".latest", "latest and aggregate do not mix: an aggregate reads every row of the window")
		}
	}
	if q.Latest || q.NewestFirst {
		found := false
		for _, t := range s.Bigtable.Tables {
			if rev, _ := ReverseTimeKey(s, t.Name); rev {
				found = true
			}
		}
		if !found {
			return s.Errorf(qw, "latest and newest_first need a table whose key holds a reverse timestamp ({%s|reverse}); none has one", s.EventTime)
		}
	}
	return nil
}
