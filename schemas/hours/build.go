package hours

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"sync"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
)

// Cell is one Bigtable cell. TsMicros is the event time in milliseconds,
// written as microseconds, so a retried write lands on the same version.
type Cell struct {
	Family    string
	Qualifier string
	TsMicros  int64
	Value     []byte
}

// Origin is the payload cells came from, kept for dead-lettering. In a
// RowMutation, Cells and Deletes count the cells and deletions it
// contributed; they follow those of the origin before it.
type Origin struct {
	Raw     string
	Source  string
	Cells   int
	Deletes int
	// Kind says what this write is to the run's ledger.
	Kind OriginKind
}

// OriginKind says what one write of a record is, so the run's ledger can
// count each reading once per sink however many times a stream writes it.
type OriginKind uint8

// Origin kinds.
const (
	// OriginReading is the write the ledger counts as the reading's: in a
	// batch its only one; in a stream the one the first on-time (or late)
	// firing of its window makes, with its final imputation.
	OriginReading OriginKind = iota
	// OriginRewrite writes a reading again: a later firing re-imputed it,
	// or a duplicate of it was written.
	OriginRewrite
	// OriginProvisional is a stream's write before its window closes: on
	// arrival, or by an early firing with a provisional imputation.
	OriginProvisional
	// OriginRollup is a window's rollup: its cells, or its BigQuery row.
	OriginRollup
)

// OriginKinds lists every kind.
var OriginKinds = []OriginKind{OriginReading, OriginRewrite, OriginProvisional, OriginRollup}

// String names the kind, for the ledger's counters.
func (k OriginKind) String() string {
	switch k {
	case OriginRewrite:
		return "rewrite"
	case OriginProvisional:
		return "provisional"
	case OriginRollup:
		return "rollup"
	}
	return "reading"
}

// RowMutation is every cell one group writes to one row, and the versions
// it clears: each of Deletes is the version at TsMicros (its millisecond)
// of one column, Value unused. Only a stream's rewrites clear (see
// Builder.Rewrites); deletions are kept apart from Cells so that a cell
// stays as small as the batch path needs.
type RowMutation struct {
	Table   string
	RowKey  string
	Cells   []Cell
	Deletes []Cell
	Origins []Origin
}

// BQRow is one BigQuery row: Values follow the spec's BigQuery columns.
// Seq orders the rows written for one primary key: with the upsert write
// method it is the row's _CHANGE_SEQUENCE_NUMBER, and the highest wins.
type BQRow struct {
	Values []schemas.Value
	Origin Origin
	Seq    ChangeSeq
	// Mark, when set (Rows > 0), is the BigQuery mark the sink writes
	// once the table holds this row and the others that carry it.
	Mark BQMark
}

// Builder turns prepared groups into Bigtable mutations and BigQuery rows.
// It is built once per spec and safe for concurrent use.
type Builder struct {
	spec   *schemas.Spec
	tables []tableBuilder
	bqCols []valueRef
	// cellsPerRecord is the most cells one record writes, for sizing.
	cellsPerRecord int
}

type tableBuilder struct {
	name    string
	key     *schemas.Template
	columns []columnBuilder
}

type columnBuilder struct {
	family    string
	qualifier *schemas.Template
	literal   string // the qualifier when it has no fields
	value     valueRef
	int64be   bool
}

// valueRef is where a column's value comes from: a field index, or one of
// the computed values.
type valueRef struct {
	field    int
	computed string
}

