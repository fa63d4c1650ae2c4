package fileio

import (
	"bufio"
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/hamba/avro/v2"
	"github.com/hamba/avro/v2/ocf"
	"github.com/klauspost/compress/zstd"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
)

// readAvro reads the blocks of an Avro object container file that start
// in rest. The header's schema (parsed by hamba/avro) gives the columns:
// a record's fields, nested records' by dotted path, a [null, T] union as
// a nullable T. The blocks are framed and their records decoded here, by
// the schema, for the columns the spec reads, so that a block is found
// by its sync marker from any offset and a damaged block is told apart
// from the good ones before it: the rest of the file from a block that
// cannot be read is one unreadable dead letter, and the records before
// it are read.
func (fn *readRowsFn) readAvro(ctx context.Context, rt *claims, rest offsetrange.Restriction, path string, out *rowOut) error {
	fd, err := OpenInput(ctx, path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer fd.Close()
	r := &avroInput{br: bufio.NewReaderSize(fd, 1<<20)}
	h, err := r.header()
	if err != nil {
		if out.first {
			out.unreadable(path, "not a readable Avro object container file: %v", err)
		}
		return nil
	}
	cols, plan, err := avroColumns(h.schema)
	if err != nil {
		if out.first {
			out.unreadable(path, "its schema cannot be read as rows: %v", err)
		}
		return nil
	}
	if !out.mapColumns(cols) {
		return nil
	}
	want := map[string]int{}
	for k, c := range out.m.Read {
		want[c.Name] = k
	}
	plan.target(want)
	if rest.Start > r.pos {
		if found, err := r.seekSync(rest.Start, h.sync); err != nil || !found {
			return nil
		}
	}
	cells := make([]codec.RowCell, len(out.m.Read))
	var zdec *zstd.Decoder
	defer func() {
		if zdec != nil {
			zdec.Close()
		}
	}()
	for {
		start := r.pos
		if _, err := r.br.Peek(1); err == io.EOF {
			return nil
		}
		if !rt.try(start) {
			return nil
		}
		record := 0
		where := func() string { return deadletter.RowSource(path, "block at byte", start, "record", int64(record)) }
		fail := func(err error) error {
			out.unreadable(where(), "the block at byte %d cannot be read from record %d on: %v", start, record, err)
			return nil
		}
		count, err := r.long()
		if err != nil {
			return fail(err)
		}
		size, err := r.long()
		if err != nil {
			return fail(err)
		}
		if count < 0 || size < 0 || size > 1<<31 {
			return fail(fmt.Errorf("block header says %d records in %d bytes", count, size))
		}
		data := make([]byte, size)
		if _, err := r.full(data); err != nil {
			return fail(fmt.Errorf("truncated: %w", err))
		}
		var sync [16]byte
		if _, err := r.full(sync[:]); err != nil {
			return fail(fmt.Errorf("truncated before its sync marker: %w", err))
		}
		if sync != h.sync {
			return fail(errors.New("its sync marker is not the file's"))
		}
		switch h.codec {
		case "", "null":
		case "deflate":
			data, err = io.ReadAll(flate.NewReader(bytes.NewReader(data)))
		case "snappy":
			data, err = (&ocf.SnappyCodec{}).Decode(data)
		case "zstandard":
			if zdec == nil {
				if zdec, err = zstd.NewReader(nil); err != nil {
					return err
				}
			}
			data, err = zdec.DecodeAll(data, nil)
		default:
			err = fmt.Errorf("codec %q is not one of null, deflate, snappy, zstandard", h.codec)
		}
		if err != nil {
			return fail(err)
		}
		d := &avroDatum{b: data}
		for ; int64(record) < count; record++ {
			for k := range cells {
				cells[k] = codec.RowCell{}
			}
			if err := guard(func() error { return plan.decode(d, cells) }); err != nil {
				return fail(err)
			}
			out.row(where(), cells)
		}
	}
}

// avroInput is an Avro file being read, and its offset.
type avroInput struct {
	br  *bufio.Reader
	pos int64
}

func (r *avroInput) full(b []byte) (int, error) {
	n, err := io.ReadFull(r.br, b)
	r.pos += int64(n)
	return n, err
}

// long reads a zig-zag varint.
func (r *avroInput) long() (int64, error) {
	u, err := binary.ReadUvarint(byteCounter{r})
	if err != nil {
		return 0, err
	}
	return int64(u>>1) ^ -int64(u&1), nil
}

type byteCounter struct{ r *avroInput }

func (b byteCounter) ReadByte() (byte, error) {
	c, err := b.r.br.ReadByte()
	if err == nil {
		b.r.pos++
	}
	return c, err
}

func (r *avroInput) bytes() ([]byte, error) {
	n, err := r.long()
	if err != nil {
		return nil, err
	}
	if n < 0 || n > 64<<20 {
		return nil, fmt.Errorf("a length of %d", n)
	}
	b := make([]byte, n)
	_, err = r.full(b)
	return b, err
}

// avroHeader is what an object container file's header says.
type avroHeader struct {
	schema avro.Schema
	codec  string
	sync   [16]byte
}

// header reads the file's header: magic, metadata map, sync marker.
func (r *avroInput) header() (avroHeader, error) {
	var h avroHeader
	magic := make([]byte, 4)
	if _, err := r.full(magic); err != nil || string(magic) != "Obj\x01" {
		return h, errors.New("it does not start with Avro's magic bytes Obj\\x01")
	}
	meta := map[string][]byte{}
	for {
		n, err := r.long()
		if err != nil {
			return h, fmt.Errorf("metadata: %w", err)
		}
		if n == 0 {
			break
		}
		if n < 0 {
			n = -n
			if _, err := r.long(); err != nil {
				return h, err
			}
		}
		for ; n > 0; n-- {
			k, err := r.bytes()
			if err != nil {
				return h, fmt.Errorf("metadata: %w", err)
			}
			v, err := r.bytes()
			if err != nil {
				return h, fmt.Errorf("metadata: %w", err)
			}
			meta[string(k)] = v
		}
	}
	if _, err := r.full(h.sync[:]); err != nil {
		return h, fmt.Errorf("sync marker: %w", err)
	}
	s, err := avro.ParseBytes(meta["avro.schema"])
	if err != nil {
		return h, fmt.Errorf("schema: %w", err)
	}
	h.schema, h.codec = s, string(meta["avro.codec"])
	return h, nil
}

// seekSync moves to the first block that starts at or after target: just
// after a sync marker. found is false when none does.
func (r *avroInput) seekSync(target int64, sync [16]byte) (found bool, err error) {
	from := target - int64(len(sync))
	if from > r.pos {
		n, err := r.br.Discard(int(from - r.pos))
		r.pos += int64(n)
		if err != nil {
			return false, nil
		}
	}
	for {
		b, err := r.br.Peek(64 << 10)
		if i := bytes.Index(b, sync[:]); i >= 0 {
			r.br.Discard(i + len(sync))
			r.pos += int64(i + len(sync))
			return true, nil
		}
		if err != nil || len(b) < len(sync) {
			return false, nil
		}
		n, _ := r.br.Discard(len(b) - len(sync) + 1)
		r.pos += int64(n)
	}
}

// avroDatum is a block's decoded bytes being read.
type avroDatum struct {
	b []byte
	i int
}

var errShort = errors.New("a record runs past its block's end")

func (d *avroDatum) long() (int64, error) {
	u, n := binary.Uvarint(d.b[d.i:])
	if n <= 0 {
		return 0, errShort
	}
	d.i += n
	return int64(u>>1) ^ -int64(u&1), nil
}

func (d *avroDatum) take(n int64) ([]byte, error) {
	if n < 0 || n > int64(len(d.b)-d.i) {
		return nil, errShort
	}
	b := d.b[d.i : d.i+int(n)]
	d.i += int(n)
	return b, nil
}

// avroNode decodes one schema's values: into a cell when cell >= 0, or
// past them.
type avroNode struct {
	schema avro.Schema
	name   string
	cell   int
	// fields are a record's, branches a union's, items an array's or a
	// map's values.
	fields   []*avroNode
	branches []*avroNode
	items    *avroNode
	logical  string
	scale    int
}

// avroColumns lists the columns of a record schema, and the plan that
// decodes its records.
func avroColumns(s avro.Schema) ([]schemas.Column, *avroNode, error) {
	if s.Type() != avro.Record {
		return nil, nil, fmt.Errorf("the file's schema is a %s, not a record", s.Type())
	}
	var cols []schemas.Column
	root := newAvroNode(s, "", &cols, 0)
	return cols, root, nil
}

func resolve(s avro.Schema) avro.Schema {
	if ref, ok := s.(*avro.RefSchema); ok {
		return ref.Schema()
	}
	return s
}

func newAvroNode(s avro.Schema, name string, cols *[]schemas.Column, depth int) *avroNode {
	s = resolve(s)
	n := &avroNode{schema: s, name: name, cell: -1}
	if depth > 32 {
		return n
	}
	switch t := s.(type) {
	case *avro.RecordSchema:
		for _, f := range t.Fields() {
			child := f.Name()
			if name != "" {
				child = name + "." + f.Name()
			}
			n.fields = append(n.fields, newAvroNode(f.Type(), child, cols, depth+1))
		}
		return n
	case *avro.UnionSchema:
		for _, b := range t.Types() {
			n.branches = append(n.branches, newAvroNode(b, name, nil, depth+1))
		}
	case *avro.ArraySchema:
		n.items = newAvroNode(t.Items(), name, nil, depth+1)
	case *avro.MapSchema:
		n.items = newAvroNode(t.Values(), name, nil, depth+1)
	case *avro.PrimitiveSchema:
		if l := t.Logical(); l != nil {
			n.logical = string(l.Type())
			if dec, ok := l.(*avro.DecimalLogicalSchema); ok {
				n.scale = dec.Scale()
			}
		} else if lt, ok := t.Prop("logicalType").(string); ok {
			n.logical = lt
		}
	case *avro.FixedSchema:
		if l := t.Logical(); l != nil {
			n.logical = string(l.Type())
			if dec, ok := l.(*avro.DecimalLogicalSchema); ok {
				n.scale = dec.Scale()
			}
		}
	}
	if cols != nil && name != "" {
		*cols = append(*cols, schemas.Column{Name: name, Kind: avroKind(n), Type: strings.Trim(s.String(), `"`)})
	}
	return n
}

// avroKind is the column kind of a node: a [null, T] union's is T's.
func avroKind(n *avroNode) schemas.ColumnKind {
	if len(n.branches) > 0 {
		var kind schemas.ColumnKind = schemas.ColOther
		for _, b := range n.branches {
			if b.schema.Type() == avro.Null {
				continue
			}
			if kind != schemas.ColOther {
				return schemas.ColOther // more than one type besides null
			}
			kind = avroKind(b)
		}
		return kind
	}
	switch n.schema.Type() {
	case avro.String:
		return schemas.ColString
	case avro.Enum:
		return schemas.ColString
	case avro.Bytes, avro.Fixed:
		if n.logical == "decimal" {
			return schemas.ColDecimal
		}
		return schemas.ColBytes
	case avro.Int, avro.Long:
		switch n.logical {
		case "date":
			return schemas.ColDate
		case "timestamp-millis", "timestamp-micros", "timestamp-nanos":
			return schemas.ColTimestamp
		case "local-timestamp-millis", "local-timestamp-micros", "local-timestamp-nanos":
			return schemas.ColLocalTimestamp
		case "time-millis", "time-micros":
			return schemas.ColOther
		}
		return schemas.ColInt
	case avro.Float, avro.Double:
		return schemas.ColFloat
	case avro.Boolean:
		return schemas.ColBool
	case avro.Map:
		if t, ok := n.schema.(*avro.MapSchema); ok && resolve(t.Values()).Type() == avro.String {
			return schemas.ColMap
		}
	}
	return schemas.ColOther
}

// target sets the cell each wanted column decodes into.
func (n *avroNode) target(want map[string]int) {
	if k, ok := want[n.name]; ok && n.name != "" && n.fields == nil {
		n.setCell(k)
	}
	for _, f := range n.fields {
		f.target(want)
	}
}

func (n *avroNode) setCell(k int) {
	n.cell = k
	for _, b := range n.branches {
		b.setCell(k)
	}
}

// decode reads one value of n from d, into cells[n.cell] when it has one.
func (n *avroNode) decode(d *avroDatum, cells []codec.RowCell) error {
	if n.fields != nil || n.schema.Type() == avro.Record {
		for _, f := range n.fields {
			if err := f.decode(d, cells); err != nil {
				return err
			}
		}
		return nil
	}
	if n.branches != nil {
		i, err := d.long()
		if err != nil {
			return err
		}
		if i < 0 || int(i) >= len(n.branches) {
			return fmt.Errorf("union branch %d of %d", i, len(n.branches))
		}
		return n.branches[i].decode(d, cells)
	}
	var c codec.RowCell
	switch n.schema.Type() {
	case avro.Null:
	case avro.Boolean:
		b, err := d.take(1)
		if err != nil {
			return err
		}
		c = codec.RowCell{Kind: codec.CellBool, Bool: b[0] != 0}
	case avro.Int, avro.Long:
		v, err := d.long()
		if err != nil {
			return err
		}
		c = avroInt(v, n.logical)
	case avro.Float:
		b, err := d.take(4)
		if err != nil {
			return err
		}
		c = codec.RowCell{Kind: codec.CellFloat, Num: float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))}
	case avro.Double:
		b, err := d.take(8)
		if err != nil {
			return err
		}
		c = codec.RowCell{Kind: codec.CellFloat, Num: math.Float64frombits(binary.LittleEndian.Uint64(b))}
	case avro.String, avro.Bytes:
		l, err := d.long()
		if err != nil {
			return err
		}
		b, err := d.take(l)
		if err != nil {
			return err
		}
		c = avroBytes(b, n)
	case avro.Fixed:
		b, err := d.take(int64(n.schema.(*avro.FixedSchema).Size()))
		if err != nil {
			return err
		}
		c = avroBytes(b, n)
	case avro.Enum:
		v, err := d.long()
		if err != nil {
			return err
		}
		sym, ok := n.schema.(*avro.EnumSchema).Symbol(int(v))
		if !ok {
			return fmt.Errorf("enum index %d", v)
		}
		c = codec.RowCell{Kind: codec.CellString, Str: sym}
	case avro.Array, avro.Map:
		var pairs []schemas.Pair
		isMap := n.schema.Type() == avro.Map
		for {
			count, err := d.long()
			if err != nil {
				return err
			}
			if count == 0 {
				break
			}
			if count < 0 {
				count = -count
				if _, err := d.long(); err != nil {
					return err
				}
			}
			for ; count > 0; count-- {
				var key string
				if isMap {
					l, err := d.long()
					if err != nil {
						return err
					}
					k, err := d.take(l)
					if err != nil {
						return err
					}
					key = string(k)
				}
				item := []codec.RowCell{{}}
				if err := n.items.decodeInto(d, item); err != nil {
					return err
				}
				if isMap {
					pairs = append(pairs, schemas.Pair{K: key, V: item[0].Str})
				}
			}
		}
		if isMap {
			c = codec.RowCell{Kind: codec.CellMap, Pairs: pairs}
		}
	default:
		return fmt.Errorf("type %s", n.schema.Type())
	}
	if n.cell >= 0 {
		cells[n.cell] = c
	}
	return nil
}

