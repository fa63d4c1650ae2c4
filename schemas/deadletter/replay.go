package deadletter

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
)

// A record's source says where it came from. Besides a file or a
// subscription, it can carry what a dead letter needs, after a separator
// (sourceSep) that names in files and subscriptions do not hold:
//
//   - a line's number (or byte offset) in its file (LineSource), read by
//     ReadLinesFn and stripped by the parse, so readings keep the file's
//     name alone;
//   - the dead letter a replayed record came from (ReplaySource), so that
//     a replayed record that fails again keeps its earlier failures, and
//     so that a write_failed record replays to the sink that failed it;
//   - a rollup's sensor-hour (RollupSource), so that its dead letter
//     carries the identity and hour as data.
//
// NewDeadLetter reads them back into the dead letter's fields.
const sourceSep = "\x1e"

// The prefixes of the sources that carry a dead letter's context.
const (
	replayPrefix  = "replay" + sourceSep
	rebuildPrefix = "rebuild" + sourceSep
	rollupPrefix  = "rollup" + sourceSep
)

// LineSource is the source of line number line (from 1; 0 when not
// known) starting at byte offset of the file path.
func LineSource(path string, line, offset int64) string {
	if line > 0 {
		return path + sourceSep + "L" + strconv.FormatInt(line, 10)
	}
	return path + sourceSep + "@" + strconv.FormatInt(offset, 10)
}

// SourcePath is source without a line's place (LineSource): the file, the
// subscription, or a replay's or rollup's context as it is.
func SourcePath(source string) string {
	if strings.HasPrefix(source, replayPrefix) || strings.HasPrefix(source, rebuildPrefix) || strings.HasPrefix(source, rollupPrefix) {
		return source
	}
	if i := strings.LastIndex(source, sourceSep); i >= 0 {
		return source[:i]
	}
	return source
}

// RowSource is the source of a row of a Parquet or Avro file: its path
// and its place as two numbered parts, "row group 2, row 17" for
// RowSource(path, "row group", 2, "row", 17), which the dead letter's Row
// gives. A file reader calls it for every row: it builds the text in one
// allocation.
func RowSource(path, outer string, n int64, inner string, m int64) string {
	var num [20]byte
	var b strings.Builder
	b.Grow(len(path) + len(sourceSep) + 1 + len(outer) + len(inner) + 44)
	b.WriteString(path)
	b.WriteString(sourceSep)
	b.WriteByte('R')
	b.WriteString(outer)
	b.WriteByte(' ')
	b.Write(strconv.AppendInt(num[:0], n, 10))
	b.WriteString(", ")
	b.WriteString(inner)
	b.WriteByte(' ')
	b.Write(strconv.AppendInt(num[:0], m, 10))
	return b.String()
}

// splitLine splits a LineSource into its path, line and offset.
func splitLine(source string) (path string, line, offset int64) {
	i := strings.LastIndex(source, sourceSep)
	if i < 0 || i+2 > len(source) {
		return source, 0, 0
	}
	n, err := strconv.ParseInt(source[i+2:], 10, 64)
	if err != nil {
		return source, 0, 0
	}
	switch source[i+1] {
	case 'L':
		return source[:i], n, 0
	case '@':
		return source[:i], 0, n
	}
	return source, 0, 0
}

// provenance fills the dead letter's place and history from the record's
// source (see LineSource, ReplaySource, RollupSource).
func (d *DeadLetter) provenance(source string) {
	var ctx string
	switch {
	case strings.HasPrefix(source, replayPrefix):
		ctx = source[len(replayPrefix):]
	case strings.HasPrefix(source, rebuildPrefix):
		ctx = source[len(rebuildPrefix):]
	case strings.HasPrefix(source, rollupPrefix):
		var hr rollupHour
		if json.Unmarshal([]byte(source[len(rollupPrefix):]), &hr) == nil {
			d.Source, d.Identity, d.WindowStart, d.WindowEnd = "rollup", hr.Identity, hr.Start, hr.End
		}
		return
	default:
		if i := strings.LastIndex(source, sourceSep); i >= 0 && strings.HasPrefix(source[i+1:], "R") {
			d.Source, d.Row = source[:i], source[i+2:]
		} else if i >= 0 {
			d.Source, d.Line, d.Offset = splitLine(source)
		}
		return
	}
	var prior DeadLetter
	if json.Unmarshal([]byte(ctx), &prior) != nil {
		return
	}
	d.Source, d.Line, d.Offset = prior.Source, prior.Line, prior.Offset
	if d.Reason == schemas.ErrTooLarge.Error() {
		// Still too large: it keeps what names it in its file.
		d.Length, d.SHA256 = prior.Length, prior.SHA256
	}
	d.Identity, d.WindowStart, d.WindowEnd = prior.Identity, prior.WindowStart, prior.WindowEnd
	d.Previous = append(append([]PriorFailure(nil), prior.Previous...),
		PriorFailure{Reason: prior.Reason, Sink: prior.Sink, Error: prior.Error, Time: prior.Time})
}