// NewBuilder compiles the spec's templates.
func NewBuilder(spec *schemas.Spec) (*Builder, error) {
	b := &Builder{spec: spec}
	for _, t := range spec.Bigtable.Tables {
		key, err := schemas.CompileTemplate(t.RowKey, spec)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", t.Name, err)
		}
		tb := tableBuilder{name: t.Name, key: key.WithEscape(t.Escape)}
		for _, fam := range t.Families {
			for _, c := range fam.Columns {
				q, err := schemas.CompileTemplate(c.Qualifier, spec)
				if err != nil {
					return nil, fmt.Errorf("table %s: %w", t.Name, err)
				}
				q.Delim, q.MaxBytes = "", 0
				cb := columnBuilder{family: fam.Name, value: ref(spec, c.Value), int64be: c.Encoding == "int64be"}
				if IsLiteral(q) {
					cb.literal = c.Qualifier
				} else {
					cb.qualifier = q
				}
				tb.columns = append(tb.columns, cb)
			}
		}
		b.tables = append(b.tables, tb)
		b.cellsPerRecord += len(tb.columns)
	}
	if bq := spec.BigQuery; bq != nil {
		for _, c := range bq.Columns {
			b.bqCols = append(b.bqCols, ref(spec, c.Value))
		}
	}
	return b, nil
}

func ref(spec *schemas.Spec, v string) valueRef {
	if len(v) > 0 && v[0] == '$' {
		return valueRef{field: -1, computed: v}
	}
	return valueRef{field: spec.FieldIndex(v)}
}

// IsLiteral reports whether t renders no field: its text is fixed.
func IsLiteral(t *schemas.Template) bool {
	for _, s := range t.Segs {
		if s.Field >= 0 {
			return false
		}
	}
	return true
}

// Spec returns the builder's spec.
func (b *Builder) Spec() *schemas.Spec { return b.spec }

// Check renders every key and qualifier of r, so a record that cannot be
// written is rejected at parse time with its reason rather than later.
func (b *Builder) Check(r *schemas.Record) error {
	bp := keyBufs.Get().(*[]byte)
	defer keyBufs.Put(bp)
	buf := (*bp)[:0]
	var err error
	for i := range b.tables {
		t := &b.tables[i]
		if buf, err = rowkey.Render(t.key, buf[:0], r); err != nil {
			return fmt.Errorf("table %s row key: %w", t.name, err)
		}
		for j := range t.columns {
			if q := t.columns[j].qualifier; q != nil {
				if buf, err = rowkey.Render(q, buf[:0], r); err != nil {
					return fmt.Errorf("table %s qualifier: %w", t.name, err)
				}
			}
		}
	}
	*bp = buf
	return nil
}

// keyBufs recycles the buffers Check renders keys into.
var keyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// Rejected is a record that could not be built for a table, with why.
type Rejected struct {
	Origin Origin
	Table  string
	Err    error
}

// Mutations builds one RowMutation per row the prepared group touches, for
// every table. Records whose key cannot be rendered (Check rejects them
// first) are skipped and returned as rejected. Each write is an
// OriginReading.
func (b *Builder) Mutations(recs []schemas.Record) ([]RowMutation, []Rejected) {
	return b.Build(recs, false, nil)
}

// Rewrites is Mutations for readings an earlier firing of a stream may have
// written in another form (a duplicate that lost, a provisional
// imputation): each reading's cells, and a deletion of its version in each
// column it has no value for, so the row ends as Mutations alone would
// have written it. Each write is an OriginRewrite.
func (b *Builder) Rewrites(recs []schemas.Record) ([]RowMutation, []Rejected) {
	return b.Build(recs, true, func(int) OriginKind { return OriginRewrite })
}

// Build is Mutations (or Rewrites, with rewrite) with the kind of each
// record's writes given by kind(i) for recs[i]; nil means OriginReading.
func (b *Builder) Build(recs []schemas.Record, rewrite bool, kind func(i int) OriginKind) ([]RowMutation, []Rejected) {
	if kind == nil {
		kind = func(int) OriginKind { return OriginReading }
	}
	return b.mutations(recs, rewrite, kind)
}

