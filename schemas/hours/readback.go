package hours

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
)

// ErrNoReadBack marks a spec none of whose tables stores every field of a
// reading, so its readings cannot be rebuilt from Bigtable.
var ErrNoReadBack = errors.New("no table to read readings back from")

// ReadBack rebuilds a stream's readings from the cells of one of the
// spec's Bigtable tables: a local stream that is killed loses the readings
// each open hour holds in memory, but their observed cells are in Bigtable
// (written on arrival), and the hour's final firing must impute and roll up
// from all of them.
//
// The table it reads is the first that stores every field: each is the
// event time (a cell's timestamp), the value of a column, or recoverable
// from the row key (Template.Split and KeyPart.Decode: a plain {field}, or
// one piped through pad, ms, reverse, hex or revdomain). An imputed field stored in a column needs its flag
// column too, so that an imputed value is not taken for an observed one.
// Every rebuilt reading is checked by rendering its row key again: a cell
// that does not give back its own row is skipped.
type ReadBack struct {
	spec      *schemas.Spec
	table     *schemas.TableSpec
	key       *schemas.Template
	eventIdx  int
	fromKey   map[int]bool          // fields decoded from the row key
	literal   map[string]readColumn // family + "\x00" + qualifier
	templated map[string][]readColumn
	families  []string
	source    string
}

// readColumn is a column whose cells hold one field or imputed flag.
type readColumn struct {
	qualifier *schemas.Template // nil for a literal qualifier
	field     int               // index in Record.Values
	int64be   bool
}

// ReadRow is one Bigtable row as read: its key and cells.
type ReadRow struct {
	Key   string
	Cells []Cell
}

// NewReadBack picks the table to read readings back from. The error wraps
// ErrNoReadBack and says, table by table, what is missing.
func NewReadBack(spec *schemas.Spec) (*ReadBack, error) {
	var why []string
	for i := range spec.Bigtable.Tables {
		rb, err := newReadBack(spec, &spec.Bigtable.Tables[i])
		if err == nil {
			return rb, nil
		}
		why = append(why, fmt.Sprintf("table %s: %v", spec.Bigtable.Tables[i].Name, err))
	}
	return nil, fmt.Errorf("%w: spec %s: %s", ErrNoReadBack, spec.Name, strings.Join(why, "; "))
}

func newReadBack(spec *schemas.Spec, t *schemas.TableSpec) (*ReadBack, error) {
	key, err := schemas.CompileTemplate(t.RowKey, spec)
	if err != nil {
		return nil, err
	}
	key.WithEscape(t.Escape)
	rb := &ReadBack{
		spec: spec, table: t, key: key, eventIdx: spec.FieldIndex(spec.EventTime),
		literal: map[string]readColumn{}, templated: map[string][]readColumn{},
		source: deadletter.ReadBackSource(t.Name),
	}
	rb.fromKey = rowkey.KeyFields(key)
	known := map[int]bool{rb.eventIdx: true}
	for f := range rb.fromKey {
		known[f] = true
	}
	stored := map[int]bool{}
	for _, fam := range t.Families {
		used := false
		for _, c := range fam.Columns {
			fi := spec.FieldIndex(c.Value)
			if fi < 0 {
				continue // $event_time, $reading_id, $ingested_at: computed
			}
			int64be := c.Encoding == "int64be"
			if int64be && !rowkey.KeepsInt64BE(spec, fi) {
				continue // truncated to an integer: not the value
			}
			q, err := schemas.CompileTemplate(c.Qualifier, spec)
			if err != nil {
				return nil, err
			}
			rowkey.AsQualifier(q)
			col := readColumn{field: fi, int64be: int64be}
			if IsLiteral(q) {
				rb.literal[fam.Name+"\x00"+c.Qualifier] = col
			} else {
				if !rowkey.UsesOnly(q, known) {
					continue // its qualifier needs a field the key does not give
				}
				col.qualifier = q
				rb.templated[fam.Name] = append(rb.templated[fam.Name], col)
			}
			stored[fi] = true
			used = true
		}
		if used {
			rb.families = append(rb.families, fam.Name)
		}
	}
	for i, f := range spec.Fields {
		if !known[i] && !stored[i] {
			return nil, fmt.Errorf("field %s is in no column and cannot be recovered from the row key %q", f.Name, t.RowKey)
		}
	}
	for i, im := range spec.Impute {
		if stored[spec.FieldIndex(im.Field)] && !stored[len(spec.Fields)+i] {
			return nil, fmt.Errorf("imputed field %s is stored without its flag %s, so an imputed value cannot be told from an observed one", im.Field, im.Flag)
		}
	}
	return rb, nil
}