// decodeInto decodes one value of n into cells[0], whatever n's cell.
func (n *avroNode) decodeInto(d *avroDatum, cells []codec.RowCell) error {
	saved := n.cell
	n.setCell(0)
	err := n.decode(d, cells)
	n.setCell(saved)
	return err
}

func avroInt(v int64, logical string) codec.RowCell {
	switch logical {
	case "date":
		return codec.RowCell{Kind: codec.CellDate, Int: v}
	case "timestamp-millis":
		return codec.RowCell{Kind: codec.CellTime, Int: v * 1000}
	case "timestamp-micros":
		return codec.RowCell{Kind: codec.CellTime, Int: v}
	case "timestamp-nanos":
		return codec.RowCell{Kind: codec.CellTime, Int: floorDiv(v, 1000)}
	case "local-timestamp-millis":
		return codec.RowCell{Kind: codec.CellWallTime, Int: v * 1000}
	case "local-timestamp-micros":
		return codec.RowCell{Kind: codec.CellWallTime, Int: v}
	case "local-timestamp-nanos":
		return codec.RowCell{Kind: codec.CellWallTime, Int: floorDiv(v, 1000)}
	}
	return codec.RowCell{Kind: codec.CellInt, Int: v}
}

func avroBytes(b []byte, n *avroNode) codec.RowCell {
	switch {
	case n.logical == "decimal":
		return codec.RowCell{Kind: codec.CellNumber, Str: decimalText(b, n.scale)}
	case n.schema.Type() == avro.String:
		return codec.RowCell{Kind: codec.CellString, Str: string(b)}
	}
	return codec.RowCell{Kind: codec.CellBytes, Str: string(b)}
}