func (b *Builder) mutations(recs []schemas.Record, deletes bool, kind func(i int) OriginKind) ([]RowMutation, []Rejected) {
	var (
		out  []RowMutation
		errs []Rejected
		buf  []byte
		// arena holds every cell value of this call: one allocation
		// instead of one per cell.
		arena = make([]byte, 0, len(recs)*b.cellsPerRecord*8)
	)
	for ti := range b.tables {
		t := &b.tables[ti]
		rows := map[string]int{}
		last := -1
		for ri := range recs {
			r := &recs[ri]
			var err error
			buf, err = rowkey.Render(t.key, buf[:0], r)
			if err != nil {
				errs = append(errs, Rejected{Origin{Raw: r.Raw, Source: r.Source, Kind: kind(ri)}, t.name, err})
				continue
			}
			// A group's readings mostly share their row (a sensor's
			// hour): try the row of the previous reading before the map.
			idx, ok := last, last >= 0 && out[last].RowKey == string(buf)
			if !ok {
				idx, ok = rows[string(buf)]
			}
			if !ok {
				idx = len(out)
				rows[string(buf)] = idx
				out = append(out, RowMutation{Table: t.name, RowKey: string(buf)})
			}
			last = idx
			m := &out[idx]
			if m.Cells == nil {
				// A row holds many readings (an hour's group, one sensor's
				// hour) or few (a key with the event millisecond; a
				// bundle's arrival writes of many sensors): room for 64
				// in the first row, and in a later one for as many as the
				// rows before it held on average, so that a call over
				// many rows does not reserve 64 readings for each.
				n := min(len(recs), 64)
				if idx > 0 {
					n = min(n, max(1, ri/idx))
				}
				m.Cells = make([]Cell, 0, n*len(t.columns))
				m.Origins = make([]Origin, 0, n)
			}
			var dels *[]Cell
			if deletes {
				dels = &m.Deletes
			}
			nDels := len(m.Deletes)
			cells, err := b.appendCells(m.Cells, dels, &arena, t, r)
			if err != nil {
				m.Deletes = m.Deletes[:nDels]
				errs = append(errs, Rejected{Origin{Raw: r.Raw, Source: r.Source, Kind: kind(ri)}, t.name, err})
				continue
			}
			m.Origins = append(m.Origins, Origin{Raw: r.Raw, Source: r.Source, Cells: len(cells) - len(m.Cells), Deletes: len(m.Deletes) - nDels, Kind: kind(ri)})
			m.Cells = cells
		}
	}
	return out, errs
}

// RowKeys are the distinct row keys recs have in the named table, in
// first-seen order; keys that cannot be rendered are left out.
func (b *Builder) RowKeys(table string, recs []schemas.Record) []string {
	var out []string
	seen := map[string]bool{}
	var buf []byte
	for ti := range b.tables {
		t := &b.tables[ti]
		if t.name != table {
			continue
		}
		for ri := range recs {
			var err error
			if buf, err = rowkey.Render(t.key, buf[:0], &recs[ri]); err != nil || seen[string(buf)] {
				continue
			}
			seen[string(buf)] = true
			out = append(out, string(buf))
		}
	}
	return out
}

// appendCells appends r's cells for table t, one per column with a value,
// and, when dels is not nil, to *dels a deletion for each column without
// one.
func (b *Builder) appendCells(dst []Cell, dels *[]Cell, arena *[]byte, t *tableBuilder, r *schemas.Record) ([]Cell, error) {
	ts := r.EventMs * 1000
	for i := range t.columns {
		c := &t.columns[i]
		v := b.value(c.value, r, 0)
		if v.Kind == schemas.KindNull && dels == nil {
			continue
		}
		q := c.literal
		if c.qualifier != nil {
			qb, err := rowkey.Render(c.qualifier, nil, r)
			switch {
			case err != nil && v.Kind == schemas.KindNull:
				continue // no such column to clear
			case err != nil:
				return dst, err
			}
			q = string(qb)
		}
		if v.Kind == schemas.KindNull {
			*dels = append(*dels, Cell{Family: c.family, Qualifier: q, TsMicros: ts})
			continue
		}
		start := len(*arena)
		*arena = appendEncoded(*arena, v, c.int64be)
		dst = append(dst, Cell{Family: c.family, Qualifier: q, TsMicros: ts, Value: (*arena)[start:len(*arena):len(*arena)]})
	}
	return dst, nil
}

