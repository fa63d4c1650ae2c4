package hours

import (
	"encoding/binary"
	"fmt"

	"github.com/sensorpipe/sensorpipe/schemas/packed"
)

// A local stream (prism) keeps its state in the launcher's heap, where an
// open hour grows by every reading and a closed one stays for the allowed
// lateness (24 h by default). So a local stream keeps each sensor-hour's
// held readings (AppendHeld chunks) and its FinalState in files on local
// disk instead (dofns.StreamRowsFn.DiskState): the chunks as they come,
// each framed by AppendChunk, and the FinalState packed by
// AppendFinalState. They come back byte for byte, so every firing is the
// one it would have been in memory.

// AppendChunk appends a held chunk to dst, framed by its length, so that a
// window's chunks can be appended one after another and split again.
func AppendChunk(dst, chunk []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(chunk))), chunk...)
}

// SplitChunks splits what AppendChunk wrote, one after another, into the
// chunks; they share b's memory.
func SplitChunks(b []byte) ([][]byte, error) {
	var chunks [][]byte
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: a held chunk cut short (%d bytes left)", packed.ErrCodec, len(b))
		}
		chunks = append(chunks, b[k:k+int(n):k+int(n)])
		b = b[k+int(n):]
	}
	return chunks, nil
}

// AppendFinalState appends fin to dst: the duplicates counted, then each
// reading's millisecond as a delta and its fingerprint.
func AppendFinalState(dst []byte, fin FinalState) []byte {
	dst = binary.AppendVarint(dst, fin.Dropped)
	dst = binary.AppendUvarint(dst, uint64(len(fin.Ms)))
	var prev int64
	for i, ms := range fin.Ms {
		dst = binary.AppendVarint(dst, ms-prev)
		dst = binary.LittleEndian.AppendUint64(dst, fin.Prints[i])
		prev = ms
	}
	return dst
}

// DecodeFinalState decodes what AppendFinalState wrote.
func DecodeFinalState(b []byte) (FinalState, error) {
	d := packed.NewReader(b)
	fin := FinalState{Dropped: d.Varint()}
	n := d.Uvarint()
	if n > uint64(d.Len()) {
		return FinalState{}, fmt.Errorf("%w: %d finalized readings in %d bytes", packed.ErrCodec, n, d.Len())
	}
	fin.Ms, fin.Prints = make([]int64, n), make([]uint64, n)
	var ms int64
	for i := range fin.Ms {
		ms += d.Varint()
		fin.Ms[i], fin.Prints[i] = ms, d.Uint64()
	}
	if err := d.Err(); err != nil {
		return FinalState{}, err
	}
	if d.Len() != 0 {
		return FinalState{}, fmt.Errorf("%w: %d bytes after a final state", packed.ErrCodec, d.Len())
	}
	return fin, nil
}
