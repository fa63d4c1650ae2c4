package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/dofns/fileio"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/launch/parts"
	"github.com/sensorpipe/sensorpipe/pipelines"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
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

// planTableParts cuts a local batch of CSV, Parquet or Avro files into
// parts of about --local_part_mb each, weighed as the JSON objects their
// rows are read as (launch/parts.Tables): Parquet files by row group, Avro
// files by block, CSV files by byte range (their rows at line starts). It
// says how it cut them.
func planTableParts(ctx context.Context, cfg pipelines.Config, p plan) ([]parts.Part, error) {
	target := int64(p.localPartMB * 1e6)
	files, err := parts.List(ctx, p.batch.Input)
	if err != nil {
		return nil, err
	}
	total := parts.Total(files)
	format := p.batch.Format
	if target <= 0 {
		return []parts.Part{{Bytes: total}}, nil
	}
	if !p.batch.MergeStored && total > 0 {
		// A part of row groups may hold part of an hour, which only the
		// merge with the hours stored before it completes.
		fmt.Fprintf(os.Stderr, "sensorpipe: %.1f MB of %s input runs as one job (--local_part_mb=%g): its parts may split an hour, and --merge_stored=false would let a part overwrite what the one before wrote of it\n",
			float64(total)/1e6, format, p.localPartMB)
		return []parts.Part{{Bytes: total}}, nil
	}
	began := time.Now()
	tables := make([]parts.TableFile, 0, len(files))
	var blocks int
	for _, f := range files {
		tf := parts.TableFile{File: f, SliceRows: format == fileio.FormatParquet}
		if tf.Blocks, err = fileio.Blocks(ctx, f.Path, format); err != nil {
			return nil, fmt.Errorf("list the blocks of %s to cut the input into parts (--local_part_mb=0 runs it as one job): %w", f.Path, err)
		}
		blocks += len(tf.Blocks)
		s, err := fileio.SampleRows(ctx, f.Path, format, cfg.Spec, tf.Blocks)
		if err != nil {
			return nil, fmt.Errorf("weigh the rows of %s to cut the input into parts (--local_part_mb=0 runs it as one job): %w", f.Path, err)
		}
		if s.Rows > 0 && s.JSONBytes > 0 {
			tf.RowBytes = float64(s.JSONBytes) / float64(s.Rows)
			tf.BytesPerRow = float64(s.FileBytes) / float64(s.Rows)
		} else {
			tf.Blocks = nil // no row to weigh: the file counts as its bytes
		}
		tables = append(tables, tf)
	}
	cut := parts.Tables(tables, target)
	var weight int64
	for _, c := range cut {
		weight += c.Bytes
	}
	spans, err := tableHours(ctx, cfg, p, cut)
	if err != nil {
		return nil, err
	}
	blocked := len(cut)
	cut = parts.TableShares(tables, cut, spans, target)
	jobs := "one job"
	if len(cut) > 1 {
		jobs = fmt.Sprintf("%d jobs, one after another", len(cut))
	}
	how := map[string]string{
		fileio.FormatParquet: fmt.Sprintf("by row group (%d row groups; a row group heavier than a part in slices of its rows)", blocks),
		fileio.FormatAvro:    fmt.Sprintf("by block (%d blocks)", blocks),
		fileio.FormatCSV:     "by byte range, each part's rows those that start in it",
	}[format]
	why := "it cuts " + how
	if blocked == 1 {
		why = fmt.Sprintf("its rows weigh %.1f MB as JSON", float64(weight)/1e6)
		if weight > target {
			why += ", and no block boundary cuts it smaller"
		}
	}
	if slices.ContainsFunc(cut, func(c parts.Part) bool { return c.Shares > 1 }) {
		why += "; the parts that an hour spans three or more of, or heavier than a part, are read in shares of their identities (each reads their rows and keeps its identities' readings)"
	}
	if len(cut) == 1 && weight <= target {
		// It fits in one part: nothing to say, as with JSON lines.
		return cut, nil
	}
	fmt.Fprintf(os.Stderr, "sensorpipe: %.1f MB of %s input (%.1f MB of rows as JSON) runs as %s (--local_part_mb=%g; weighed in %v): %s\n",
		float64(total)/1e6, format, float64(weight)/1e6, jobs, p.localPartMB, time.Since(began).Round(time.Millisecond), why)
	return cut, nil
}

