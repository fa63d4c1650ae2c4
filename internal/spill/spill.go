// Package spill keeps byte blobs by key in files on local disk, for state
// that a local run would otherwise hold in memory: a local stream's
// sensor-hours, their readings held for the hour's final firings and then
// for the allowed lateness (dofns.StreamRowsFn.DiskState).
//
// A key's value is the concatenation of the parts appended to it (Append)
// since it was last replaced (Put). Parts go to one file per group (a
// stream's hour), at its end. A group's file is rewritten with its keys'
// live parts alone when more than half of it (and more than compactMin)
// is replaced data, so a file stays under about twice what its keys hold
// however often they are replaced, and it is removed when its last key is
// deleted, so space comes back when an hour expires. The store lives as
// long as the process and is not meant to outlast it: a killed local
// stream recovers from Bigtable, not from here.
//
// Why not a library (bbolt, pebble, badger): nothing here needs a durable,
// ordered or transactional store, and an append-only file per hour frees
// its space by removing the file, where an embedded database would need
// its own compaction and a write-ahead log this state does not need.
package spill

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/sensorpipe/sensorpipe/internal/registry"
)

// Store is a folder of spilled blobs. Its methods are safe for concurrent
// use.
type Store struct {
	dir string

	mu      sync.Mutex
	groups  map[string]*group
	index   map[string]*entry
	written int64
	fault   func(key string) error
}

type group struct {
	path string
	f    *os.File
	size int64
	live int64 // bytes of the keys' parts
	keys int   // keys in this group
}

// entry is a key's group and parts. A part is 16 bytes of memory: an open
// window gets one per early firing, and its final firing puts them
// together in one.
type entry struct {
	group string
	parts []part
	n     int64
}

type part struct {
	off int64
	n   int32
}

// compactMin is the least a group's replaced data must take before its
// file is rewritten.
const compactMin = 4 << 20

// stores are the process's stores, one per folder, kept for the life of
// the process (registry.Get): the folder is the process's own
// (loopback.Private), and pipelines that share it keep their keys apart
// by their own prefix (dofns.StreamRowsFn.SpillRun).
var stores registry.Registry[string, *Store]

// In returns the process's store in dir (made if missing), the same one
// for every call with that dir.
func In(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("spill folder: %w", err)
	}
	return stores.Get(dir, func() *Store {
		return &Store{dir: dir, groups: map[string]*group{}, index: map[string]*entry{}}
	}), nil
}

// Put stores data as key's value, in group's file, replacing what key
// held.
func (s *Store) Put(groupName, key string, data []byte) error {
	return s.write(groupName, key, data, true)
}

// Append adds data to the end of key's value, in group's file. A key's
// parts are all in the group of its first.
func (s *Store) Append(groupName, key string, data []byte) error {
	return s.write(groupName, key, data, false)
}

func (s *Store) write(groupName, key string, data []byte, replace bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fault != nil {
		if err := s.fault(key); err != nil {
			return fmt.Errorf("spill %s: %w", key, err)
		}
	}
	if len(data) > 1<<31-1 {
		return fmt.Errorf("spill %s: %d bytes is more than a part holds", key, len(data))
	}
	e := s.index[key]
	if e != nil && !replace {
		groupName = e.group
	}
	g, ok := s.groups[groupName]
	if !ok {
		sum := sha256.Sum256([]byte(groupName))
		path := filepath.Join(s.dir, hex.EncodeToString(sum[:12])+".spill")
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return fmt.Errorf("spill %s: %w", key, err)
		}
		g = &group{path: path, f: f}
		s.groups[groupName] = g
	}
	if _, err := g.f.WriteAt(data, g.size); err != nil {
		// The bytes past size are garbage; the next write overwrites them.
		s.dropEmpty(groupName, g)
		return fmt.Errorf("spill %s: %w", key, err)
	}
	s.written += int64(len(data))
	p := part{off: g.size, n: int32(len(data))}
	g.size += int64(len(data))
	g.live += int64(len(data))
	if e == nil || replace {
		old := e
		e = &entry{group: groupName}
		s.index[key] = e
		g.keys++
		if old != nil {
			s.forget(old) // after counting the new entry in: g stays
		}
	}
	e.parts = append(e.parts, p)
	e.n += int64(len(data))
	if dead := g.size - g.live; dead > compactMin && dead > g.live {
		// The data is stored either way: a compaction that fails leaves
		// the file as it was, and a later write tries again.
		_ = s.compact(groupName, g)
	}
	return nil
}

// Get returns key's value (its parts, in order), and whether it has one.
func (s *Store) Get(key string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock() // a compaction may swap the file
	e, ok := s.index[key]
	if !ok {
		return nil, false, nil
	}
	b, err := s.read(e)
	if err != nil {
		return nil, false, fmt.Errorf("read spilled %s: %w", key, err)
	}
	return b, true, nil
}

// read reads an entry's parts into one slice. s.mu is held.
func (s *Store) read(e *entry) ([]byte, error) {
	b := make([]byte, e.n)
	f, at := s.groups[e.group].f, 0
	for _, p := range e.parts {
		if _, err := f.ReadAt(b[at:at+int(p.n)], p.off); err != nil {
			return nil, err
		}
		at += int(p.n)
	}
	return b, nil
}

// Delete forgets key; its group's file goes when it holds no key.
func (s *Store) Delete(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.index[key]; ok {
		delete(s.index, key)
		s.forget(e)
	}
}

// Keys reports how many keys the store holds, and in how many files.
func (s *Store) Keys() (keys, files int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.index), len(s.groups)
}

// SetFault makes each write first call fault, and fail with its error if
// it returns one (nil: no faults): the tests' way to fail the disk.
func (s *Store) SetFault(fault func(key string) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = fault
}

// Written reports how many bytes Put and Append have written.
func (s *Store) Written() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.written
}

// Bytes reports the bytes of the keys' values, and the size of the files
// that hold them.
func (s *Store) Bytes() (live, files int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.groups {
		live, files = live+g.live, files+g.size
	}
	return live, files
}

// compact rewrites a group's file with its keys' values alone, one part
// each: to a new file, which then takes the old one's name. If that fails
// the old file stays as it was. s.mu is held.
func (s *Store) compact(name string, g *group) error {
	nf, err := os.OpenFile(g.path+".compact", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("compact spill file: %w", err)
	}
	fail := func(err error) error {
		nf.Close()
		os.Remove(nf.Name())
		return fmt.Errorf("compact spill file: %w", err)
	}
	moved := map[*entry]part{}
	var off int64
	for _, e := range s.index {
		if e.group != name {
			continue
		}
		b, err := s.read(e)
		if err == nil {
			_, err = nf.WriteAt(b, off)
		}
		if err != nil {
			return fail(err)
		}
		moved[e] = part{off: off, n: int32(len(b))}
		off += int64(len(b))
	}
	if err := os.Rename(nf.Name(), g.path); err != nil {
		return fail(err)
	}
	g.f.Close()
	g.f, g.size, g.live = nf, off, off
	for e, p := range moved {
		e.parts = append(e.parts[:0], p)
	}
	return nil
}

// forget counts a key's replaced or deleted entry e out of its group, and
// removes the group's file when that holds no key. s.mu is held.
func (s *Store) forget(e *entry) {
	g := s.groups[e.group]
	g.keys--
	g.live -= e.n
	s.dropEmpty(e.group, g)
}

func (s *Store) dropEmpty(name string, g *group) {
	if g.keys > 0 {
		return
	}
	g.f.Close()
	os.Remove(g.path)
	delete(s.groups, name)
}