// HoldsWholeHours reports whether each row of the table holds all the
// readings the table stores of every identity under spec to and hour
// that the row holds any of: the row key renders only literals, fields
// of to's identity (by name, of the same type) and, if at all, the event
// time (the same field as to's) cut to the UTC hour or coarser. A rekey into to can
// then build each hour from the row that holds it, with no grouping.
func (rb *ReadBack) HoldsWholeHours(to *schemas.Spec) bool {
	if to.EventTime != rb.spec.EventTime {
		return false
	}
	identity := map[string]bool{}
	for _, n := range to.Identity {
		identity[n] = true
	}
	inIdentity := func(i int) bool {
		f := rb.spec.Fields[i]
		tf := to.Field(f.Name)
		return i != rb.eventIdx && identity[f.Name] && tf != nil && tf.Type == f.Type
	}
	for _, seg := range rb.key.Segs {
		switch seg.Kind {
		case schemas.SegLiteral:
		case schemas.SegField:
			if seg.Field == rb.eventIdx {
				if len(seg.Ops) == 0 {
					return false
				}
				switch seg.Ops[0].Name {
				case "year", "month", "day", "hour":
				default:
					return false
				}
			} else if !inIdentity(seg.Field) {
				return false
			}
		case schemas.SegSalt, schemas.SegHash:
			for _, f := range seg.Fields {
				if !inIdentity(f) {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// Table is the name of the table ReadBack reads.
func (rb *ReadBack) Table() string { return rb.table.Name }

// Spec is the spec whose readings ReadBack rebuilds.
func (rb *ReadBack) Spec() *schemas.Spec { return rb.spec }

// Families are the column families that hold the readings' values.
func (rb *ReadBack) Families() []string { return rb.families }

// Source is the Source of the records ReadBack rebuilds.
func (rb *ReadBack) Source() string { return rb.source }

// PlanWindow plans the row ranges that hold the readings of one identity
// (its group.IdentityKey) with event times in [startMs, endMs).
func (rb *ReadBack) PlanWindow(identityKey string, startMs, endMs int64) (*rowkey.ScanPlan, error) {
	q := rowkey.KeyQuery{Table: rb.table.Name, FromMs: startMs, ToMs: endMs - 1}
	if texts := IdentityTexts(rb.spec, identityKey); texts != nil {
		q.Where = map[string]string{}
		for i, name := range rb.spec.Identity {
			q.Where[name] = texts[i]
		}
		if plan, err := rowkey.PlanScan(rb.spec, q); err == nil {
			return plan, nil
		}
		q.Where = nil // a value the plan cannot take: scan the time range
	}
	return rowkey.PlanScan(rb.spec, q)
}

// PlanSince plans the row ranges that hold readings with event times in
// [fromMs, toMs], of every identity.
func (rb *ReadBack) PlanSince(fromMs, toMs int64) (*rowkey.ScanPlan, error) {
	return rowkey.PlanScan(rb.spec, rowkey.KeyQuery{Table: rb.table.Name, FromMs: fromMs, ToMs: toMs})
}

// IdentityTexts splits an IdentityKey into the text of each identity
// field, or returns nil when it does not split into as many.
func IdentityTexts(s *schemas.Spec, key string) []string {
	if len(s.Identity) == 1 {
		return []string{key}
	}
	texts := strings.Split(key, "\x1f")
	if len(texts) != len(s.Identity) {
		return nil
	}
	return texts
}

// Records rebuilds the readings the rows hold with event times in
// [startMs, endMs), of the identity identityKey (any identity when it is
// ""). A reading is the cells of one row at one timestamp; a cell of no
// column of the spec (a rollup, say) is ignored. Values are decoded by the
// field's type and the column's encoding, and the record holds what the
// cells hold: a value written as imputed keeps its value and its flag
// (true), and group.Prepare, which re-imputes, treats it as missing. Raw is
// CanonicalJSON and Source says it was read back, so a reading that then
// fails to be written still has a payload for its dead letter.
//
// The records come in event-time order, one per identity and millisecond.
// skipped counts the readings that could not be rebuilt: a row key or cell
// that does not parse or render back, or a required field with no cell.
func (rb *ReadBack) Records(rows []ReadRow, identityKey string, startMs, endMs int64) (recs []schemas.Record, skipped int) {
	s := rb.spec
	var keyBuf, qBuf []byte
	for ri := range rows {
		row := &rows[ri]
		base := make([]schemas.Value, s.NumValues())
		if !rb.parseKey(row.Key, base) {
			skipped += countReadings(row.Cells, startMs, endMs)
			continue
		}
		byMs := map[int64]*schemas.Record{}
		var order []int64
		bad := map[int64]bool{}
		for _, c := range row.Cells {
			ms := cellMillis(c.TsMicros)
			if ms < startMs || ms >= endMs {
				continue
			}
			r := byMs[ms]
			if r == nil {
				r = &schemas.Record{Values: append([]schemas.Value(nil), base...), EventMs: ms}
				r.Values[rb.eventIdx] = schemas.Value{Kind: schemas.KindTime, Int: ms}
			}
			col, ok := rb.literal[c.Family+"\x00"+c.Qualifier]
			if !ok {
				for _, tc := range rb.templated[c.Family] {
					var err error
					if qBuf, err = rowkey.Render(tc.qualifier, qBuf[:0], r); err == nil && string(qBuf) == c.Qualifier {
						col, ok = tc, true
						break
					}
				}
			}
			if !ok {
				continue // not a reading's column
			}
			if byMs[ms] == nil {
				byMs[ms] = r
				order = append(order, ms)
			}
			v, err := rowkey.DecodeCell(s, col.field, col.int64be, c.Value)
			if err != nil {
				bad[ms] = true
				continue
			}
			r.Values[col.field] = v
		}
		for _, ms := range order {
			r := byMs[ms]
			var err error
			keyBuf, err = rowkey.Render(rb.key, keyBuf[:0], r)
			if bad[ms] || err != nil || string(keyBuf) != row.Key || !complete(s, r) {
				skipped++
				continue
			}
			if identityKey != "" && group.IdentityKey(s, r) != identityKey {
				continue // another identity's reading in the range (a key field after the time)
			}
			r.Raw, r.Source = codec.CanonicalJSON(s, r), rb.source
			recs = append(recs, *r)
		}
	}
	recs, _ = group.Dedup(s, recs)
	return recs, skipped
}

// complete reports whether r has every required field.
func complete(s *schemas.Spec, r *schemas.Record) bool {
	for i := range s.Fields {
		if s.Fields[i].Required && r.Values[i].Kind == schemas.KindNull {
			return false
		}
	}
	return true
}

// countReadings counts the distinct timestamps of cells in [startMs,
// endMs).
func countReadings(cells []Cell, startMs, endMs int64) int {
	seen := map[int64]bool{}
	for _, c := range cells {
		if ms := cellMillis(c.TsMicros); ms >= startMs && ms < endMs {
			seen[ms] = true
		}
	}
	return len(seen)
}

// cellMillis is a cell's timestamp (microseconds) in milliseconds, rounded
// down.
func cellMillis(us int64) int64 {
	ms := us / 1000
	if us%1000 != 0 && us < 0 {
		ms--
	}
	return ms
}

// parseKey decodes into vals the fields of key in fromKey (see
// Template.KeyFields and Template.DecodeFields).
func (rb *ReadBack) parseKey(key string, vals []schemas.Value) bool {
	if len(rb.fromKey) == 0 {
		return true
	}
	return rowkey.DecodeFields(rb.key, key, rb.fromKey, vals)
}
