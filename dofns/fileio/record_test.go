package fileio

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestReadRecord reads a record back by its offset, length and hash, from
// a plain and a gzip file, and refuses a file that changed, is shorter,
// or is gone.
func TestReadRecord(t *testing.T) {
	dir := t.TempDir()
	text := "first\n\xef\xbb\xbfnot a BOM here\nthe record\r\nlast\n"
	rec := "the record"
	off := int64(len("first\n\xef\xbb\xbfnot a BOM here\n"))
	h := sha256.Sum256([]byte(rec))
	sum := hex.EncodeToString(h[:])
	plain := filepath.Join(dir, "a.jsonl")
	os.WriteFile(plain, []byte(text), 0o644)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(text))
	zw.Close()
	packed := filepath.Join(dir, "a.jsonl.gz")
	os.WriteFile(packed, gz.Bytes(), 0o644)
	bom := filepath.Join(dir, "bom.jsonl")
	os.WriteFile(bom, []byte("\xef\xbb\xbf"+rec+"\n"), 0o644)
	changed := filepath.Join(dir, "changed.jsonl")
	os.WriteFile(changed, []byte("first\n\xef\xbb\xbfnot a BOM here\nthe recorD\r\n"), 0o644)
	bomSum := sha256.Sum256([]byte("\xef\xbb\xbf" + rec))

	ctx := context.Background()
	for _, tc := range []struct {
		name, path string
		off, n     int64
		sum        string
		want       string // "" for errRecordChanged
	}{
		{"plain", plain, off, int64(len(rec)), sum, rec},
		{"gzip", packed, off, int64(len(rec)), sum, rec},
		{"a byte-order mark at the start is dropped", bom, 0, int64(len(rec) + 3), hex.EncodeToString(bomSum[:]), rec},
		{"other bytes", changed, off, int64(len(rec)), sum, ""},
		{"shorter", plain, int64(len(text)) - 2, int64(len(rec)), sum, ""},
		{"past the end", plain, 1 << 20, int64(len(rec)), sum, ""},
		{"gone", filepath.Join(dir, "gone.jsonl"), off, int64(len(rec)), sum, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadRecord(ctx, tc.path, tc.off, tc.n, tc.sum)
			if tc.want == "" {
				if !errors.Is(err, errRecordChanged) {
					t.Errorf("ReadRecord = %q, %v; want errRecordChanged", got, err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Errorf("ReadRecord = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
