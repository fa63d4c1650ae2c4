package dofns

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"reflect"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/klauspost/compress/s2"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/packed"
)

func init() {
	// Registered functions are called through generated shims; without
	// this Beam calls each coder through reflect.Value.Call, which cost
	// 0.31 s of 8.7 s CPU (3.5 %) in a 300 k-reading batch (profile of
	// launch/bench/e2e -cpuprofile). Registered before the coders use them.
	register.Function1x1(encodeRecord)
	register.Function1x2(packed.DecodeRecord)
	register.Function1x1(encodePaneBatch)
	register.Function1x2(decodePaneBatch)
	register.Function1x1(encodeHourBatch)
	register.Function1x2(decodeHourBatch)
	// Records cross every GroupByKey. Their compact coder writes only the
	// member each value's kind uses, where Beam's default row coder writes
	// all six members of every value through reflection.
	beam.RegisterCoder(reflect.TypeOf((*schemas.Record)(nil)).Elem(), encodeRecord, packed.DecodeRecord)
	// A stream's firings carry their records the same way.
	beam.RegisterCoder(reflect.TypeOf((*PaneBatch)(nil)).Elem(), encodePaneBatch, decodePaneBatch)
	// A batch's pre-grouped readings cross its GroupByKey compressed.
	beam.RegisterCoder(reflect.TypeOf((*HourBatch)(nil)).Elem(), encodeHourBatch, decodeHourBatch)
}

// scratch holds the batches' coding buffers, which do not outlive the call.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

// encodeHourBatch writes the batch's records compressed (appendRecordsS2).
func encodeHourBatch(p HourBatch) []byte {
	return appendRecordsS2(nil, p.Records)
}

func decodeHourBatch(b []byte) (HourBatch, error) {
	recs, err := decodeRecordsS2(b)
	if err != nil {
		return HourBatch{}, fmt.Errorf("hour batch: %w", err)
	}
	return HourBatch{Records: recs}, nil
}

// appendRecordsS2 appends recs (packed.AppendRecords) compressed with S2
// (github.com/klauspost/compress/s2, Snappy's format extended, already in
// the build through the BigQuery client) to dst. Each byte of an element
// costs the runner and the SDK harness copies (prism v2.77 decodes,
// groups, re-encodes and joins a stage's input in growing buffers); one
// identity's readings of an hour share most of their bytes (field names,
// identity, source), so they compress several times over, which cuts a
// local run's CPU and peak memory (BenchmarkHourBatchCoder; figures in
// docs/performance.md). Zstandard would compress a little more, at
// several times the CPU.
func appendRecordsS2(dst []byte, recs []schemas.Record) []byte {
	raw, compressed := scratch.Get().(*[]byte), scratch.Get().(*[]byte)
	defer scratch.Put(raw)
	defer scratch.Put(compressed)
	*raw = packed.AppendRecords((*raw)[:0], recs)
	if need := s2.MaxEncodedLen(len(*raw)); cap(*compressed) < need {
		*compressed = make([]byte, need)
	}
	enc := s2.Encode((*compressed)[:cap(*compressed)], *raw)
	if dst == nil {
		// The element keeps only the compressed bytes, not the buffer's cap.
		return bytes.Clone(enc)
	}
	return append(dst, enc...)
}

// decodeRecordsS2 decodes what appendRecordsS2 wrote, the whole of b.
func decodeRecordsS2(b []byte) ([]schemas.Record, error) {
	n, err := s2.DecodedLen(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", packed.ErrCodec, err)
	}
	buf := scratch.Get().(*[]byte)
	defer scratch.Put(buf)
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	raw, err := s2.Decode((*buf)[:n], b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", packed.ErrCodec, err)
	}
	// DecodeRecords copies what it keeps, so the buffer goes back.
	return packed.DecodeRecords(raw)
}

func encodeRecord(r schemas.Record) []byte {
	// Sized for the record's strings and values, so one allocation holds
	// it instead of append growing it several times.
	return packed.AppendBinary(&r, make([]byte, 0, len(r.Raw)+len(r.Source)+10*len(r.Values)+32))
}

