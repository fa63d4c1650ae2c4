package fileio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
)

// parquetBatch is the rows the Parquet reader decodes at a time.
const parquetBatch = 8192

// readParquet reads the row groups of a Parquet file whose first page
// starts in rest, the columns the spec reads only. A file whose footer
// cannot be read is one unreadable dead letter; a row group that cannot
// be read to its end dead-letters its rest as unreadable, and the other
// row groups are read.
func (fn *readRowsFn) readParquet(ctx context.Context, rt *claims, rest offsetrange.Restriction, path string, out *rowOut) error {
	f, closeFile, err := openLocal(ctx, path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer closeFile()
	var pf *parquetFile
	if err := guard(func() (err error) { pf, err = openParquet(f); return err }); err != nil {
		if out.first {
			out.unreadable(path, "not a readable Parquet file: %v", err)
		}
		return nil
	}
	if !out.mapColumns(pf.Columns) {
		return nil
	}
	read, err := pf.plan(out.m.Read)
	if err != nil {
		return err
	}
	cells := make([]codec.RowCell, len(out.m.Read))
	prev := int64(-1)
	for rg := 0; rg < pf.rdr.NumRowGroups(); rg++ {
		off := max(pf.rowGroupOffset(rg), prev+1)
		prev = off
		if off < rest.Start {
			continue
		}
		if !rt.try(off) {
			return nil
		}
		row, rows := 0, int(pf.rdr.MetaData().RowGroup(rg).NumRows())
		if r, ok := fn.rowSlice(path); ok {
			row, rows = int(r.RowFrom), int(min(r.RowTo, int64(rows)))
		}
		err := guard(func() error {
			rr, err := pf.fr.GetRecordReader(ctx, read.leaves, []int{rg})
			if err != nil {
				return err
			}
			defer rr.Release()
			if row > 0 && row < rows {
				if err := rr.SeekToRow(int64(row)); err != nil {
					return err
				}
			}
			for row < rows && rr.Next() {
				rec := rr.RecordBatch()
				cols := read.columns(rec)
				for i := 0; i < int(rec.NumRows()) && row < rows; i++ {
					for k := range cells {
						cells[k] = cols[k].cell(i)
					}
					out.row(deadletter.RowSource(path, "row group", int64(rg), "row", int64(row)), cells)
					row++
				}
			}
			if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			return nil
		})
		if err != nil {
			out.unreadable(deadletter.RowSource(path, "row group", int64(rg), "row", int64(row)),
				"row group %d could not be read from row %d on (of %d rows): %v", rg, row, pf.rdr.MetaData().RowGroup(rg).NumRows(), err)
		}
	}
	return nil
}

// parquetFile is an open Parquet file: its reader and its columns as the
// spec's column map sees them (nested groups' columns by dotted path).
type parquetFile struct {
	rdr     *file.Reader
	fr      *pqarrow.FileReader
	Columns []schemas.Column
	fields  map[string]parquetField
}

// parquetField is where a column is: its top-level field, the struct
// children down to it, and the leaves of its top-level field.
type parquetField struct {
	top    string
	path   []int
	leaves []int
	unit   arrow.TimeUnit
	int96  bool
}

// openParquet reads a Parquet file's footer and schema.
func openParquet(r parquet.ReaderAtSeeker) (*parquetFile, error) {
	rdr, err := file.NewParquetReader(r)
	if err != nil {
		return nil, err
	}
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{BatchSize: parquetBatch}, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	pf := &parquetFile{rdr: rdr, fr: fr, fields: map[string]parquetField{}}
	for _, top := range fr.Manifest.Fields {
		leaves := collectLeaves(top, nil)
		pf.walk(top, top.Field.Name, parquetField{top: top.Field.Name, leaves: leaves})
	}
	return pf, nil
}

func collectLeaves(f pqarrow.SchemaField, dst []int) []int {
	if f.IsLeaf() {
		return append(dst, f.ColIndex)
	}
	for _, c := range f.Children {
		dst = collectLeaves(c, dst)
	}
	return dst
}

// walk lists f (named name) and, for a struct, its children.
func (pf *parquetFile) walk(f pqarrow.SchemaField, name string, at parquetField) {
	if st, ok := f.Field.Type.(*arrow.StructType); ok && len(f.Children) == st.NumFields() {
		for i, c := range f.Children {
			next := at
			next.path = append(append([]int(nil), at.path...), i)
			pf.walk(c, name+"."+c.Field.Name, next)
		}
		return
	}
	kind, typ := arrowKind(f.Field.Type)
	if f.IsLeaf() {
		col := pf.rdr.MetaData().Schema.Column(f.ColIndex)
		typ = col.PhysicalType().String()
		if lt := col.LogicalType(); lt != nil && lt.String() != "None" {
			typ += " " + lt.String()
		}
		if col.PhysicalType() == parquet.Types.Int96 {
			kind, at.int96 = schemas.ColTimestamp, true
		}
	}
	if ts, ok := f.Field.Type.(*arrow.TimestampType); ok {
		at.unit = ts.Unit
	}
	if _, dup := pf.fields[name]; dup {
		return
	}
	pf.fields[name] = at
	pf.Columns = append(pf.Columns, schemas.Column{Name: name, Kind: kind, Type: typ})
}

// arrowKind is the column kind of an Arrow type, and its name.
func arrowKind(t arrow.DataType) (schemas.ColumnKind, string) {
	switch t := t.(type) {
	case *arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType:
		return schemas.ColString, t.String()
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.FixedSizeBinaryType, *arrow.BinaryViewType:
		return schemas.ColBytes, t.String()
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type,
		*arrow.Uint8Type, *arrow.Uint16Type, *arrow.Uint32Type, *arrow.Uint64Type:
		return schemas.ColInt, t.String()
	case *arrow.Float16Type, *arrow.Float32Type, *arrow.Float64Type:
		return schemas.ColFloat, t.String()
	case *arrow.Decimal128Type, *arrow.Decimal256Type, *arrow.Decimal32Type, *arrow.Decimal64Type:
		return schemas.ColDecimal, t.String()
	case *arrow.BooleanType:
		return schemas.ColBool, t.String()
	case *arrow.TimestampType:
		if t.TimeZone == "" {
			return schemas.ColLocalTimestamp, t.String()
		}
		return schemas.ColTimestamp, t.String()
	case *arrow.Date32Type, *arrow.Date64Type:
		return schemas.ColDate, t.String()
	case *arrow.MapType:
		if isStringType(t.KeyType()) && isStringType(t.ItemType()) {
			return schemas.ColMap, t.String()
		}
	case *arrow.DictionaryType:
		return arrowKind(t.ValueType)
	}
	return schemas.ColOther, t.String()
}

func isStringType(t arrow.DataType) bool {
	switch t.(type) {
	case *arrow.StringType, *arrow.LargeStringType:
		return true
	}
	return false
}

// rowGroupOffset is where row group rg starts: its first column chunk's
// first page.
func (pf *parquetFile) rowGroupOffset(rg int) int64 {
	md := pf.rdr.MetaData().RowGroup(rg)
	if cc, err := md.ColumnChunk(0); err == nil {
		off := cc.DataPageOffset()
		if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < off {
			off = cc.DictionaryPageOffset()
		}
		if off > 0 {
			return off
		}
	}
	if off := md.FileOffset(); off > 0 {
		return off
	}
	return 4 // after the magic bytes
}

// parquetRead is what a reader reads of a file: the leaves of the
// columns' top-level fields, and how each column is found in a batch.
type parquetRead struct {
	leaves []int
	fields []parquetField
}

func (pf *parquetFile) plan(cols []schemas.Column) (parquetRead, error) {
	var r parquetRead
	seen := map[int]bool{}
	for _, c := range cols {
		f, ok := pf.fields[c.Name]
		if !ok {
			return r, fmt.Errorf("parquet: column %s is not in the file", c.Name)
		}
		r.fields = append(r.fields, f)
		for _, l := range f.leaves {
			if !seen[l] {
				seen[l] = true
				r.leaves = append(r.leaves, l)
			}
		}
	}
	return r, nil
}

// columns finds each column of r in a batch.
func (r parquetRead) columns(rec arrow.RecordBatch) []arrowColumn {
	out := make([]arrowColumn, len(r.fields))
	for k, f := range r.fields {
		idx := rec.Schema().FieldIndices(f.top)
		if len(idx) == 0 {
			continue
		}
		arr := rec.Column(idx[0])
		var parents []*array.Struct
		for _, child := range f.path {
			st, ok := arr.(*array.Struct)
			if !ok {
				arr = nil
				break
			}
			parents = append(parents, st)
			arr = st.Field(child)
		}
		out[k] = arrowColumn{arr: arr, parents: parents, unit: f.unit, int96: f.int96}
	}
	return out
}

// arrowColumn is one column of a batch.
type arrowColumn struct {
	arr     arrow.Array
	parents []*array.Struct
	unit    arrow.TimeUnit
	int96   bool
}

// cell is row i of the column.
func (c arrowColumn) cell(i int) codec.RowCell {
	if c.arr == nil || c.arr.IsNull(i) {
		return codec.RowCell{}
	}
	for _, p := range c.parents {
		if p.IsNull(i) {
			return codec.RowCell{}
		}
	}
	return arrowCell(c.arr, i, c.unit, c.int96)
}

func arrowCell(arr arrow.Array, i int, unit arrow.TimeUnit, int96 bool) codec.RowCell {
	switch a := arr.(type) {
	case *array.String:
		return codec.RowCell{Kind: codec.CellString, Str: a.Value(i)}
	case *array.LargeString:
		return codec.RowCell{Kind: codec.CellString, Str: a.Value(i)}
	case *array.StringView:
		return codec.RowCell{Kind: codec.CellString, Str: a.Value(i)}
	case *array.Binary:
		return codec.RowCell{Kind: codec.CellBytes, Str: string(a.Value(i))}
	case *array.LargeBinary:
		return codec.RowCell{Kind: codec.CellBytes, Str: string(a.Value(i))}
	case *array.FixedSizeBinary:
		return codec.RowCell{Kind: codec.CellBytes, Str: string(a.Value(i))}
	case *array.Int8:
		return codec.RowCell{Kind: codec.CellInt, Int: int64(a.Value(i))}
	case *array.Int16:
		return codec.RowCell{Kind: codec.CellInt, Int: int64(a.Value(i))}
	case *array.Int32:
		return codec.RowCell{Kind: codec.CellInt, Int: int64(a.Value(i))}
	case *array.Int64:
		return codec.RowCell{Kind: codec.CellInt, Int: a.Value(i)}
	case *array.Uint8:
		return codec.RowCell{Kind: codec.CellInt, Int: int64(a.Value(i))}
	case *array.Uint16:
		return codec.RowCell{Kind: codec.CellInt, Int: int64(a.Value(i))}
	case *array.Uint32:
		return codec.RowCell{Kind: codec.CellInt, Int: int64(a.Value(i))}
	case *array.Uint64:
		v := a.Value(i)
		if v > 1<<63-1 {
			return codec.RowCell{Kind: codec.CellNumber, Str: fmt.Sprint(v)}
		}
		return codec.RowCell{Kind: codec.CellInt, Int: int64(v)}
	case *array.Float16:
		return codec.RowCell{Kind: codec.CellFloat, Num: float64(a.Value(i).Float32())}
	case *array.Float32:
		return codec.RowCell{Kind: codec.CellFloat, Num: float64(a.Value(i))}
	case *array.Float64:
		return codec.RowCell{Kind: codec.CellFloat, Num: a.Value(i)}
	case *array.Decimal128:
		return codec.RowCell{Kind: codec.CellNumber, Str: a.Value(i).ToString(a.DataType().(*arrow.Decimal128Type).Scale)}
	case *array.Decimal256:
		return codec.RowCell{Kind: codec.CellNumber, Str: a.Value(i).ToString(a.DataType().(*arrow.Decimal256Type).Scale)}
	case *array.Boolean:
		return codec.RowCell{Kind: codec.CellBool, Bool: a.Value(i)}
	case *array.Timestamp:
		kind := codec.CellTime
		if tz := a.DataType().(*arrow.TimestampType).TimeZone; tz == "" && !int96 {
			kind = codec.CellWallTime
		}
		return codec.RowCell{Kind: kind, Int: toMicros(int64(a.Value(i)), unit)}
	case *array.Date32:
		return codec.RowCell{Kind: codec.CellDate, Int: int64(a.Value(i))}
	case *array.Date64:
		return codec.RowCell{Kind: codec.CellDate, Int: floorDiv(int64(a.Value(i)), 86_400_000)}
	case *array.Map:
		start, end := a.ValueOffsets(i)
		keys, items := a.Keys(), a.Items()
		pairs := make([]schemas.Pair, 0, end-start)
		for j := start; j < end; j++ {
			k := arrowCell(keys, int(j), unit, false)
			v := codec.RowCell{}
			if !items.IsNull(int(j)) {
				v = arrowCell(items, int(j), unit, false)
			}
			pairs = append(pairs, schemas.Pair{K: k.Str, V: v.Str})
		}
		return codec.RowCell{Kind: codec.CellMap, Pairs: pairs}
	case *array.Dictionary:
		return arrowCell(a.Dictionary(), a.GetValueIndex(i), unit, int96)
	}
	return codec.RowCell{}
}

// toMicros converts n of unit to microseconds, rounding toward the past.
func toMicros(n int64, unit arrow.TimeUnit) int64 {
	switch unit {
	case arrow.Second:
		return n * 1_000_000
	case arrow.Millisecond:
		return n * 1000
	case arrow.Nanosecond:
		return floorDiv(n, 1000)
	}
	return n
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// decimalText is the decimal of the two's-complement big-endian unscaled
// value b and scale, exactly.
func decimalText(b []byte, scale int) string {
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	s := n.String()
	if scale <= 0 {
		return s + strings.Repeat("0", -scale)
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	if len(s) <= scale {
		s = strings.Repeat("0", scale-len(s)+1) + s
	}
	s = s[:len(s)-scale] + "." + s[len(s)-scale:]
	if neg {
		s = "-" + s
	}
	return s
}