// ReadBackSource is the source of the readings a ReadBack rebuilds from
// Bigtable table.
func ReadBackSource(table string) string { return "bigtable:" + table + " (read back)" }

// IsReadBack reports whether r was rebuilt by a ReadBack rather than read
// from the input.
func IsReadBack(r *schemas.Record) bool {
	return strings.HasPrefix(r.Source, "bigtable:") && strings.HasSuffix(r.Source, " (read back)")
}

// rollupHour is a rollup's sensor-hour as a RollupSource carries it.
type rollupHour struct {
	Identity map[string]string `json:"identity"`
	Start    string            `json:"window_start"`
	End      string            `json:"window_end"`
}

// HourSource is the source of the writes of identity's hour [startMs,
// endMs): RollupSource's encoding.
func HourSource(s *schemas.Spec, identity []schemas.Value, startMs, endMs int64) string {
	hr := rollupHour{Identity: map[string]string{},
		Start: time.UnixMilli(startMs).UTC().Format(time.RFC3339), End: time.UnixMilli(endMs).UTC().Format(time.RFC3339)}
	for i, name := range s.Identity {
		if i < len(identity) {
			hr.Identity[name] = string(schemas.AppendText(nil, identity[i]))
		}
	}
	b, _ := json.Marshal(hr)
	return rollupPrefix + string(b)
}

// ReplaySource is the source of a record replayed from dead letter d: d
// without its payload.
func ReplaySource(d DeadLetter) string {
	d.Payload, d.PayloadBase64 = "", ""
	b, _ := json.Marshal(d)
	return replayPrefix + string(b)
}

// rebuildSource is the source of a rebuild probe (RebuildProbe).
func rebuildSource(d DeadLetter) string {
	d.Payload, d.PayloadBase64 = "", ""
	b, _ := json.Marshal(d)
	return rebuildPrefix + string(b)
}

// IsRebuild reports whether r is a rebuild probe (RebuildProbe), not a
// reading.
func IsRebuild(r *schemas.Record) bool { return strings.HasPrefix(r.Source, rebuildPrefix) }

// SinkSet is a set of the write sinks, as a replay restricts them.
type SinkSet uint8

// The write sinks of a SinkSet.
const (
	SinkSetBigtable SinkSet = 1 << iota
	SinkSetBigQuery
	SinkSetBigQueryRollups
	// AllSinks is every write sink: a record that is not a replay of a
	// write's dead letter.
	AllSinks = SinkSetBigtable | SinkSetBigQuery | SinkSetBigQueryRollups
)

// Has reports whether the set holds sink (SinkBigtable, SinkBigQuery,
// SinkBigQueryRollups).
func (s SinkSet) Has(sink string) bool { return s&sinkBit(sink) != 0 }

func sinkBit(sink string) SinkSet {
	switch sink {
	case SinkBigtable:
		return SinkSetBigtable
	case SinkBigQuery:
		return SinkSetBigQuery
	case SinkBigQueryRollups:
		return SinkSetBigQueryRollups
	}
	return 0
}

// ReplaySinks is the sinks record r may be written to: the one whose
// write failed when it is a replay of a write's dead letter (a record the
// other stores took already), else all.
func ReplaySinks(r *schemas.Record) SinkSet {
	var ctx string
	switch {
	case strings.HasPrefix(r.Source, replayPrefix):
		ctx = r.Source[len(replayPrefix):]
	case strings.HasPrefix(r.Source, rebuildPrefix):
		ctx = r.Source[len(rebuildPrefix):]
	default:
		return AllSinks
	}
	var prior struct {
		Sink string `json:"sink"`
	}
	if json.Unmarshal([]byte(ctx), &prior) != nil {
		return AllSinks
	}
	if b := sinkBit(prior.Sink); b != 0 {
		return b
	}
	return AllSinks
}

// IsReplay reports whether r was replayed from a dead letter.
func IsReplay(r *schemas.Record) bool {
	return strings.HasPrefix(r.Source, replayPrefix) || strings.HasPrefix(r.Source, rebuildPrefix)
}

