package dofns

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs"   // gs:// dead-letter prefixes
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local" // local dead-letter folders
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/progress"
	"github.com/sensorpipe/sensorpipe/schemas"
)

func init() {
	register.DoFn2x1[context.Context, schemas.DeadLetter, error](&WriteDeadLettersFn{})
}

// WriteDeadLettersFn writes dead letters as JSON Lines under Dir (a local
// folder or a gs:// prefix), one file per bundle. It needs no GroupByKey,
// so it works the same on bounded and unbounded input.
type WriteDeadLettersFn struct {
	Dir string

	buf      bytes.Buffer
	n        int64
	byReason map[string]int64
	counter  beam.Counter
}

// Setup prepares the counter.
func (f *WriteDeadLettersFn) Setup() {
	f.counter = beam.NewCounter("deadletter", "records")
}

// ProcessElement buffers one dead letter.
func (f *WriteDeadLettersFn) ProcessElement(_ context.Context, d schemas.DeadLetter) error {
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode dead letter: %w", err)
	}
	f.buf.Write(b)
	f.buf.WriteByte('\n')
	f.n++
	if f.byReason == nil {
		f.byReason = map[string]int64{}
	}
	f.byReason[d.Reason]++
	return nil
}

// FinishBundle writes the bundle's file. A failure fails the bundle, so the
// runner retries it and no dead letter is lost.
func (f *WriteDeadLettersFn) FinishBundle(ctx context.Context) error {
	if f.n == 0 {
		return nil
	}
	name, err := DeadLetterFileName(f.Dir)
	if err != nil {
		return err
	}
	fs, err := filesystem.New(ctx, name)
	if err != nil {
		return fmt.Errorf("dead letter %s: %w", name, err)
	}
	defer fs.Close()
	w, err := fs.OpenWrite(ctx, name)
	if err != nil {
		return fmt.Errorf("dead letter %s: %w", name, err)
	}
	if _, err := w.Write(f.buf.Bytes()); err != nil {
		w.Close()
		return fmt.Errorf("dead letter %s: %w", name, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("dead letter %s: %w", name, err)
	}
	f.counter.Inc(ctx, f.n)
	for reason, n := range f.byReason {
		progress.AddDead(reason, n)
		delete(f.byReason, reason)
	}
	f.buf.Reset()
	f.n = 0
	return nil
}

// DeadLetterFileName returns a new, unique file name under dir.
func DeadLetterFileName(dir string) (string, error) {
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("dead letter name: %w", err)
	}
	return fmt.Sprintf("%s/deadletter-%s-%s.jsonl", strings.TrimRight(dir, "/"),
		time.Now().UTC().Format("20060102T150405.000"), hex.EncodeToString(r[:])), nil
}
