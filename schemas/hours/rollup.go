package hours

import (
	"fmt"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
)

// Rollup column names, in Bigtable (qualifiers) and BigQuery (columns). Per
// field columns are the field name, "_", and the statistic.
const (
	RollupCount       = "count"
	RollupWindowStart = "window_start"
	RollupWindowEnd   = "window_end"
	RollupPaneTiming  = "pane_timing"
	RollupPaneIndex   = "pane_index"
	RollupFiredAt     = "fired_at"
)

// FieldStats are the count, minimum, maximum and sum of one field's
// Observed values in a window.
type FieldStats struct {
	N             int64
	Min, Max, Sum float64
}

// Mean is Sum/N, or 0 when N is 0.
func (f FieldStats) Mean() float64 {
	if f.N == 0 {
		return 0
	}
	return f.Sum / float64(f.N)
}

// Rollup is the aggregate of one identity in one window.
type Rollup struct {
	// Identity holds the identity fields' values, in spec order.
	Identity       []schemas.Value
	StartMs, EndMs int64
	// Count is the number of readings (after deduplication).
	Count int64
	// Stats follow RollupSpec.Stats, Last RollupSpec.Last and CountTrue
	// RollupSpec.Counted.
	Stats     []FieldStats
	Last      []schemas.Value
	CountTrue []int64
	// LastMs is the event time of each Last value.
	LastMs []int64
}

// Pane describes the firing a rollup row comes from: its timing ("early",
// "ontime", "late" or "unknown") and index.
type Pane struct {
	Timing string
	Index  int64
}

// Roller computes a spec's rollups and renders them as Bigtable cells and
// BigQuery rows. It is built once per spec and safe for concurrent use.
type Roller struct {
	spec      *schemas.Spec
	family    string
	identity  []int
	stats     []int // field index
	statFlags []int // index of the field's imputed flag, or -1
	last      []int
	counted   []int
	bq        *schemas.BigQuerySpec
}

// NewRoller compiles the spec's rollup section. It returns nil and no error
// when the spec declares no rollup. Errors name the spec file, the field and
// the fix.
func NewRoller(s *schemas.Spec) (*Roller, error) {
	ru := s.Rollup
	if ru == nil {
		return nil, nil
	}
	if s.File() == "" {
		s.SetFile(s.Name + ".yaml")
	}
	if ru.Family == "" {
		return nil, s.Errorf("rollup.family", "missing; name the Bigtable column family the hourly aggregates go to (e.g. hourly)")
	}
	for _, f := range s.Bigtable.Tables[0].Families {
		if f.Name == ru.Family && len(f.Columns) > 0 {
			return nil, s.Errorf("rollup.family", "%q already holds columns of table %s; use a family of its own", ru.Family, s.Bigtable.Tables[0].Name)
		}
	}
	r := &Roller{spec: s, family: ru.Family}
	for _, id := range s.Identity {
		r.identity = append(r.identity, s.FieldIndex(id))
	}
	seen := map[string]bool{}
	col := func(where, name string) error {
		if seen[name] {
			return s.Errorf(where, "%q is listed twice; list each column once", name)
		}
		seen[name] = true
		return nil
	}
	for _, name := range ru.Stats {
		f := s.Field(name)
		if f == nil || (f.Type != schemas.TypeFloat && f.Type != schemas.TypeInt) {
			return nil, s.Errorf("rollup.stats", "%q is not a declared numeric field; list float or int fields", name)
		}
		if err := col("rollup.stats", name); err != nil {
			return nil, err
		}
		flag := -1
		for i, im := range s.Impute {
			if im.Field == name {
				flag = len(s.Fields) + i
			}
		}
		r.stats = append(r.stats, s.FieldIndex(name))
		r.statFlags = append(r.statFlags, flag)
	}
	for _, name := range ru.Last {
		i := s.FieldIndex(name)
		if i < 0 {
			return nil, s.Errorf("rollup.last", "%q is not a declared field or imputed flag", name)
		}
		if err := col("rollup.last", name+"_last"); err != nil {
			return nil, err
		}
		r.last = append(r.last, i)
	}
	for _, name := range ru.Counted {
		i := s.FieldIndex(name)
		isFlag := i >= len(s.Fields)
		if i < 0 || (!isFlag && s.Fields[i].Type != schemas.TypeBool) {
			return nil, s.Errorf("rollup.count_true", "%q is not a bool field or imputed flag", name)
		}
		if err := col("rollup.count_true", name+"_count"); err != nil {
			return nil, err
		}
		r.counted = append(r.counted, i)
	}
	r.bq = r.bigQuerySpec()
	return r, nil
}

// Family is the Bigtable column family of the rollup cells.
func (r *Roller) Family() string { return r.family }

// Compute aggregates the prepared readings of one identity in the window
// [startMs, endMs): recs are deduplicated, imputed and in event-time order,
// as group.Prepare returns them. Statistics use observed values only: an
// imputed value is a copy of another reading's and would count it twice.
// Last is the value of the latest reading that has one.
func (r *Roller) Compute(recs []schemas.Record, startMs, endMs int64) Rollup {
	ru := r.Start(startMs, endMs)
	r.Add(&ru, recs)
	return ru
}