// EncodeValue is a cell's bytes: text (see AppendText), or with int64be an
// 8-byte big-endian integer, the form Bigtable increments.
func EncodeValue(v schemas.Value, int64be bool) []byte { return appendEncoded(nil, v, int64be) }

func appendEncoded(dst []byte, v schemas.Value, int64be bool) []byte {
	if int64be {
		var n int64
		switch v.Kind {
		case schemas.KindInt, schemas.KindTime:
			n = v.Int
		case schemas.KindFloat:
			n = int64(v.Num)
		case schemas.KindBool:
			if v.Bool {
				n = 1
			}
		}
		return binary.BigEndian.AppendUint64(dst, uint64(n))
	}
	return schemas.AppendText(dst, v)
}

// value resolves a column's value for r; ingestedMs is used for
// $ingested_at.
func (b *Builder) value(ref valueRef, r *schemas.Record, ingestedMs int64) schemas.Value {
	if ref.field >= 0 {
		return r.Values[ref.field]
	}
	switch ref.computed {
	case schemas.ValueEventTime:
		return schemas.Value{Kind: schemas.KindTime, Int: r.EventMs}
	case schemas.ValueReadingID:
		return schemas.Value{Kind: schemas.KindString, Str: group.ReadingID(b.spec, r)}
	case schemas.ValueIngestedAt:
		if ingestedMs == 0 {
			return schemas.Value{}
		}
		return schemas.Value{Kind: schemas.KindTime, Int: ingestedMs}
	}
	return schemas.Value{}
}

// BQRow builds r's BigQuery row, an OriginReading; ingestedMs fills
// $ingested_at.
func (b *Builder) BQRow(r *schemas.Record, ingestedMs int64) BQRow {
	vals := make([]schemas.Value, len(b.bqCols))
	for i, c := range b.bqCols {
		vals[i] = b.value(c, r, ingestedMs)
	}
	return BQRow{Values: vals, Origin: Origin{Raw: r.Raw, Source: r.Source}, Seq: ChangeSeq{Micros: ingestedMs * 1000}}
}

// ChangeSeq is a row's _CHANGE_SEQUENCE_NUMBER: the wall-clock
// microsecond its firing (or its batch) built it, then the firing's pane
// index. Between two changes of one primary key BigQuery applies the one
// with the higher sequence number, comparing section by section. A
// window's firings are built one after another, each taking more than a
// microsecond, so the firing built later (the one that saw every reading
// before it) has the larger first section, whatever order its appends
// arrive in, and even when the runner delivered its pane before an earlier
// one; the pane index only breaks a tie. A restarted launcher's rows beat
// the killed one's, being later by the clock. (A key's firings move
// between workers only when the runner rebalances; a worker clock behind
// the previous one's by more than the time between two firings of one
// window would let the older row win.)
type ChangeSeq struct {
	Micros int64
	Pane   int64
}

// String renders the sequence number as BigQuery takes it: hexadecimal
// sections separated by '/', e.g. "18F2EBB6480/1".
func (c ChangeSeq) String() string {
	return string(c.Append(nil))
}

// Append appends the sequence number as String renders it to dst.
func (c ChangeSeq) Append(dst []byte) []byte {
	start := len(dst)
	dst = strconv.AppendUint(dst, uint64(max(c.Micros, 0)), 16)
	dst = append(dst, '/')
	dst = strconv.AppendUint(dst, uint64(max(c.Pane, 0)), 16)
	for i := start; i < len(dst); i++ {
		if 'a' <= dst[i] && dst[i] <= 'f' {
			dst[i] -= 'a' - 'A'
		}
	}
	return dst
}
