package parts

import (
	"slices"
	"strings"
	"time"

	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
)

// A stored table (--source=bigtable or bigquery) is cut into parts too,
// each read by a job of its own: prism keeps every element of a stage in
// memory, so a table read as one job holds all its readings at once.
// Any partition of the readings gives the one job's result, because a
// part merges with the hours the parts before it stored (a batch may split
// an hour: docs/guide/replay.md); parts that hold whole hours only save
// that merge's work.

// Keys cuts a Bigtable table into key ranges of about target bytes each,
// at its sample row keys (bigtableio.SampleRowKeyOffsets: each key with
// the bytes of the table before it, the last one with an empty key, or
// the last key, at the table's end). A part ends at the last sample key
// within target bytes of its start or, when there is none, at the first
// after it. Under a spec whose row is a sensor-hour, a part of whole rows
// holds whole hours. With target <= 0, a table of at most target bytes,
// or no sample key inside the table, it returns one part: the whole table.
func Keys(samples []bigtableio.KeySample, target int64) []Part {
	cuts, total := sampleCuts(samples)
	whole := []Part{{Bytes: total}}
	if target <= 0 || total <= target {
		return whole
	}
	var out []Part
	start, from := "", int64(0)
	var prev *bigtableio.KeySample
	cut := func(s bigtableio.KeySample) {
		out = append(out, Part{Keys: bigtableio.KeyRange{Start: start, End: s.Key}, Bytes: s.Offset - from})
		start, from = s.Key, s.Offset
	}
	for i := range cuts {
		c := cuts[i]
		if c.Offset-from > target {
			if prev != nil && prev.Offset > from {
				cut(*prev)
			}
			if c.Offset-from > target && c.Offset < total {
				cut(c)
			}
		}
		prev = &cuts[i]
	}
	if total-from > target && prev != nil && prev.Offset > from && prev.Offset < total {
		cut(*prev)
	}
	if len(out) == 0 {
		return whole
	}
	return append(out, Part{Keys: bigtableio.KeyRange{Start: start}, Bytes: total - from})
}

// sampleCuts is the sample keys inside the table (those with a key), in
// key order, and the table's size: the largest offset.
func sampleCuts(samples []bigtableio.KeySample) (cuts []bigtableio.KeySample, total int64) {
	for _, s := range samples {
		total = max(total, s.Offset)
		if s.Key != "" {
			cuts = append(cuts, s)
		}
	}
	slices.SortFunc(cuts, func(a, b bigtableio.KeySample) int { return strings.Compare(a.Key, b.Key) })
	return cuts, total
}

// Refine adds to a table's sample row keys (as Keys takes them) keys
// inside each chunk between two samples that weighs more than size:
// Bigtable samples about one key a tablet (the emulator one row key in a
// hundred), which can hold many parts. keys lists the row keys of a
// chunk, [start, end) (end "": to the table's end); each of its rows is
// given an even share of the chunk's bytes, and a row key is kept about
// every size/4 bytes. Chunks within size are not listed.
func Refine(samples []bigtableio.KeySample, size int64, keys func(start, end string) ([]string, error)) ([]bigtableio.KeySample, error) {
	if size <= 0 {
		return samples, nil
	}
	cuts, total := sampleCuts(samples)
	out := slices.Clone(samples)
	start, from := "", int64(0)
	chunk := func(end string, to int64) error {
		bytes := to - from
		if bytes <= size {
			return nil
		}
		rows, err := keys(start, end)
		if err != nil {
			return err
		}
		step := max(size/4, 1)
		next := from + step
		for i := 1; i < len(rows); i++ { // the chunk's first row starts at its start already
			if off := from + bytes*int64(i)/int64(len(rows)); off >= next {
				out = append(out, bigtableio.KeySample{Key: rows[i], Offset: off})
				next = off + step
			}
		}
		return nil
	}
	for _, c := range cuts {
		if c.Offset > from {
			if err := chunk(c.Key, c.Offset); err != nil {
				return nil, err
			}
		}
		start, from = c.Key, max(from, c.Offset)
	}
	if err := chunk("", total); err != nil {
		return nil, err
	}
	return out, nil
}

// Hours cuts a table's readings, whose event times fall in [firstMs,
// lastMs] and which weigh bytes, into parts of whole hours of about
// target bytes each, assuming the bytes spread evenly over the hours: a
// BigQuery table read with a row restriction on its partitioning column.
// The first part has no lower bound but fromMs, and the last no upper
// bound but toMs (the run's --from_time and --to_time, 0 for none), so
// that the parts together read what one job would. With target <= 0, bytes
// of at most target, or one hour, it returns one part.
func Hours(fromMs, toMs, firstMs, lastMs, bytes, target int64) []Part {
	whole := []Part{{FromMs: fromMs, ToMs: toMs, Bytes: bytes}}
	const hour = int64(time.Hour / time.Millisecond)
	lo := floorHour(firstMs)
	hi := floorHour(lastMs) + hour
	hours := (hi - lo) / hour
	if target <= 0 || bytes <= target || hours <= 1 || lastMs < firstMs {
		return whole
	}
	n := min((bytes+target-1)/target, hours)
	per := (hours + n - 1) / n
	var out []Part
	for at := lo; at < hi; at += per * hour {
		end := min(at+per*hour, hi)
		p := Part{FromMs: at, ToMs: end, Bytes: bytes * (end - at) / (hi - lo)}
		if at == lo {
			p.FromMs = fromMs
		}
		if end == hi {
			p.ToMs = toMs
		}
		out = append(out, p)
	}
	if len(out) < 2 {
		return whole
	}
	return out
}

// floorHour is the start of the hour ms falls in.
func floorHour(ms int64) int64 {
	const hour = int64(time.Hour / time.Millisecond)
	q := ms / hour
	if ms%hour < 0 {
		q--
	}
	return q * hour
}
