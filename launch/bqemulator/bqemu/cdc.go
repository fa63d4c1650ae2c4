package bqemu

// Change data capture (CDC), as BigQuery applies it to tables with a primary
// key (https://cloud.google.com/bigquery/docs/change-data-capture):
//
//   - A table's primary key is tableConstraints.primaryKey (up to 16
//     columns, NOT ENFORCED). tables.insert, get and patch carry it.
//   - Rows appended to the table's _default stream with the pseudo-columns
//     _CHANGE_TYPE (UPSERT or DELETE) and, optionally,
//     _CHANGE_SEQUENCE_NUMBER replace or remove the row with the same key.
//     The pseudo-columns are not stored and cannot be queried.
//   - Between two changes of one key, the larger sequence number wins
//     (up to four '/'-separated sections of up to 16 hex digits, compared
//     section by section as unsigned numbers); with equal or missing
//     sequence numbers, the later one wins.
//
// How the store keeps one row per key: a table with a primary key has an
// index from the key (its columns' values, encoded) to the one live row
// that holds it (partition and position) and to the sequence number of the
// key's last applied change. An UPSERT replaces that row in place (or moves
// it when its partitioning column changed) and a DELETE removes it, moving
// the partition's last row into the hole, so no tombstoned rows are
// scanned. A DELETE leaves the key in the index with its sequence number
// and no row, so an older UPSERT that arrives after it does not bring the
// row back (BigQuery keeps deletes for two days for the same reason; the
// emulator keeps them while the table exists). Changes are applied as they
// arrive, as if max_staleness were 0: every read (tabledata.list, queries,
// tables.get numRows) sees them.
//
// Plain appends (insertAll, non-default streams, rows without
// _CHANGE_TYPE) to a table with a primary key are not deduplicated,
// because BigQuery does not enforce the key: a new key joins the index, a
// key already there is appended as a second row.

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	bq "google.golang.org/api/bigquery/v2"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The CDC pseudo-columns of a Storage Write writer schema.
const (
	changeTypeColumn     = "_CHANGE_TYPE"
	changeSequenceColumn = "_CHANGE_SEQUENCE_NUMBER"
)

// Change types.
const (
	changeUpsert = "UPSERT"
	changeDelete = "DELETE"
)

// maxPrimaryKeyColumns is BigQuery's limit on a primary key.
const maxPrimaryKeyColumns = 16

// reservedColumnPrefixes are the prefixes BigQuery refuses in column names.
var reservedColumnPrefixes = []string{
	"_TABLE_", "_FILE_", "_PARTITION", "_ROW_TIMESTAMP", "__ROOT__", "_COLIDENTIFIER",
	changeSequenceColumn, changeTypeColumn, "_CHANGE_TIMESTAMP",
}

// reservedColumnName reports the reserved prefix name starts with, if any.
func reservedColumnName(name string) (string, bool) {
	up := strings.ToUpper(name)
	for _, p := range reservedColumnPrefixes {
		if strings.HasPrefix(up, p) {
			return p, true
		}
	}
	return "", false
}

// changeSeq is a parsed _CHANGE_SEQUENCE_NUMBER. The zero value is "none".
type changeSeq struct {
	n        int // sections; 0 when the row carried none
	sections [4]uint64
}

// errChangeSeq is the message of a malformed sequence number.
var errChangeSeq = errors.New("the _CHANGE_SEQUENCE_NUMBER must be one to four sections of 1 to 16 hexadecimal characters separated by '/', between 0/0/0/0 and FFFFFFFFFFFFFFFF/FFFFFFFFFFFFFFFF/FFFFFFFFFFFFFFFF/FFFFFFFFFFFFFFFF")

// parseChangeSeq parses a _CHANGE_SEQUENCE_NUMBER such as "18F2EBB6480" or
// "FFF/ABC". Upper and lower case are both accepted, as BigQuery does.
func parseChangeSeq(s string) (changeSeq, error) {
	var cs changeSeq
	if s == "" {
		return cs, errChangeSeq
	}
	parts := strings.Split(s, "/")
	if len(parts) > len(cs.sections) {
		return cs, errChangeSeq
	}
	for i, p := range parts {
		if p == "" || len(p) > 16 {
			return cs, errChangeSeq
		}
		v, err := strconv.ParseUint(p, 16, 64)
		if err != nil {
			return cs, errChangeSeq
		}
		cs.sections[i] = v
	}
	cs.n = len(parts)
	return cs, nil
}

