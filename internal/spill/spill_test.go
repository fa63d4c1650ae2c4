package spill

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func files(t *testing.T, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.spill"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestStoreKeepsTheNewestBlobAndFreesAnHourWithItsLastKey: a key's newest
// blob replaces the old one, across groups; a group's file goes when its
// last key is deleted (or moved), not before.
func TestStoreKeepsTheNewestBlobAndFreesAnHourWithItsLastKey(t *testing.T) {
	dir := t.TempDir()
	s, err := In(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := In(dir); again != s {
		t.Fatal("In gave a second store for the same folder")
	}
	get := func(key, want string) {
		t.Helper()
		b, ok, err := s.Get(key)
		if err != nil || ok != (want != "") || string(b) != want {
			t.Errorf("Get(%q) = %q, %v, %v; want %q", key, b, ok, err, want)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Put("h1", "a", []byte("a1")))
	must(s.Put("h1", "b", []byte("b1")))
	must(s.Put("h1", "a", []byte("a2, longer")))
	must(s.Put("h2", "c", []byte{}))
	get("a", "a2, longer")
	get("b", "b1")
	get("z", "")
	if b, ok, err := s.Get("c"); err != nil || !ok || len(b) != 0 {
		t.Errorf("an empty blob: %q, %v, %v", b, ok, err)
	}
	if k, f := s.Keys(); k != 3 || f != 2 || files(t, dir) != 2 {
		t.Fatalf("%d keys in %d groups, %d files; want 3 in 2", k, f, files(t, dir))
	}
	s.Delete("a")
	get("a", "")
	get("b", "b1")
	if files(t, dir) != 2 {
		t.Errorf("h1's file went while b is in it")
	}
	must(s.Put("h2", "b", []byte("b2"))) // b moves: h1 holds no key
	get("b", "b2")
	if k, f := s.Keys(); k != 2 || f != 1 || files(t, dir) != 1 {
		t.Errorf("after b moved: %d keys in %d groups, %d files; want 2 in 1", k, f, files(t, dir))
	}
	s.Delete("b")
	s.Delete("c")
	s.Delete("c")
	if k, f := s.Keys(); k != 0 || f != 0 || files(t, dir) != 0 {
		t.Errorf("all deleted: %d keys in %d groups, %d files left", k, f, files(t, dir))
	}
}

// TestStoreTakesConcurrentWindows: bundles of many keys put, get and
// delete at once (go test -race).
func TestStoreTakesConcurrentWindows(t *testing.T) {
	s, err := In(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				key := fmt.Sprintf("w%d/k%d", w, i%20)
				want := fmt.Sprintf("%s#%d", key, i)
				if err := s.Put(fmt.Sprint("h", i%3), key, []byte(want)); err != nil {
					t.Error(err)
					return
				}
				if b, ok, err := s.Get(key); err != nil || !ok || string(b) != want {
					t.Errorf("Get(%s) = %q, %v, %v; want %q", key, b, ok, err, want)
					return
				}
				if i%7 == 0 {
					s.Delete(key)
				}
			}
		}()
	}
	wg.Wait()
}

// TestStoreSaysWhenTheDiskFails: a Put whose file cannot be made (here a
// folder is in its place, which fails for root too) returns the error, so
// that the caller keeps the window in memory, and leaves the store as it
// was.
func TestStoreSaysWhenTheDiskFails(t *testing.T) {
	dir := t.TempDir()
	s, err := In(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put("h1", "a", []byte("a1")); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("h2"))
	if err := os.Mkdir(filepath.Join(dir, hex.EncodeToString(sum[:12])+".spill"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("h2", "b", []byte("b1")); err == nil {
		t.Fatal("Put into a file that cannot be opened: no error")
	} else {
		t.Log(err)
	}
	if b, ok, err := s.Get("a"); err != nil || !ok || string(b) != "a1" {
		t.Errorf("Get(a) after a failed Put = %q, %v, %v", b, ok, err)
	}
	if _, ok, _ := s.Get("b"); ok {
		t.Error("a failed Put left its key")
	}
	if k, f := s.Keys(); k != 1 || f != 1 {
		t.Errorf("after a failed Put: %d keys in %d groups; want 1 in 1", k, f)
	}
}

// TestStoreCompactsAnHourWhoseBlobsAreReplaced: a late firing replaces
// its window's whole blob, so without compaction an hour's file would
// grow by a window's size per late reading until the hour expires. It
// stays under twice what its keys hold (plus compactMin), and every key
// still reads its newest blob.
func TestStoreCompactsAnHourWhoseBlobsAreReplaced(t *testing.T) {
	dir := t.TempDir()
	s, err := In(dir)
	if err != nil {
		t.Fatal(err)
	}
	blob := func(key string, i int) []byte {
		b := make([]byte, 40_000+i%7)
		copy(b, fmt.Sprintf("%s#%d", key, i))
		return b
	}
	newest := map[string]int{}
	for i := 0; i < 2000; i++ {
		key := fmt.Sprint("k", i%50)
		if err := s.Put("h", key, blob(key, i)); err != nil {
			t.Fatal(err)
		}
		newest[key] = i
		if live, size := s.Bytes(); size > 2*live+compactMin {
			t.Fatalf("after %d puts the file holds %d bytes for %d live", i+1, size, live)
		}
	}
	for key, i := range newest {
		if b, ok, err := s.Get(key); err != nil || !ok || string(b) != string(blob(key, i)) {
			t.Errorf("Get(%s) after compactions: %.20q, %v, %v; want its put %d", key, b, ok, err, i)
		}
	}
	live, size := s.Bytes()
	st, err := os.Stat(filepath.Join(dir, func() string { sum := sha256.Sum256([]byte("h")); return hex.EncodeToString(sum[:12]) }()+".spill"))
	if err != nil || st.Size() < size || live <= 0 {
		t.Errorf("the file: %v, %v; the store counts %d bytes, %d live", st, err, size, live)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.compact")); len(m) != 0 {
		t.Errorf("compaction left %v", m)
	}
}

// TestStoreAppendsPartsAndPutReplacesThem: a key's value is its parts in
// order, in its first part's group; a Put replaces them all (and may move
// the key), and a compaction keeps every value.
func TestStoreAppendsPartsAndPutReplacesThem(t *testing.T) {
	dir := t.TempDir()
	s, err := In(dir)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	get := func(key, want string) {
		t.Helper()
		if b, ok, err := s.Get(key); err != nil || !ok || string(b) != want {
			t.Errorf("Get(%q) = %q, %v, %v; want %q", key, b, ok, err, want)
		}
	}
	must(s.Append("h1", "a", []byte("one,")))
	must(s.Put("h1", "b", []byte("b")))
	must(s.Append("h2", "a", []byte("two,"))) // stays in h1
	must(s.Append("h1", "a", []byte("three")))
	get("a", "one,two,three")
	if k, f := s.Keys(); k != 2 || f != 1 {
		t.Errorf("%d keys in %d groups; want 2 in 1", k, f)
	}
	must(s.Put("h2", "a", []byte("all"))) // replaced, and moved
	must(s.Append("h1", "a", []byte("+")))
	get("a", "all+")
	get("b", "b")
	if live, _ := s.Bytes(); live != int64(len("all+b")) {
		t.Errorf("live bytes %d, want %d", live, len("all+b"))
	}
	// Enough replaced data to compact h2: a's parts become one.
	big := make([]byte, compactMin+1)
	must(s.Put("h2", "c", big))
	must(s.Put("h2", "c", []byte("c")))
	get("a", "all+")
	get("c", "c")
	must(s.Append("h2", "a", []byte("!")))
	get("a", "all+!")
	s.Delete("b") // h1's file goes: h2's alone is left
	if live, size := s.Bytes(); size != live {
		t.Errorf("after compaction: %d bytes of files for %d live", size, live)
	}
	s.Delete("a")
	s.Delete("c")
	if k, f := s.Keys(); k != 0 || f != 0 || files(t, dir) != 0 {
		t.Errorf("all deleted: %d keys in %d groups, %d files left", k, f, files(t, dir))
	}
}