// paneBatchS2 opens a PaneBatch in its compressed form. The first byte of
// the earlier form is that of its window start's varint, which for a
// window on an hour's boundary is 0x00 (the epoch's first hour) or has its
// high bit set, never 0x01: elements written by a job before the
// compressed form (in flight through an in-place update) still decode.
const paneBatchS2 = 0x01

// encodePaneBatch writes paneBatchS2, the window bounds, the timing, the
// index, a byte 1 for a recovery probe (else 0), and the records
// compressed (appendRecordsS2): a firing's readings cross the runner
// between the grouping and StreamRowsFn's state, and one identity's
// readings compress several times over, as a batch's HourBatches do.
func encodePaneBatch(p PaneBatch) []byte {
	b := make([]byte, 1, 32)
	b[0] = paneBatchS2
	b = binary.AppendVarint(b, p.StartMs)
	b = binary.AppendVarint(b, p.EndMs)
	b = append(b, byte(p.Timing))
	b = binary.AppendVarint(b, p.Index)
	probe := byte(0)
	if p.Recover {
		probe = 1
	}
	b = append(b, probe)
	if len(p.Records) == 0 {
		return b
	}
	return appendRecordsS2(b, p.Records)
}

func decodePaneBatch(b []byte) (PaneBatch, error) {
	if len(b) == 0 || b[0] != paneBatchS2 {
		return decodePaneBatchV0(b)
	}
	d := packed.NewReader(b[1:])
	p := PaneBatch{StartMs: d.Varint(), EndMs: d.Varint()}
	timing, index := d.Uvarint(), d.Varint()
	probe := d.Uvarint()
	if err := d.Err(); err != nil {
		return p, fmt.Errorf("pane batch: %w", err)
	}
	if timing > uint64(typex.PaneUnknown) || probe > 1 {
		return p, fmt.Errorf("%w: pane batch timing %d or probe flag %d", packed.ErrCodec, timing, probe)
	}
	p.Timing, p.Index, p.Recover = typex.PaneTiming(timing), index, probe == 1
	if rest := b[len(b)-d.Len():]; len(rest) > 0 {
		recs, err := decodeRecordsS2(rest)
		if err != nil {
			return p, fmt.Errorf("pane batch: %w", err)
		}
		p.Records = recs
	}
	return p, nil
}

// decodePaneBatchV0 decodes the earlier, uncompressed form: the window
// bounds, the timing, the index, the record count, and each record's
// length and compact form; then, for a recovery probe only, a byte 1.
func decodePaneBatchV0(b []byte) (PaneBatch, error) {
	var p PaneBatch
	var n int
	if p.StartMs, n = binary.Varint(b); n <= 0 {
		return p, fmt.Errorf("%w: pane batch window start", packed.ErrCodec)
	}
	b = b[n:]
	if p.EndMs, n = binary.Varint(b); n <= 0 || len(b) == n {
		return p, fmt.Errorf("%w: pane batch window end", packed.ErrCodec)
	}
	b = b[n:]
	p.Timing, b = typex.PaneTiming(b[0]), b[1:]
	idx, n := binary.Varint(b)
	if n <= 0 {
		return p, fmt.Errorf("%w: pane index", packed.ErrCodec)
	}
	p.Index, b = idx, b[n:]
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return p, fmt.Errorf("%w: pane batch record count", packed.ErrCodec)
	}
	b = b[n:]
	p.Records = make([]schemas.Record, count)
	for i := range p.Records {
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return p, fmt.Errorf("%w: pane batch record %d length", packed.ErrCodec, i)
		}
		r, err := packed.DecodeRecord(b[n : n+int(size)])
		if err != nil {
			return p, fmt.Errorf("pane batch record %d: %w", i, err)
		}
		p.Records[i], b = r, b[n+int(size):]
	}
	if len(b) == 1 && b[0] == 1 {
		p.Recover, b = true, b[1:]
	}
	if len(b) != 0 {
		return p, fmt.Errorf("%w: %d trailing bytes after the pane batch", packed.ErrCodec, len(b))
	}
	return p, nil
}
