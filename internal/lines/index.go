package lines

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxShares is the most shares an input can be split into by its lines'
// hash bytes (Share): one per byte value.
const MaxShares = 256

// Share is the share, of shares (1 to MaxShares), that a line with hash
// byte h falls in: the hash bytes split into shares runs of equal width.
func Share(h byte, shares int) int {
	shares = min(max(shares, 1), MaxShares)
	return int(h) * shares >> 8
}

// IdentityHash is the byte an identity key hashes to: FNV-1a, mixed by
// splitmix64's finalizer so that its top byte, the one kept, depends on
// every byte of the key.
func IdentityHash(key string) byte {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return byte(h >> 56)
}

// An index holds one byte for every line of a file, in the file's order,
// and each line's size, so that a reader of any byte range of the file can
// find the byte of each line it reads. On disk: per line, its size in the
// file (end included) as a uvarint, then its byte. The batch's local parts
// (launch/parts) keep each line's identity hash in it.

// IndexWriter writes one file's index.
type IndexWriter struct {
	f   *os.File
	w   *bufio.Writer
	buf [binary.MaxVarintLen64 + 1]byte
}

// CreateIndex creates the index file at path.
func CreateIndex(path string) (*IndexWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("line index: %w", err)
	}
	return &IndexWriter{f: f, w: bufio.NewWriterSize(f, 1<<16)}, nil
}

// Add appends the next line: its size in the file, and its byte.
func (w *IndexWriter) Add(size int64, b byte) error {
	n := binary.PutUvarint(w.buf[:], uint64(size))
	w.buf[n] = b
	_, err := w.w.Write(w.buf[:n+1])
	return err
}

// Close flushes and closes the file.
func (w *IndexWriter) Close() error {
	err := w.w.Flush()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("line index %s: %w", w.f.Name(), err)
	}
	return nil
}

// IndexReader reads one file's index forward.
type IndexReader struct {
	f     *os.File
	r     *bufio.Reader
	start int64 // the offset of the line held
	size  int64
	b     byte
	held  bool
}

// OpenIndex opens the index file at path.
func OpenIndex(path string) (*IndexReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("line index: %w", err)
	}
	return &IndexReader{f: f, r: bufio.NewReaderSize(f, 1<<16)}, nil
}

// Byte returns the byte of the line that starts at offset off of the file;
// ok is false when no indexed line starts there. Calls must ask for
// increasing offsets.
func (x *IndexReader) Byte(off int64) (b byte, ok bool, err error) {
	for {
		if !x.held {
			size, err := binary.ReadUvarint(x.r)
			if errors.Is(err, io.EOF) {
				return 0, false, nil
			}
			if err == nil {
				x.b, err = x.r.ReadByte()
			}
			if err != nil {
				return 0, false, fmt.Errorf("line index %s: %w", x.f.Name(), err)
			}
			x.size, x.held = int64(size), true
		}
		switch {
		case x.start == off:
			return x.b, true, nil
		case x.start > off:
			return 0, false, nil
		}
		x.start += x.size
		x.held = false
	}
}

// Close closes the file.
func (x *IndexReader) Close() error { return x.f.Close() }
