package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sensorpipe/sensorpipe/launch/parts"
	"github.com/sensorpipe/sensorpipe/pipelines"
	"github.com/sensorpipe/sensorpipe/schemas"
)

// matched is the files a glob matched and their bytes.
type matched struct {
	files int
	bytes int64
}

// checkInput fails early when the glob matches no file, and returns what
// it matched.
func checkInput(ctx context.Context, glob string) (matched, error) {
	files, err := parts.List(ctx, glob)
	if err != nil {
		return matched{}, err
	}
	if len(files) == 0 {
		return matched{}, fmt.Errorf("--input %s matches no file", glob)
	}
	return matched{files: len(files), bytes: parts.Total(files)}, nil
}

// planParts cuts a local batch's input into parts of about --local_part_mb
// each (launch/parts): of whole hours where its hours allow, and of
// shares of its identities where an hour, or hours that overlap, are
// larger. It says how it cut it. The line indexes that shares read go in
// a folder that done removes.
func planParts(ctx context.Context, cfg pipelines.Config, p plan) (cut []parts.Part, done func(), err error) {
	target := int64(p.localPartMB * 1e6)
	files, err := parts.List(ctx, p.batch.Input)
	if err != nil {
		return nil, nil, err
	}
	total := parts.Total(files)
	if target <= 0 || total <= target {
		return []parts.Part{{Bytes: total}}, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "sensorpipe-parts-")
	if err != nil {
		return nil, nil, fmt.Errorf("a folder for the input's line index (--local_part_mb=0 runs it as one job): %w", err)
	}
	done = func() { os.RemoveAll(dir) }
	began := time.Now()
	sc, err := parts.Scan(ctx, files, cfg.Spec, parts.ScanOptions{
		MaxLine: schemas.LineLimit(cfg.MaxLineBytes), IndexDir: dir, Every: p.progressInterval,
		Progress: func(read int64) {
			fmt.Fprintf(os.Stderr, "sensorpipe: scanning the input to cut it into parts: %.0f of %.0f MB\n", float64(read)/1e6, float64(total)/1e6)
		},
	})
	if err != nil {
		done()
		return nil, nil, fmt.Errorf("scan the input to cut it into parts (--local_part_mb=0 runs it as one job): %w", err)
	}
	hours := parts.Plan(files, sc.Spans, target)
	cut = hours
	if !sc.Mixed {
		cut = parts.Share(files, hours, sc.Index, target)
	}
	took := time.Since(began).Round(time.Millisecond)
	why := ""
	switch {
	case len(hours) > 1:
		why = fmt.Sprintf("it cuts into %d parts of whole hours", len(hours))
	case len(sc.Spans) <= 1:
		why = "its readings fall in one hour"
	default:
		why = fmt.Sprintf("its %d hours overlap throughout (it is not in event-time order), so no part of whole hours can be cut", len(sc.Spans))
	}
	note := ""
	switch {
	case sc.Mixed:
		note = "; its lines hold readings of several identities at once, so no part can be split by identity"
	case len(cut) > len(hours):
		note = fmt.Sprintf("; the parts over %g MB split into shares of their identities", p.localPartMB)
	}
	jobs := "one job"
	if len(cut) > 1 {
		jobs = fmt.Sprintf("%d jobs, one after another", len(cut))
	}
	fmt.Fprintf(os.Stderr, "sensorpipe: %.1f MB of input runs as %s (--local_part_mb=%g; scanned in %v): %s%s\n", float64(total)/1e6, jobs, p.localPartMB, took, why, note)
	return cut, done, nil
}
