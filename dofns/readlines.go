package dofns

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/schemas"
)

func init() {
	register.DoFn5x1[context.Context, *sdf.LockRTracker, fileio.ReadableFile, func(string, string), func(schemas.DeadLetter), error](&ReadLinesFn{})
	register.Emitter2[string, string]()
}

// splitBytes is the size of the blocks an uncompressed file is split into.
const splitBytes int64 = 64 << 20

// ReadLinesFn is a splittable DoFn that emits every line of a file as
// KV<path, line>. Uncompressed files split into 64 MiB blocks; compressed
// (.gz) files are read whole by one worker.
//
// Beam's textio is not used because its restriction is the file's stored
// size: on a .gz file it stops after that many decompressed bytes and drops
// the rest of the file without an error. A file that cannot be read to the
// end is dead-lettered (reason malformed) with the line it stopped at,
// rather than failing the job.
type ReadLinesFn struct {
	ctrs counters
}

func compressed(path string) bool {
	return strings.HasSuffix(path, ".gz") || strings.HasSuffix(path, ".gzip")
}

// CreateInitialRestriction covers the file: its bytes, or for a compressed
// file a single unit claimed by reading it all.
func (fn *ReadLinesFn) CreateInitialRestriction(file fileio.ReadableFile) offsetrange.Restriction {
	if compressed(file.Metadata.Path) {
		return offsetrange.Restriction{Start: 0, End: 1}
	}
	return offsetrange.Restriction{Start: 0, End: file.Metadata.Size}
}

// SplitRestriction splits uncompressed files into blocks.
func (fn *ReadLinesFn) SplitRestriction(file fileio.ReadableFile, rest offsetrange.Restriction) []offsetrange.Restriction {
	if compressed(file.Metadata.Path) {
		return []offsetrange.Restriction{rest}
	}
	return rest.SizedSplits(splitBytes)
}

// RestrictionSize is the restriction's byte count.
func (fn *ReadLinesFn) RestrictionSize(file fileio.ReadableFile, rest offsetrange.Restriction) float64 {
	if compressed(file.Metadata.Path) {
		return float64(file.Metadata.Size)
	}
	return rest.Size()
}

// CreateTracker wraps an offset-range tracker.
func (fn *ReadLinesFn) CreateTracker(rest offsetrange.Restriction) *sdf.LockRTracker {
	return sdf.NewLockRTracker(offsetrange.NewTracker(rest))
}

// ProcessElement emits the lines that start inside the restriction.
func (fn *ReadLinesFn) ProcessElement(ctx context.Context, rt *sdf.LockRTracker, file fileio.ReadableFile, emit func(string, string), dead func(schemas.DeadLetter)) error {
	path := file.Metadata.Path
	rest, ok := rt.GetRestriction().(offsetrange.Restriction)
	if !ok {
		return fmt.Errorf("read %s: restriction %T is not an offset range", path, rt.GetRestriction())
	}
	fd, err := file.Open(ctx)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer fd.Close()
	rd := bufio.NewReaderSize(fd, 1<<20)
	emitLine := func(line string) {
		line = strings.TrimSuffix(line, "\n")
		emit(path, strings.TrimSuffix(line, "\r"))
	}
	lineNo := 0
	unreadable := func(err error) {
		// The rest of the file is one rejected record in the ledger.
		fn.ctrs.inc(ctx, ledger.InputRecords, 1)
		fn.ctrs.inc(ctx, ledger.InputRejected, 1)
		dead(deadLetter(schemas.SinkParse, "", path, fmt.Errorf("%w: %s could not be read past line %d: %w", schemas.ErrMalformed, path, lineNo, err)))
	}
	if compressed(path) {
		if !rt.TryClaim(rest.Start) {
			return nil
		}
		for {
			line, err := rd.ReadString('\n')
			if len(line) > 0 {
				lineNo++
				emitLine(line)
			}
			if err == io.EOF {
				return nil
			}
			if err != nil {
				unreadable(err)
				return nil
			}
		}
	}
	pos := rest.Start
	if pos > 0 {
		// Skip the line that started before the restriction: it belongs to
		// the previous block.
		if _, err := rd.Discard(int(pos - 1)); err != nil {
			return fmt.Errorf("seek %s to %d: %w", path, pos-1, err)
		}
		skipped, err := rd.ReadString('\n')
		if err == io.EOF {
			rt.TryClaim(rest.End)
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		pos += int64(len(skipped)) - 1
	}
	for rt.TryClaim(pos) {
		line, err := rd.ReadString('\n')
		if len(line) > 0 {
			lineNo++
			emitLine(line)
		}
		if err == io.EOF {
			rt.TryClaim(rest.End)
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		pos += int64(len(line))
	}
	return nil
}
