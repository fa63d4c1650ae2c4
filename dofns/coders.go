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

// scratch holds HourBatch coding buffers, which do not outlive the call.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

// encodeHourBatch writes the batch's records (packed.AppendRecords)
// compressed with S2 (github.com/klauspost/compress/s2, Snappy's format
// extended, already in the build through the BigQuery client). Each
// byte of an element costs the runner and the SDK harness copies (prism
// v2.77 decodes, groups, re-encodes and joins a stage's input in growing
// buffers); one identity's readings of an hour share most of their bytes
// (field names, identity, source), so they compress several times over,
// which cuts a local batch's CPU and peak memory (BenchmarkHourBatchCoder;
// figures in docs/performance.md). Zstandard would compress a little
// more, at several times the CPU.
func encodeHourBatch(p HourBatch) []byte {
	raw, compressed := scratch.Get().(*[]byte), scratch.Get().(*[]byte)
	defer scratch.Put(raw)
	defer scratch.Put(compressed)
	*raw = packed.AppendRecords((*raw)[:0], p.Records)
	if need := s2.MaxEncodedLen(len(*raw)); cap(*compressed) < need {
		*compressed = make([]byte, need)
	}
	// The element keeps only the compressed bytes, not the buffer's cap.
	return bytes.Clone(s2.Encode((*compressed)[:cap(*compressed)], *raw))
}

func decodeHourBatch(b []byte) (HourBatch, error) {
	n, err := s2.DecodedLen(b)
	if err != nil {
		return HourBatch{}, fmt.Errorf("%w: hour batch: %w", packed.ErrCodec, err)
	}
	buf := scratch.Get().(*[]byte)
	defer scratch.Put(buf)
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	raw, err := s2.Decode((*buf)[:n], b)
	if err != nil {
		return HourBatch{}, fmt.Errorf("%w: hour batch: %w", packed.ErrCodec, err)
	}
	// DecodeRecords copies what it keeps, so the buffer goes back.
	recs, err := packed.DecodeRecords(raw)
	if err != nil {
		return HourBatch{}, fmt.Errorf("hour batch: %w", err)
	}
	return HourBatch{Records: recs}, nil
}

func encodeRecord(r schemas.Record) []byte {
	// Sized for the record's strings and values, so one allocation holds
	// it instead of append growing it several times.
	return packed.AppendBinary(&r, make([]byte, 0, len(r.Raw)+len(r.Source)+10*len(r.Values)+32))
}

// encodePaneBatch writes the window bounds, the timing, the index, the
// record count, and each record's length and compact form; then, for a
// recovery probe only, a byte 1.
func encodePaneBatch(p PaneBatch) []byte {
	b := binary.AppendVarint(nil, p.StartMs)
	b = binary.AppendVarint(b, p.EndMs)
	b = append(b, byte(p.Timing))
	b = binary.AppendVarint(b, p.Index)
	b = binary.AppendUvarint(b, uint64(len(p.Records)))
	var rec []byte
	for i := range p.Records {
		rec = packed.AppendBinary(&p.Records[i], rec[:0])
		b = binary.AppendUvarint(b, uint64(len(rec)))
		b = append(b, rec...)
	}
	if p.Recover {
		b = append(b, 1)
	}
	return b
}

func decodePaneBatch(b []byte) (PaneBatch, error) {
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
