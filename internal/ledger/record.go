package ledger

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs"   // gs:// records
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local" // local records
)

// A run's durable record is its ledger's counts as files: each DoFn's
// bundle, as it finishes, writes the counts it made (Recorder.Commit) as
// one small JSON file, named uniquely, in the record's folder; the
// launcher sums them once the run has ended (ReadRecord). Beam metrics
// carry the same counts, but a runner may lose some on the way: prism
// (v2.77) keeps one payload of a counter it does not know yet, so of
// several bundles that first report it at once, all but one lose their
// counts (see Family). The record has no such race.
//
// A bundle's file is written when the bundle finishes, before the runner
// commits it: exact where a failed bundle fails the run (prism), not
// where the runner retries bundles (Dataflow), whose ledger is read from
// its committed metrics.

// RecordOption is the pipeline option (beam.PipelineOptions) that names
// the folder of a run's durable record; unset, the run keeps none.
const RecordOption = "sensorpipe_ledger_record"

// RecordFolder is the folder of the record of run under a dead-letter
// folder (a local path or a gs:// prefix): DIR/_ledger/RUN.
func RecordFolder(deadLetterDir, run string) string {
	return strings.TrimRight(deadLetterDir, "/") + "/_ledger/" + run
}

// recordDir is the run's record folder, "" when it keeps none.
func recordDir() string { return beam.PipelineOptions.Get(RecordOption) }

// recordEntry is one counter of a record file.
type recordEntry struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	N         int64  `json:"n"`
}

// WriteRecord writes c as a new file of the record in dir.
func WriteRecord(ctx context.Context, dir string, c Counters) error {
	entries := make([]recordEntry, 0, len(c))
	for k, n := range c {
		if n != 0 {
			entries = append(entries, recordEntry{k.Namespace, k.Name, n})
		}
	}
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	body, err := json.Marshal(entries)
	if err != nil {
		return fmt.Errorf("ledger record: %w", err)
	}
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return fmt.Errorf("ledger record name: %w", err)
	}
	name := strings.TrimRight(dir, "/") + "/bundle-" + hex.EncodeToString(r[:]) + ".json"
	fs, err := filesystem.New(ctx, name)
	if err != nil {
		return fmt.Errorf("ledger record %s: %w", name, err)
	}
	defer fs.Close()
	w, err := fs.OpenWrite(ctx, name)
	if err != nil {
		return fmt.Errorf("ledger record %s: %w", name, err)
	}
	if _, err := w.Write(append(body, '\n')); err != nil {
		w.Close()
		return fmt.Errorf("ledger record %s: %w", name, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("ledger record %s: %w", name, err)
	}
	return nil
}

// ReadRecord sums the record's files in dir. files is how many there
// were: 0 when the run kept none there.
func ReadRecord(ctx context.Context, dir string) (c Counters, files int, err error) {
	glob := strings.TrimRight(dir, "/") + "/bundle-*.json"
	fs, err := filesystem.New(ctx, glob)
	if err != nil {
		return nil, 0, fmt.Errorf("ledger record %s: %w", dir, err)
	}
	defer fs.Close()
	names, err := fs.List(ctx, glob)
	if err != nil {
		return nil, 0, fmt.Errorf("ledger record %s: %w", dir, err)
	}
	c = Counters{}
	for _, name := range names {
		rd, err := fs.OpenRead(ctx, name)
		if err != nil {
			return nil, 0, fmt.Errorf("ledger record %s: %w", name, err)
		}
		body, err := io.ReadAll(rd)
		rd.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("ledger record %s: %w", name, err)
		}
		var entries []recordEntry
		if err := json.Unmarshal(bytes.TrimSpace(body), &entries); err != nil {
			return nil, 0, fmt.Errorf("ledger record %s: %w", name, err)
		}
		for _, e := range entries {
			c[Key{e.Namespace, e.Name}] += e.N
		}
	}
	return c, len(names), nil
}

// Kept reports whether k is a counter a Recorder keeps, and so one a
// durable record holds.
func Kept(k Key) bool {
	switch {
	case k.Namespace == "input", k.Namespace == "window", k.Namespace == "replay", k.Namespace == "deadletter",
		k.Namespace == UnknownFieldNamespace, strings.HasPrefix(k.Namespace, "sink/"):
		return true
	}
	for _, s := range stageKeys {
		if s == k {
			return true
		}
	}
	return false
}

// WithRecord returns c (a run's metrics) with the counters a Recorder
// keeps taken from rec, the run's durable record, instead: the others
// (e.g. group/rows) stay the metrics'.
func (c Counters) WithRecord(rec Counters) Counters {
	out := make(Counters, len(c)+len(rec))
	for k, n := range c {
		if !Kept(k) {
			out[k] = n
		}
	}
	for k, n := range rec {
		out[k] += n
	}
	return out
}

// Lost lists, one line each, the counters a Recorder keeps whose metrics
// (c) fall short of the record (rec): counts the runner lost.
func (c Counters) Lost(rec Counters) []string {
	var out []string
	for k, n := range rec {
		if m := c[k]; m < n {
			out = append(out, fmt.Sprintf("%s/%s %d of %d", k.Namespace, k.Name, m, n))
		}
	}
	sort.Strings(out)
	return out
}