// String renders the sequence number in upper-case hex.
func (c changeSeq) String() string {
	var b strings.Builder
	for i := 0; i < c.n; i++ {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(strings.ToUpper(strconv.FormatUint(c.sections[i], 16)))
	}
	return b.String()
}

// compareChangeSeq orders two changes of one key: -1 if a is older than b,
// +1 if newer, 0 if they cannot be told apart (equal, or either has no
// sequence number), in which case the later arrival wins. Sections compare
// as unsigned numbers, the first first; a sequence number that is a prefix
// of another is the smaller.
func compareChangeSeq(a, b changeSeq) int {
	if a.n == 0 || b.n == 0 {
		return 0
	}
	for i := 0; i < a.n && i < b.n; i++ {
		switch {
		case a.sections[i] < b.sections[i]:
			return -1
		case a.sections[i] > b.sections[i]:
			return 1
		}
	}
	switch {
	case a.n < b.n:
		return -1
	case a.n > b.n:
		return 1
	}
	return 0
}

// rowChange is the CDC information of one appended row. The zero value is
// a plain insert.
type rowChange struct {
	typ string // "", changeUpsert or changeDelete
	seq changeSeq
}

// keyEntry is the index entry of one primary key value.
type keyEntry struct {
	part string    // partition of the live row
	idx  int       // position in the partition; -1 when deleted
	seq  changeSeq // of the last applied change
}

// primaryKeyColumns resolves meta's primary key to top-level column
// indexes, or nil when it has none.
func primaryKeyColumns(meta *bq.Table) []int {
	tc := meta.TableConstraints
	if tc == nil || tc.PrimaryKey == nil || len(tc.PrimaryKey.Columns) == 0 || meta.Schema == nil {
		return nil
	}
	out := make([]int, 0, len(tc.PrimaryKey.Columns))
	for _, c := range tc.PrimaryKey.Columns {
		i := fieldIndex(meta.Schema.Fields, c)
		if i < 0 {
			return nil
		}
		out = append(out, i)
	}
	return out
}

// validateConstraints checks a table's primary key against its schema and
// normalizes the column names to the schema's spelling. A primary key with
// no columns (how tables.patch drops one) is removed.
func validateConstraints(t *bq.Table) error {
	tc := t.TableConstraints
	if tc != nil && tc.PrimaryKey != nil && len(tc.PrimaryKey.Columns) == 0 {
		cp := *tc
		cp.PrimaryKey = nil
		tc = &cp
		t.TableConstraints = tc
	}
	if tc != nil && tc.PrimaryKey == nil && len(tc.ForeignKeys) == 0 {
		t.TableConstraints = nil
	}
	if tc == nil || tc.PrimaryKey == nil {
		return nil
	}
	cols := tc.PrimaryKey.Columns
	if len(cols) > maxPrimaryKeyColumns {
		return fmt.Errorf("primary key has %d columns; at most %d are allowed", len(cols), maxPrimaryKeyColumns)
	}
	var fields []*bq.TableFieldSchema
	if t.Schema != nil {
		fields = t.Schema.Fields
	}
	seen := map[string]bool{}
	for i, c := range cols {
		j := fieldIndex(fields, c)
		if j < 0 {
			return fmt.Errorf("primary key column %s is not a column of the table", c)
		}
		f := fields[j]
		if seen[strings.ToLower(f.Name)] {
			return fmt.Errorf("primary key column %s is listed twice", f.Name)
		}
		seen[strings.ToLower(f.Name)] = true
		if f.Mode == "REPEATED" || f.Type == "RECORD" || f.Type == "JSON" || f.Type == "GEOGRAPHY" {
			return fmt.Errorf("primary key column %s has type %s%s, which cannot be part of a primary key", f.Name, f.Type, map[bool]string{true: " REPEATED"}[f.Mode == "REPEATED"])
		}
		cols[i] = f.Name
	}
	return nil
}

