package hours

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"math"
	"strconv"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/coverage"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
)

// BigQuery marks: what a BigQuery table holds of one identity's hour, kept
// in Bigtable so that a batch merged with the stored hour (MergeChanges)
// can leave out the BigQuery rows the table holds already.
//
// A mark is a cell of the marks table (MarksTable), in the row of the
// identity's hour (MarkRowKey), family MarksFamily, qualifier the BigQuery
// table's reference, at the hour's end: a fingerprint (BQFingerprint) of
// the rows the table was sent for the hour, but for the columns that say
// when they were built ($ingested_at, the rollup's fired_at). The sink
// writes it only once BigQuery has acknowledged every row that carries it
// (BQRow.Mark), so a mark never says more than the table holds.
//
// A table a mark speaks for that was emptied or re-created since makes a
// batch leave out rows the table no longer holds: such a re-run turns the
// marks off (the launcher's --bigquery_skip_stored=false).

// MarksFamily is the marks table's one column family.
const MarksFamily = "bigquery"

// MarksTable is the Bigtable table of a spec's BigQuery marks: its first
// table's name with "_bqmarks".
func MarksTable(spec *schemas.Spec) string {
	return spec.Bigtable.Tables[0].Name + "_bqmarks"
}

// MarkRowKey is the marks row of one identity's hour: the identity, '#'
// and the hour's start in epoch milliseconds.
func MarkRowKey(identity string, startMs int64) string {
	return identity + "#" + strconv.FormatInt(startMs, 10)
}

// BQDest is one BigQuery table a batch writes.
type BQDest struct {
	// Ref is "project:dataset.table": the mark's qualifier, and part of
	// its fingerprint.
	Ref string
	// Table is the table's name, as the sink counts it in the run's
	// ledger.
	Table string
}

// BQMarks are the BigQuery marks of one identity's hour (see MarksTable).
type BQMarks struct {
	// Table is the marks table (MarksTable), RowKey the hour's row
	// (MarkRowKey).
	Table, RowKey string
	// Readings is the readings' table; Rollups the rollups' (zero: the
	// spec has no rollup).
	Readings, Rollups BQDest
}

// BQMark rides on each BigQuery row of an hour whose sent rows a mark
// speaks for: the sink writes the mark to Bigtable once BigQuery has
// acknowledged all Rows of them in one bundle. Rows 0: no mark.
type BQMark struct {
	Table, RowKey, Qualifier string
	Value                    []byte
	TsMicros                 int64
	Rows                     int64
}

// Mutation is the mark's Bigtable write: one cell, of one origin that
// names no reading (a sink that writes marks counts none of them in the
// run's ledger).
func (m BQMark) Mutation() RowMutation {
	return RowMutation{Table: m.Table, RowKey: m.RowKey,
		Cells:   []Cell{{Family: MarksFamily, Qualifier: m.Qualifier, TsMicros: m.TsMicros, Value: m.Value}},
		Origins: []Origin{{Cells: 1, Kind: OriginRollup}}}
}

// UnchangedRows counts the BigQuery rows of one kind to one table that a
// merge left out because the table holds them.
type UnchangedRows struct {
	Sink, Table string
	Kind        OriginKind
	N           int64
}

// BQFingerprint is the fingerprint of the rows a BigQuery table (ref) is
// sent for one hour, whatever their order; skip says which columns are
// left out (those that say when a row was built).
func BQFingerprint(ref string, rows []BQRow, skip func(col int) bool) []byte {
	var acc [sha256.Size]byte
	var buf []byte
	for i := range rows {
		buf = buf[:0]
		for col, v := range rows[i].Values {
			if skip != nil && skip(col) {
				continue
			}
			buf = appendValue(buf, v)
		}
		sum := sha256.Sum256(buf)
		for j := range acc {
			acc[j] ^= sum[j]
		}
	}
	h := sha256.New()
	h.Write([]byte(ref))
	h.Write([]byte{0})
	h.Write(binary.AppendUvarint(nil, uint64(len(rows))))
	h.Write(acc[:])
	return h.Sum(nil)
}