// ParseEnvelope reads one dead letter as written (one JSON object, the
// fields of DeadLetter). Its sink must be one of Sinks, or empty where its
// reason names the stage (every reason but write_failed, which needs the
// sink whose write failed): an empty sink is filled in, window for
// too_late and parse for the others. An envelope that is not one, has no
// reason, has a sink that names no sink, or whose payload_base64 does not
// decode is an error wrapping ErrMalformed.
func ParseEnvelope(line []byte) (DeadLetter, error) {
	var d DeadLetter
	if err := json.Unmarshal(line, &d); err != nil {
		return d, fmt.Errorf("%w: not a dead-letter record: %w", schemas.ErrMalformed, err)
	}
	if d.Reason == "" {
		return d, fmt.Errorf("%w: not a dead-letter record: it needs a reason", schemas.ErrMalformed)
	}
	switch {
	case d.Sink == "" && d.Reason == schemas.ErrWriteFailed.Error():
		return d, fmt.Errorf("%w: dead letter with reason write_failed and no sink: give the sink whose write failed (%s)", schemas.ErrMalformed, strings.Join([]string{SinkBigtable, SinkBigQuery, SinkBigQueryRollups}, ", "))
	case d.Sink == "" && d.Reason == schemas.ErrTooLate.Error():
		d.Sink = SinkWindow
	case d.Sink == "":
		d.Sink = SinkParse
	case !slices.Contains(Sinks, d.Sink):
		return d, fmt.Errorf("%w: dead letter sink %q names no sink: use %s, or leave it empty for a reason other than write_failed", schemas.ErrMalformed, d.Sink, strings.Join(Sinks, ", "))
	}
	if d.PayloadBase64 != "" {
		if _, err := base64.StdEncoding.DecodeString(d.PayloadBase64); err != nil {
			return d, fmt.Errorf("%w: dead letter payload_base64: %w", schemas.ErrMalformed, err)
		}
	}
	if d.IsRollup() {
		if _, err := time.Parse(time.RFC3339, d.WindowStart); err != nil {
			return d, fmt.Errorf("%w: rollup dead letter window_start: %w", schemas.ErrMalformed, err)
		}
	}
	return d, nil
}

// IsRollup reports whether d is a rollup's dead letter, which names its
// sensor-hour rather than carrying a reading.
func (d DeadLetter) IsRollup() bool { return d.WindowStart != "" && len(d.Identity) > 0 }

// RebuildProbe is the record that makes a batch rebuild the sensor-hour
// a rollup's dead letter names: no reading, its event time the hour's
// start, keyed by the identity. The batch reads the hour back and writes
// the rollup again, to the sink that failed it only.
func RebuildProbe(s *schemas.Spec, d DeadLetter) (key string, r schemas.Record, err error) {
	start, err := time.Parse(time.RFC3339, d.WindowStart)
	if err != nil {
		return "", r, fmt.Errorf("%w: rollup dead letter window_start: %w", schemas.ErrMalformed, err)
	}
	r = schemas.Record{Values: make([]schemas.Value, s.NumValues()), EventMs: start.UnixMilli(), Source: rebuildSource(d)}
	texts := make([]string, len(s.Identity))
	for i, name := range s.Identity {
		t, ok := d.Identity[name]
		if !ok {
			return "", r, fmt.Errorf("%w: rollup dead letter: identity lacks %s (spec %s)", schemas.ErrMalformed, name, s.Name)
		}
		texts[i] = t
	}
	return strings.Join(texts, "\x1f"), r, nil
}

// CheckSinkOfRun checks that dead letter d's sink is one of the run's
// sinks (runSinks; empty: any): a write's dead letter replays to its sink
// alone, so one whose sink the run does not write (BigQuery off, a spec
// without rollups) would land nowhere. The error wraps ErrMalformed and
// names the sink.
func CheckSinkOfRun(d DeadLetter, runSinks []string) error {
	if len(runSinks) == 0 || slices.Contains(runSinks, d.Sink) {
		return nil
	}
	return fmt.Errorf("%w: dead letter sink %q is not a sink of this run (its sinks: %s): replay it with the store it names (e.g. --bigquery_dataset), or leave it out with --replay_sink", schemas.ErrMalformed, d.Sink, strings.Join(runSinks, ", "))
}

// ReplayFilter selects the dead letters a replay takes: by reason and by
// sink (an empty list takes every one).
type ReplayFilter struct {
	Reasons []string
	Sinks   []string
}

// Takes reports whether the filter takes d.
func (f ReplayFilter) Takes(d DeadLetter) bool {
	return (len(f.Reasons) == 0 || slices.Contains(f.Reasons, d.Reason)) && (len(f.Sinks) == 0 || slices.Contains(f.Sinks, d.Sink))
}