// tableHours reads the rows of a table-file plan's parts once, when there
// are three or more, for the first and last part each hour's readings lie
// in (launch/parts.TableShares), and says so every progress interval.
func tableHours(ctx context.Context, cfg pipelines.Config, p plan, cut []parts.Part) (map[int64]parts.PartSpan, error) {
	if len(cut) < 3 {
		return nil, nil
	}
	spans := map[int64]parts.PartSpan{}
	last := time.Now()
	for i, c := range cut {
		err := fileio.RowTimes(ctx, p.batch.Format, cfg.Spec, c.Ranges, func(ms int64) {
			h := hours.WindowStart(ms, time.Hour)
			s, ok := spans[h]
			if !ok {
				s.First = i
			}
			s.Last = i
			spans[h] = s
		})
		if err != nil {
			return nil, fmt.Errorf("read the input's rows for their hours, to cut it into parts (--local_part_mb=0 runs it as one job): %w", err)
		}
		if p.progressInterval > 0 && time.Since(last) > p.progressInterval {
			last = time.Now()
			fmt.Fprintf(os.Stderr, "sensorpipe: reading the input's rows for their hours, to cut it into parts: %d of %d parts\n", i+1, len(cut))
		}
	}
	return spans, nil
}

// storedPartPolicy bounds the calls that size a stored table's parts.
var storedPartPolicy = retry.Policy{AttemptTimeout: time.Minute, Deadline: 5 * time.Minute, MaxAttempts: 5}