// appendValue appends an unambiguous encoding of v.
func appendValue(b []byte, v schemas.Value) []byte {
	b = append(b, byte(v.Kind))
	if v.Bool {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = appendString(b, v.Str)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v.Num))
	b = binary.LittleEndian.AppendUint64(b, uint64(v.Int))
	b = binary.AppendUvarint(b, uint64(len(v.Pairs)))
	for _, p := range v.Pairs {
		b = appendString(appendString(b, p.K), p.V)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// readingsFingerprint is the fingerprint of an hour's readings' rows, but
// for $ingested_at.
func (c *Compiled) readingsFingerprint(ref string, rows []BQRow) []byte {
	return BQFingerprint(ref, rows, c.Builder().ingestedColumn)
}

// ingestedColumn reports whether the BigQuery column col is $ingested_at.
func (b *Builder) ingestedColumn(col int) bool {
	return b.bqCols[col].field < 0 && b.bqCols[col].computed == schemas.ValueIngestedAt
}

// markedBQ leaves out of out the BigQuery rows that the hour's stored
// marks (stored.Marks) say the tables hold, and puts a mark on the rows it
// sends. olds are the stored readings (nil: none stored); changed[i]
// says the reading of out.BQ[i] differs from its stored version or has
// none (read only when olds are given); rollup, cov and pane are what out.Rollup was built from. The rows left out
// are counted in un. A table whose mark equals the merged hour's
// fingerprint is sent nothing; one whose mark equals the stored readings'
// fingerprint is sent the changed readings' rows; any other, every row.
func markedBQ(c *Compiled, out *Firing, marks *BQMarks, stored StoredHour, olds []schemas.Record, changed []bool,
	rollup *Rollup, cov *coverage.Coverage, pane Pane, endMs int64, un *Unchanged) {
	mark := func(dest BQDest, fp []byte, n int) BQMark {
		return BQMark{Table: marks.Table, RowKey: marks.RowKey, Qualifier: dest.Ref, Value: fp, TsMicros: endMs * 1000, Rows: int64(n)}
	}
	if len(out.BQ) > 0 {
		dest := marks.Readings
		fp := c.readingsFingerprint(dest.Ref, out.BQ)
		have := stored.Marks[dest.Ref]
		send := out.BQ
		switch {
		case stored.MarksRead && bytes.Equal(have, fp):
			send = nil
		case stored.MarksRead && have != nil && len(olds) > 0 && bytes.Equal(have, c.storedFingerprint(dest.Ref, olds)):
			send = send[:0:0]
			for i := range out.BQ {
				if changed[i] {
					send = append(send, out.BQ[i])
				}
			}
		}
		var left [OriginRollup + 1]int64
		for i := range out.BQ {
			left[out.BQ[i].Origin.Kind]++
		}
		m := mark(dest, fp, len(send))
		for i := range send {
			send[i].Mark = m
			left[send[i].Origin.Kind]--
		}
		for kind, n := range left {
			if n > 0 {
				un.BigQuery = append(un.BigQuery, UnchangedRows{Sink: deadletter.SinkBigQuery, Table: dest.Table, Kind: OriginKind(kind), N: n})
			}
		}
		out.BQ = send
	}
	if out.Rollup != nil && marks.Rollups.Ref != "" {
		dest := marks.Rollups
		rollupFP := c.rollupFingerprint(dest.Ref, rollup, pane, cov)
		if stored.MarksRead && bytes.Equal(stored.Marks[dest.Ref], rollupFP) {
			out.Rollup = nil
			un.BigQuery = append(un.BigQuery, UnchangedRows{Sink: deadletter.SinkBigQueryRollups, Table: dest.Table, Kind: OriginRollup, N: 1})
			return
		}
		out.Rollup.Mark = mark(dest, rollupFP, 1)
	}
}

// storedFingerprint is the readings' fingerprint of the stored readings'
// rows: what a table holds whose mark the stored hour's write left.
func (c *Compiled) storedFingerprint(ref string, olds []schemas.Record) []byte {
	rows := make([]BQRow, len(olds))
	for i := range olds {
		rows[i] = c.Builder().BQRow(&olds[i], 0)
	}
	return c.readingsFingerprint(ref, rows)
}

// rollupFingerprint is the fingerprint of an hour's rollup row, but for
// its fired_at (built at 0).
func (c *Compiled) rollupFingerprint(ref string, rollup *Rollup, pane Pane, cov *coverage.Coverage) []byte {
	row := c.Roller().BQRow(rollup, pane, 0)
	c.Roller().SetCoverage(&row, cov)
	return BQFingerprint(ref, []BQRow{row}, nil)
}