// keyString encodes the primary key values of row.
func keyString(row []any, pk []int) string {
	var b []byte
	for _, i := range pk {
		var v any
		if i < len(row) {
			v = row[i]
		}
		switch x := v.(type) {
		case nil:
			b = append(b, 'n')
		case string:
			b = append(b, 's')
			b = append(b, x...)
		case []byte:
			b = append(b, 'b')
			b = append(b, x...)
		case int64:
			b = append(b, 'i')
			b = strconv.AppendInt(b, x, 10)
		case float64:
			b = append(b, 'f')
			b = strconv.AppendUint(b, math.Float64bits(x), 16)
		case bool:
			b = append(b, 't')
			b = strconv.AppendBool(b, x)
		default:
			b = append(b, '?')
			b = fmt.Append(b, x)
		}
		b = append(b, 0)
	}
	return string(b)
}

// applyLocked stores validated rows: rows[i] goes to partition parts[i]
// with change changes[i] (nil changes: plain inserts).
func (t *table) applyLocked(rows [][]any, parts []string, changes []rowChange) {
	if t.partitions == nil {
		t.partitions = make(map[string]*partition)
	}
	if t.pk != nil && t.keys == nil {
		t.keys = make(map[string]*keyEntry)
	}
	for i, r := range rows {
		var ch rowChange
		if changes != nil {
			ch = changes[i]
		}
		t.seq++
		switch {
		case t.pk == nil:
			t.appendLocked(parts[i], r)
		case ch.typ == changeUpsert:
			t.upsertLocked(parts[i], r, ch.seq)
		case ch.typ == changeDelete:
			t.deleteLocked(r, ch.seq)
		default:
			p, idx := t.appendLocked(parts[i], r)
			k := keyString(r, t.pk)
			if e := t.keys[k]; e == nil || e.idx < 0 {
				t.keys[k] = &keyEntry{part: p, idx: idx}
			}
		}
	}
}

// appendLocked appends r to partition part and returns where it went.
func (t *table) appendLocked(part string, r []any) (string, int) {
	p := t.partitions[part]
	if p == nil {
		p = &partition{}
		t.partitions[part] = p
	}
	p.rows = append(p.rows, storedRow{seq: t.seq, values: r})
	t.numRows++
	t.numBytes += int64(estimateSize(r))
	return part, len(p.rows) - 1
}

// upsertLocked applies an UPSERT of r (in partition part) with sequence
// number seq.
func (t *table) upsertLocked(part string, r []any, seq changeSeq) {
	k := keyString(r, t.pk)
	e := t.keys[k]
	if e != nil && compareChangeSeq(seq, e.seq) < 0 {
		return // an older change than the one applied
	}
	if e != nil && e.idx >= 0 && e.part == part {
		p := t.partitions[part]
		old := p.rows[e.idx].values
		t.numBytes += int64(estimateSize(r) - estimateSize(old))
		p.rows[e.idx] = storedRow{seq: t.seq, values: r}
		e.seq = seq
		return
	}
	if e != nil && e.idx >= 0 {
		t.removeLocked(e)
	}
	if e == nil {
		e = &keyEntry{}
		t.keys[k] = e
	}
	e.part, e.idx = t.appendLocked(part, r)
	e.seq = seq
}

// deleteLocked applies a DELETE of the key of r with sequence number seq.
func (t *table) deleteLocked(r []any, seq changeSeq) {
	k := keyString(r, t.pk)
	e := t.keys[k]
	if e == nil {
		t.keys[k] = &keyEntry{idx: -1, seq: seq}
		return
	}
	if compareChangeSeq(seq, e.seq) < 0 {
		return
	}
	if e.idx >= 0 {
		t.removeLocked(e)
	}
	e.seq = seq
}

// removeLocked removes e's row, moving its partition's last row into its
// place, and marks e deleted.
func (t *table) removeLocked(e *keyEntry) {
	p := t.partitions[e.part]
	last := len(p.rows) - 1
	t.numRows--
	t.numBytes -= int64(estimateSize(p.rows[e.idx].values))
	if e.idx != last {
		moved := p.rows[last]
		p.rows[e.idx] = moved
		if me := t.keys[keyString(moved.values, t.pk)]; me != nil && me.part == e.part && me.idx == last {
			me.idx = e.idx
		}
	}
	p.rows[last] = storedRow{}
	p.rows = p.rows[:last]
	if len(p.rows) == 0 {
		delete(t.partitions, e.part)
	}
	e.idx = -1
}