// planBigtableParts cuts the stored Bigtable table a local
// --source=bigtable batch reads into key ranges of about --local_part_mb
// each (launch/parts.Keys), at the sample row keys Bigtable gives with
// their offsets. It says how it cut it.
func planBigtableParts(ctx context.Context, rc *bigtableio.ReadConfig, p plan) ([]parts.Part, error) {
	target := int64(p.localPartMB * 1e6)
	if target <= 0 {
		return []parts.Part{{}}, nil
	}
	rb, err := hours.NewReadBack(rc.Spec.Spec)
	if err != nil {
		return nil, err
	}
	var samples []bigtableio.KeySample
	err = retry.Do(ctx, storedPartPolicy, func(ctx context.Context) error {
		samples, err = bigtableio.SampleRowKeyOffsets(ctx, rc.Project, rc.Instance, rb.Table())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("--from_table=%s: size it to cut it into parts (--local_part_mb=0 runs it as one job): %w", rb.Table(), err)
	}
	weight, note := weighStored(ctx, rc, rb, samples, target)
	var weighed int64
	for i := range samples {
		samples[i].Offset = int64(float64(samples[i].Offset) * weight)
		weighed = max(weighed, samples[i].Offset)
	}
	sampled, size := len(samples), target
	if weighed > target {
		// A part of whole rows holds whole sensor-hours, of which prism
		// holds more a byte than of a part of whole hours: such parts are
		// half the size, as shares of identities are (parts.ShareDivisor).
		// Bigtable's samples are a key a tablet: chunks heavier than that
		// are cut at row keys from a keys-only scan.
		size = max(target/parts.ShareDivisor, 1)
		if samples, err = refineSamples(ctx, rc, rb.Table(), samples, size); err != nil {
			return nil, err
		}
	}
	cut := parts.Keys(samples, size)
	var total int64
	for _, c := range cut {
		total += c.Bytes
	}
	jobs, why := "one job", fmt.Sprintf("its %d sample row keys cut no smaller range", sampled)
	if len(cut) > 1 {
		jobs = fmt.Sprintf("%d jobs, one after another", len(cut))
		why = fmt.Sprintf("it cuts into %d key ranges at its sample row keys (%d in all) and, within chunks between them heavier than half a part, at row keys read without their values; each range holds whole sensor-hours, so it is half a part, as a share of identities is", len(cut), sampled)
	}
	if total <= target {
		// It fits in one part: nothing to say, as with JSON lines.
		return cut, nil
	}
	fmt.Fprintf(os.Stderr, "sensorpipe: table %s (about %.1f MB of readings as JSON, %s) runs as %s (--local_part_mb=%g): %s\n", rb.Table(), float64(total)/1e6, note, jobs, p.localPartMB, why)
	return cut, nil
}

// refineSamples adds row keys inside the sample chunks of table heavier
// than size (parts.Refine), each chunk's keys read without their values.
func refineSamples(ctx context.Context, rc *bigtableio.ReadConfig, table string, samples []bigtableio.KeySample, size int64) ([]bigtableio.KeySample, error) {
	r, err := bigtableio.OpenReader(ctx, rc.Project, rc.Instance)
	if err != nil {
		return nil, fmt.Errorf("--from_table=%s: a reader to cut it into parts: %w", table, err)
	}
	defer r.Close()
	out, err := parts.Refine(samples, size, func(start, end string) ([]string, error) {
		var keys []string
		err := retry.Do(ctx, storedPartPolicy, func(ctx context.Context) error {
			keys = keys[:0]
			return r.RowKeys(ctx, table, start, end, func(k string) { keys = append(keys, k) })
		})
		return keys, err
	})
	if err != nil {
		return nil, fmt.Errorf("--from_table=%s: read its row keys to cut it into parts (--local_part_mb=0 runs it as one job): %w", table, err)
	}
	return out, nil
}

// weighBytes is the JSON a stored table's weighing reads at least before
// it gives up on a first chunk too heavy to weigh.
const weighBytes = 8 << 20

// weighStored is what a byte of the stored table weighs as the JSON lines
// of its readings, which a part's size counts (the sample offsets count
// stored bytes, which differ by store: the emulator counts cell values
// alone): the readings of the rows before the first sample key, rendered,
// over that key's offset. A first chunk heavier than two parts and than
// weighBytes (so that a small table is weighed whatever its parts), or
// one that cannot be read, is not weighed: a stored byte then counts as
// one. note says which.
func weighStored(ctx context.Context, rc *bigtableio.ReadConfig, rb *hours.ReadBack, samples []bigtableio.KeySample, target int64) (weight float64, note string) {
	first := bigtableio.KeySample{}
	for _, s := range samples {
		if s.Key != "" && s.Offset > 0 && (first.Key == "" || s.Key < first.Key) {
			first = s
		}
	}
	unweighed := "its stored bytes counted as they are"
	if first.Key == "" {
		return 1, unweighed
	}
	r, err := bigtableio.OpenReader(ctx, rc.Project, rc.Instance)
	if err != nil {
		return 1, unweighed
	}
	defer r.Close()
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var json int64
	over := false
	err = r.ReadRows(rctx, rb.Table(), []rowkey.RowRange{{Start: "", End: first.Key}}, rb.Families(), 0, math.MaxInt64, func(row hours.ReadRow) {
		if over {
			return
		}
		recs, _ := rb.Records([]hours.ReadRow{row}, "", 0, math.MaxInt64)
		for i := range recs {
			json += int64(len(recs[i].Raw)) + 1
		}
		if json > max(2*target, weighBytes) {
			over = true
			cancel()
		}
	})
	if over || err != nil || json == 0 {
		return 1, unweighed
	}
	w := float64(json) / float64(first.Offset)
	return w, fmt.Sprintf("a stored byte weighing %.2f bytes of JSON in its first %.1f MB", w, float64(first.Offset)/1e6)
}

// planBigQueryParts cuts the BigQuery table a local --source=bigquery
// batch reads into event-time ranges of whole hours of about
// --local_part_mb each (launch/parts.Hours), each read with a row
// restriction on its partitioning column: sized by the table's bytes
// (tables.get) over its readings' time span (--from_time and --to_time
// where given, else the first and last event time, from a query). It says
// how it cut it.
func planBigQueryParts(ctx context.Context, cfg pipelines.Config, src *bigqueryio.Config, p plan) ([]parts.Part, error) {
	target := int64(p.localPartMB * 1e6)
	whole := []parts.Part{{FromMs: src.FromMs, ToMs: src.ToMs}}
	if target <= 0 {
		return whole, nil
	}
	sctx, cancel := context.WithTimeout(ctx, max(p.startupTimeout, time.Minute))
	defer cancel()
	span, err := bigqueryio.Span(sctx, *src, cfg.Spec.Spec)
	if err != nil {
		return nil, fmt.Errorf("--from_table: size it to cut it into parts (--local_part_mb=0 runs it as one job): %w", err)
	}
	ref := fmt.Sprintf("%s:%s.%s", src.Project, src.Dataset, src.Table)
	say := func(jobs, why string) {
		fmt.Fprintf(os.Stderr, "sensorpipe: table %s (%.1f MB, %d rows) runs as %s (--local_part_mb=%g): %s\n", ref, float64(span.Bytes)/1e6, span.Rows, jobs, p.localPartMB, why)
	}
	switch {
	case span.Empty:
		say("one job", "no row has an event time")
		return whole, nil
	case span.NoTime > 0:
		say("one job", fmt.Sprintf("%d rows have no event time, and only a read without a row restriction reads them (to dead-letter them)", span.NoTime))
		return whole, nil
	}
	first, last := span.FirstMs, span.LastMs
	bytes := span.Bytes
	if src.FromMs != 0 || src.ToMs != 0 {
		// Of the table's bytes, the share of its time span the bounds
		// keep, assuming the readings spread evenly over it.
		lo, hi := first, last
		if src.FromMs != 0 {
			lo = max(lo, src.FromMs)
		}
		if src.ToMs != 0 {
			hi = min(hi, src.ToMs-1)
		}
		if hi < lo {
			say("one job", "no reading falls between --from_time and --to_time")
			return whole, nil
		}
		if last > first {
			bytes = int64(float64(bytes) * float64(hi-lo+1) / float64(last-first+1))
		}
		first, last = lo, hi
	}
	cut := parts.Hours(src.FromMs, src.ToMs, first, last, bytes, target)
	if len(cut) == 1 {
		if bytes > target {
			say("one job", "its readings fall in one hour")
		}
		return cut, nil
	}
	per := (cut[0].ToMs - max(cut[0].FromMs, hourFloor(first))) / int64(time.Hour/time.Millisecond)
	hoursEach := fmt.Sprintf("%d whole hours", per)
	if per == 1 {
		hoursEach = "one whole hour"
	}
	say(fmt.Sprintf("%d jobs, one after another", len(cut)), fmt.Sprintf("it cuts by event time into parts of %s (of %s to %s), each read with a row restriction",
		hoursEach, time.UnixMilli(first).UTC().Format(time.RFC3339), time.UnixMilli(last).UTC().Format(time.RFC3339)))
	return cut, nil
}

// hourFloor is the start of the hour ms falls in.
func hourFloor(ms int64) int64 {
	h := int64(time.Hour / time.Millisecond)
	return ms - ((ms%h)+h)%h
}

// partLine says what one part reads, for its progress line; format is
// the batch's input format.
func partLine(part parts.Part, format string) string {
	switch {
	case part.Keys != (bigtableio.KeyRange{}):
		end := fmt.Sprintf("%q", part.Keys.End)
		if part.Keys.End == "" {
			end = "the table's end"
		}
		return fmt.Sprintf("the rows from key %q to %s (about %.1f MB stored)", part.Keys.Start, end, float64(part.Bytes)/1e6)
	case part.FromMs != 0 || part.ToMs != 0:
		at := func(ms int64, none string) string {
			if ms == 0 {
				return none
			}
			return time.UnixMilli(ms).UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("the readings from %s to %s (about %.1f MB)", at(part.FromMs, "the first"), at(part.ToMs, "the last"), float64(part.Bytes)/1e6)
	case len(part.Ranges) == 1 && part.Ranges[0].RowTo > 0:
		return fmt.Sprintf("rows %d to %d of a row group of %s (about %.1f MB as JSON)", part.Ranges[0].RowFrom, part.Ranges[0].RowTo,
			part.Ranges[0].Path, float64(part.Bytes)/1e6)
	case part.Rows > 0:
		return fmt.Sprintf("%d rows (about %.1f MB as JSON)", part.Rows, float64(part.Bytes)/1e6)
	case fileio.IsTableFormat(format):
		return fmt.Sprintf("the rows of %.1f MB of input (about %.1f MB as JSON)", float64(rangeBytes(part.Ranges))/1e6, float64(part.Bytes)/1e6)
	}
	return fmt.Sprintf("%.1f MB of input", float64(part.Bytes)/1e6)
}

// rangeBytes is the bytes of the files' ranges.
func rangeBytes(ranges []fileio.FileRange) int64 {
	var n int64
	for _, r := range ranges {
		n += r.End - r.Start
	}
	return n
}
