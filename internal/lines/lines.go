// Package lines reads the lines of an input file the one way the batch
// source and the local run's planner (launch/parts) both need: LF or CRLF
// ends, a cap on the bytes kept of a line, and a file's UTF-8 byte-order
// mark dropped; and a file's line index (index.go), which the planner
// writes and the source reads to keep one share of a file's lines.
package lines

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"hash"
	"io"
)

// utf8BOM is the UTF-8 byte-order mark.
var utf8BOM = []byte("\xef\xbb\xbf")

// TrimBOM drops a UTF-8 byte-order mark from the start of a file's first
// line, and its bytes from length.
func TrimBOM(line []byte, length int64) ([]byte, int64) {
	if bytes.HasPrefix(line, utf8BOM) {
		return line[len(utf8BOM):], length - int64(len(utf8BOM))
	}
	return line, length
}

// Reader reads lines of at most max kept bytes.
type Reader struct {
	rd  *bufio.Reader
	max int
	buf []byte

	// hashLong, when set, hashes each line longer than max as it is read
	// (Sum), so that a line too long to keep can be named exactly.
	hashLong bool
	h        hash.Hash
	pend     []byte // a hashed line's last bytes, held until its end is known
	sum      []byte
}

// HashLong makes Next hash every line longer than max, end excluded, with
// SHA-256 as it streams by (Sum); the lines kept whole are not hashed.
func (lr *Reader) HashLong() {
	lr.hashLong = true
	lr.h = sha256.New()
}

// Sum is the SHA-256 of the last line Next returned, end excluded, when
// HashLong is set and the line was longer than max; else nil.
func (lr *Reader) Sum() []byte { return lr.sum }

// hashLine adds b, the next bytes of a long line, to its hash, holding the
// last two back: they may be the line's CRLF or LF end.
func (lr *Reader) hashLine(b []byte) {
	if len(b) >= 2 {
		lr.h.Write(lr.pend)
		lr.h.Write(b[:len(b)-2])
		lr.pend = append(lr.pend[:0], b[len(b)-2:]...)
		return
	}
	lr.pend = append(lr.pend, b...)
	if n := len(lr.pend); n > 2 {
		lr.h.Write(lr.pend[:n-2])
		lr.pend = append(lr.pend[:0], lr.pend[n-2:]...)
	}
}

// NewReader reads lines from r through a buffer of bufSize bytes, keeping
// at most max bytes of each.
func NewReader(r io.Reader, bufSize, max int) *Reader {
	return &Reader{rd: bufio.NewReaderSize(r, bufSize), max: max}
}

// Discard skips the next n bytes.
func (lr *Reader) Discard(n int) (int, error) { return lr.rd.Discard(n) }

// Next returns the next line without its LF or CRLF end (valid until the
// next call), its length without that end, and its size in the file, end
// included. A line longer than max is returned cut at max bytes (length
// says how long it was); its rest is read and dropped, never held. At the
// end of the input err is io.EOF, with the last line if it had no end.
func (lr *Reader) Next() (line []byte, length, size int64, err error) {
	lr.buf = lr.buf[:0]
	lr.sum = nil
	hashing := false
	var last [2]byte // the line's last two bytes, end included
	for {
		chunk, err := lr.rd.ReadSlice('\n')
		size += int64(len(chunk))
		if n := len(chunk); n >= 2 {
			last = [2]byte{chunk[n-2], chunk[n-1]}
		} else if n == 1 {
			last = [2]byte{last[1], chunk[0]}
		}
		kept := 0
		if keep := lr.max - len(lr.buf); keep > 0 {
			kept = min(len(chunk), keep)
			lr.buf = append(lr.buf, chunk[:kept]...)
		}
		switch {
		case hashing:
			lr.hashLine(chunk)
		case lr.hashLong && size > int64(lr.max):
			// The line has passed max: hash it from its start (the
			// bytes kept, then the rest of this chunk).
			hashing = true
			lr.h.Reset()
			lr.pend = lr.pend[:0]
			lr.hashLine(lr.buf)
			lr.hashLine(chunk[kept:])
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		length = size
		if size > 0 && last[1] == '\n' {
			length--
			if size > 1 && last[0] == '\r' {
				length--
			}
		}
		if hashing && length > int64(lr.max) {
			// Of the held-back bytes, those before the line's end.
			lr.h.Write(lr.pend[:length-(size-int64(len(lr.pend)))])
			lr.sum = lr.h.Sum(nil)
		}
		line = lr.buf[:min(int64(len(lr.buf)), length)]
		return line, length, size, err
	}
}