// Start is the empty rollup of the window [startMs, endMs).
func (r *Roller) Start(startMs, endMs int64) Rollup {
	return Rollup{
		StartMs:   startMs,
		EndMs:     endMs,
		Stats:     make([]FieldStats, len(r.stats)),
		Last:      make([]schemas.Value, len(r.last)),
		LastMs:    make([]int64, len(r.last)),
		CountTrue: make([]int64, len(r.counted)),
	}
}

// Add aggregates more prepared readings of the rollup's identity and
// window into ru, as Compute does: a stream's early firings add each
// firing's readings to the rollup of the ones before.
func (r *Roller) Add(ru *Rollup, recs []schemas.Record) {
	if len(recs) > 0 && ru.Identity == nil {
		for _, i := range r.identity {
			ru.Identity = append(ru.Identity, recs[0].Values[i])
		}
	}
	ru.Count += int64(len(recs))
	for ri := range recs {
		vals := recs[ri].Values
		for i, fi := range r.stats {
			v := vals[fi]
			if v.Kind == schemas.KindNull || (r.statFlags[i] >= 0 && vals[r.statFlags[i]].Bool) {
				continue
			}
			x := v.Float()
			st := &ru.Stats[i]
			if st.N == 0 || x < st.Min {
				st.Min = x
			}
			if st.N == 0 || x > st.Max {
				st.Max = x
			}
			st.N++
			st.Sum += x
		}
		for i, fi := range r.last {
			if vals[fi].Kind != schemas.KindNull && (ru.Last[i].Kind == schemas.KindNull || recs[ri].EventMs >= ru.LastMs[i]) {
				ru.Last[i], ru.LastMs[i] = vals[fi], recs[ri].EventMs
			}
		}
		for i, fi := range r.counted {
			if vals[fi].Kind == schemas.KindBool && vals[fi].Bool {
				ru.CountTrue[i]++
			}
		}
	}
}

// namedValue is one rollup column and its value.
type namedValue struct {
	name string
	v    schemas.Value
}

// values lists the rollup's aggregate columns in a fixed order: count, each
// statistic's min, max and mean, each last value, each true count. A
// statistic with no observed value is null.
func (r *Roller) values(ru *Rollup) []namedValue {
	out := []namedValue{{RollupCount, schemas.Value{Kind: schemas.KindInt, Int: ru.Count}}}
	for i, fi := range r.stats {
		name := r.spec.Fields[fi].Name
		st := ru.Stats[i]
		var mn, mx, mean schemas.Value
		if st.N > 0 {
			mn, mx, mean = schemas.Value{Kind: schemas.KindFloat, Num: st.Min}, schemas.Value{Kind: schemas.KindFloat, Num: st.Max}, schemas.Value{Kind: schemas.KindFloat, Num: st.Mean()}
		}
		out = append(out, namedValue{name + "_min", mn}, namedValue{name + "_max", mx}, namedValue{name + "_mean", mean})
	}
	for i, fi := range r.last {
		out = append(out, namedValue{r.valueName(fi) + "_last", ru.Last[i]})
	}
	for i, fi := range r.counted {
		out = append(out, namedValue{r.valueName(fi) + "_count", schemas.Value{Kind: schemas.KindInt, Int: ru.CountTrue[i]}})
	}
	return out
}

// valueName is the name of a field or imputed flag by its Values index.
func (r *Roller) valueName(i int) string {
	if i < len(r.spec.Fields) {
		return r.spec.Fields[i].Name
	}
	return r.spec.Impute[i-len(r.spec.Fields)].Flag
}

// Cells renders the rollup as Bigtable cells in the rollup family, all at
// the window's end, so each firing rewrites the same versions. Null
// aggregates have no cell.
func (r *Roller) Cells(ru *Rollup) []Cell {
	cells, _ := r.cells(ru, false)
	return cells
}

// RewriteCells is Cells and the deletions, at the window's end, of the
// null aggregates' versions, so the rewrite also clears what an earlier,
// provisional firing wrote there (see RowMutation.Deletes).
func (r *Roller) RewriteCells(ru *Rollup) (cells, deletes []Cell) { return r.cells(ru, true) }

func (r *Roller) cells(ru *Rollup, withDeletes bool) (cells, deletes []Cell) {
	ts := ru.EndMs * 1000
	for _, nv := range r.values(ru) {
		switch {
		case nv.v.Kind != schemas.KindNull:
			cells = append(cells, Cell{Family: r.family, Qualifier: nv.name, TsMicros: ts, Value: EncodeValue(nv.v, false)})
		case withDeletes:
			deletes = append(deletes, Cell{Family: r.family, Qualifier: nv.name, TsMicros: ts})
		}
	}
	return cells, deletes
}

// Origin names the rollup for dead letters: the cells or row of a rollup
// that cannot be written carry it as their payload.
func (r *Roller) Origin(ru *Rollup) Origin {
	return Origin{Raw: r.describe(ru), Source: RollupSource(r.spec, ru), Kind: OriginRollup}
}

