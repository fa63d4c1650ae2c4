// Package lines reads the lines of an input file the one way the batch
// source and the local run's planner (launch/parts) both need: LF or CRLF
// ends, a cap on the bytes kept of a line, and a file's UTF-8 byte-order
// mark dropped; and a file's line index (index.go), which the planner
// writes and the source reads to keep one share of a file's lines.
package lines

import (
	"bufio"
	"bytes"
	"errors"
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
	var last [2]byte // the line's last two bytes, end included
	for {
		chunk, err := lr.rd.ReadSlice('\n')
		size += int64(len(chunk))
		if n := len(chunk); n >= 2 {
			last = [2]byte{chunk[n-2], chunk[n-1]}
		} else if n == 1 {
			last = [2]byte{last[1], chunk[0]}
		}
		if keep := lr.max - len(lr.buf); keep > 0 {
			lr.buf = append(lr.buf, chunk[:min(len(chunk), keep)]...)
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
		line = lr.buf[:min(int64(len(lr.buf)), length)]
		return line, length, size, err
	}
}