// reindexLocked rebuilds the key index after the primary key changed (a
// table patched to have one): existing rows join it, the first row of each
// key being the one CDC changes address.
func (t *table) reindexLocked() {
	t.pk = primaryKeyColumns(t.meta)
	t.keys = nil
	if t.pk == nil {
		return
	}
	t.keys = make(map[string]*keyEntry)
	for id, p := range t.partitions {
		for i, r := range p.rows {
			k := keyString(r.values, t.pk)
			if t.keys[k] == nil {
				t.keys[k] = &keyEntry{part: id, idx: i}
			}
		}
	}
}

// primaryKeyNames lists meta's primary key columns, or nil.
func primaryKeyNames(meta *bq.Table) []string {
	if tc := meta.TableConstraints; tc != nil && tc.PrimaryKey != nil {
		return tc.PrimaryKey.Columns
	}
	return nil
}

// maxStalenessRE matches the canonical INTERVAL text BigQuery uses for
// maxStaleness, e.g. "0-0 0 0:15:0" (years-months days hours:minutes:seconds).
var maxStalenessRE = regexp.MustCompile(`^-?\d+-\d+ -?\d+ -?\d+:\d+:\d+(\.\d{1,9})?$`)

// validateMaxStaleness checks a table's maxStaleness.
func validateMaxStaleness(s string) error {
	if s == "" || maxStalenessRE.MatchString(s) {
		return nil
	}
	return fmt.Errorf("invalid value for maxStaleness: %q is not an INTERVAL such as \"0-0 0 0:15:0\" (Y-M D H:M:S)", s)
}

// isPseudoColumn reports whether a writer schema field is a CDC
// pseudo-column.
func isPseudoColumn(name string) bool {
	return strings.EqualFold(name, changeTypeColumn) || strings.EqualFold(name, changeSequenceColumn)
}

// cdcPlan locates the CDC pseudo-columns of a writer schema.
type cdcPlan struct {
	typ, seq protoreflect.FieldDescriptor // nil when absent
}

// active reports whether the writer schema carries a pseudo-column.
func (c cdcPlan) active() bool { return c.typ != nil || c.seq != nil }

// compileCDC finds the pseudo-columns among md's top-level fields. They
// must be (optional) strings.
func compileCDC(md protoreflect.MessageDescriptor) (cdcPlan, *fieldError) {
	var c cdcPlan
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		name := string(fd.Name())
		if !isPseudoColumn(name) {
			continue
		}
		if fd.Kind() != protoreflect.StringKind || fd.IsList() {
			return c, &fieldError{location: name, message: fmt.Sprintf("The proto field mismatched with BigQuery field at %s, the proto field type %s, BigQuery field type STRING", name, kindName(fd))}
		}
		if strings.EqualFold(name, changeTypeColumn) {
			c.typ = fd
		} else {
			c.seq = fd
		}
	}
	return c, nil
}

// rowChangeOf reads the pseudo-columns of one decoded row. upsert is
// whether the stream applies changes (the _default stream of a table with a
// primary key); otherwise UPSERT and DELETE are refused, as BigQuery
// refuses them outside its upsert streams.
func (c cdcPlan) rowChangeOf(msg protoreflect.Message, upsert bool) (rowChange, *fieldError) {
	var ch rowChange
	typ := ""
	if c.typ != nil && msg.Has(c.typ) {
		typ = msg.Get(c.typ).String()
	}
	switch {
	case upsert && (typ == changeUpsert || typ == changeDelete):
		ch.typ = typ
	case upsert:
		return ch, &fieldError{location: changeTypeColumn, message: fmt.Sprintf("The given value is not a valid CHANGE_TYPE: %q. Rows of an upsert stream must set _CHANGE_TYPE to UPSERT or DELETE.", typ)}
	case typ == changeUpsert || typ == changeDelete:
		return ch, &fieldError{location: changeTypeColumn, message: "The given value is not a valid CHANGE_TYPE in insert mode: " + typ}
	case typ != "" && typ != "INSERT":
		return ch, &fieldError{location: changeTypeColumn, message: fmt.Sprintf("The given value is not a valid CHANGE_TYPE: %q", typ)}
	}
	if c.seq != nil && msg.Has(c.seq) {
		seq, err := parseChangeSeq(msg.Get(c.seq).String())
		if err != nil {
			return ch, &fieldError{location: changeSequenceColumn, message: fmt.Sprintf("Invalid %s value %q: %v.", changeSequenceColumn, truncate(msg.Get(c.seq).String()), err)}
		}
		if upsert {
			ch.seq = seq
		}
	}
	return ch, nil
}