// BigQuery describes the rollup table: the identity fields, the window
// bounds, the aggregates and the firing (pane timing and index, and when it
// fired). It is DAY-partitioned on window_start, clustered by the identity
// fields, and keyed on the identity fields and window_start: with the
// upsert write method each firing replaces the window's row, so the table
// holds one row per identity and window, the latest firing's.
func (r *Roller) BigQuery() *schemas.BigQuerySpec { return r.bq }

func (r *Roller) bigQuerySpec() *schemas.BigQuerySpec {
	s := r.spec
	table := s.Rollup.Table
	if table == "" {
		base := s.Name
		if s.BigQuery != nil && s.BigQuery.Table != "" {
			base = s.BigQuery.Table
		}
		table = base + "_hourly"
	}
	bq := &schemas.BigQuerySpec{
		Table:            table,
		TimePartitioning: &schemas.PartitionSpec{Type: "DAY", Field: RollupWindowStart},
		Clustering:       append([]string(nil), s.Identity...),
		PrimaryKey:       append(append([]string(nil), s.Identity...), RollupWindowStart),
		MaxStaleness:     schemas.DefaultMaxStaleness.String(),
	}
	if s.BigQuery != nil && len(s.BigQuery.PrimaryKey) > 0 {
		bq.MaxStaleness = s.BigQuery.MaxStaleness
	}
	add := func(name, typ, mode string) {
		bq.Columns = append(bq.Columns, schemas.BQColumnSpec{Name: name, Type: typ, Mode: mode, Value: name})
	}
	for _, fi := range r.identity {
		add(s.Fields[fi].Name, BQType(s.Fields[fi].Type), "REQUIRED")
	}
	add(RollupWindowStart, "TIMESTAMP", "REQUIRED")
	add(RollupWindowEnd, "TIMESTAMP", "REQUIRED")
	var zero Rollup
	zero.Stats = make([]FieldStats, len(r.stats))
	zero.Last = make([]schemas.Value, len(r.last))
	zero.CountTrue = make([]int64, len(r.counted))
	for i, nv := range r.values(&zero) {
		switch {
		case i == 0:
			add(nv.name, "INT64", "REQUIRED")
		case i <= 3*len(r.stats):
			add(nv.name, "FLOAT64", "")
		case i <= 3*len(r.stats)+len(r.last):
			typ := schemas.TypeBool
			if fi := r.last[i-1-3*len(r.stats)]; fi < len(s.Fields) {
				typ = s.Fields[fi].Type
			}
			add(nv.name, BQType(typ), "")
		default:
			add(nv.name, "INT64", "")
		}
	}
	add(RollupPaneTiming, "STRING", "REQUIRED")
	add(RollupPaneIndex, "INT64", "REQUIRED")
	add(RollupFiredAt, "TIMESTAMP", "")
	r.addCoverageColumns(add)
	return bq
}

// BQType maps a spec field type to its BigQuery column type.
func BQType(t string) string {
	switch t {
	case schemas.TypeFloat:
		return "FLOAT64"
	case schemas.TypeInt:
		return "INT64"
	case schemas.TypeBool:
		return "BOOL"
	case schemas.TypeTimestamp:
		return "TIMESTAMP"
	case schemas.TypeBytes:
		return "BYTES"
	}
	return "STRING"
}

// BQRow renders one firing's rollup as a row of the BigQuery() table;
// firedMs is when the pane fired.
func (r *Roller) BQRow(ru *Rollup, pane Pane, firedMs int64) BQRow {
	vals := append([]schemas.Value(nil), ru.Identity...)
	for len(vals) < len(r.identity) {
		vals = append(vals, schemas.Value{})
	}
	vals = append(vals, schemas.Value{Kind: schemas.KindTime, Int: ru.StartMs}, schemas.Value{Kind: schemas.KindTime, Int: ru.EndMs})
	for _, nv := range r.values(ru) {
		vals = append(vals, nv.v)
	}
	vals = append(vals, schemas.Value{Kind: schemas.KindString, Str: pane.Timing}, schemas.Value{Kind: schemas.KindInt, Int: pane.Index}, schemas.Value{Kind: schemas.KindTime, Int: firedMs})
	vals = r.appendCoverage(vals)
	return BQRow{Values: vals, Origin: r.Origin(ru), Seq: ChangeSeq{Micros: firedMs * 1000, Pane: pane.Index}}
}

// describe names a rollup for dead letters: identity and window.
func (r *Roller) describe(ru *Rollup) string {
	var b []byte
	for i, v := range ru.Identity {
		if i > 0 {
			b = append(b, '|')
		}
		b = schemas.AppendText(b, v)
	}
	return fmt.Sprintf("%s rollup %s [%s, %s)", r.spec.Name, b,
		time.UnixMilli(ru.StartMs).UTC().Format(time.RFC3339), time.UnixMilli(ru.EndMs).UTC().Format(time.RFC3339))
}

// RollupSource is the source of a rollup's writes: its identity and hour,
// which its dead letter carries as data (Identity, WindowStart,
// WindowEnd).
func RollupSource(s *schemas.Spec, ru *Rollup) string {
	return deadletter.HourSource(s, ru.Identity, ru.StartMs, ru.EndMs)
}
