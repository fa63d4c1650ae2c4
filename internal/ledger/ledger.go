// Package ledger is a run's account of its records, built from the Beam
// counters the DoFns keep and the runner reports (prism's job service
// while a local job runs, the pipeline result when it ends, the job's
// counters on Dataflow). It names those counters, adds them up, and checks
// that they balance:
//
//	read = distinct valid readings + merged duplicates + rejected records
//	       (the parse and too_late dead letters)
//	for each sink table: readings routed to it = readings written + its dead letters
//
// and, in a batch, that every table was routed every distinct reading and
// that the dead-letter store took every dead letter the stages made. A
// stream stopped mid-hour also holds readings in open windows, counted as
// the remainder, and may have writes in flight.
//
// The ledger's arithmetic is pure: it knows counter names, and reads
// Beam's metrics results. The Recorder keeps the DoFns' counters, and the
// durable record (record.go) writes and reads a run's counts as files.
package ledger

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// Key names one counter: its namespace and name, as beam.NewCounter takes
// them. The ledger sums a key's counts across the steps that keep it.
type Key struct{ Namespace, Name string }

// Counters are a run's counter values by key.
type Counters map[Key]int64

// Plus returns c and d summed (the ledger of two runs, e.g. the parts of
// one local batch).
func (c Counters) Plus(d Counters) Counters {
	sum := make(Counters, len(c)+len(d))
	for k, n := range c {
		sum[k] += n
	}
	for k, n := range d {
		sum[k] += n
	}
	return sum
}

// FromMetrics sums each counter of a run's metrics over the steps that
// keep it. It takes the committed values (of the bundles that succeeded)
// where the runner reports them, else the attempted ones.
func FromMetrics(r *metrics.Results) Counters {
	if r == nil {
		return nil
	}
	all := r.AllMetrics().Counters()
	committed := false
	for _, c := range all {
		if c.Committed != 0 {
			committed = true
			break
		}
	}
	out := Counters{}
	for _, c := range all {
		v := c.Attempted
		if committed {
			v = c.Committed
		}
		out[Key{Namespace: c.Key.Namespace, Name: c.Key.Name}] += v
	}
	return out
}

// The stage counters.
var (
	// InputRecords counts every record read: each reading a line gives
	// (a Heroic line gives several), each line rejected whole, each file
	// that could not be read to its end.
	InputRecords = Key{"input", "records"}
	// InputMessages counts a stream's Pub/Sub messages; each carries one
	// or more records (InputRecords), one per line or array element.
	InputMessages = Key{"input", "messages"}
	// TimestampAttributeMissing and TimestampAttributeUnparseable count a
	// stream's messages without a usable --timestamp_attribute;
	// TimestampAttributeDisagrees counts the readings whose event time is
	// further from their message's timestamp attribute than the spec's
	// timestamp_attribute_tolerance.
	TimestampAttributeMissing     = Key{"input", "timestamp_attribute_missing"}
	TimestampAttributeUnparseable = Key{"input", "timestamp_attribute_unparseable"}
	TimestampAttributeDisagrees   = Key{"input", "timestamp_attribute_disagrees"}
	// InputRejected counts the input records dead-lettered before they
	// became readings (sink parse).
	InputRejected = Key{"input", "rejected"}
	// TooLate counts a stream's readings whose window had closed (sink
	// window).
	TooLate = Key{"window", "too_late"}
	// GroupRejected counts readings the grouping could not build (reason
	// internal, sink window).
	GroupRejected = Key{"window", "rejected"}
	// Readings counts the distinct valid readings the windows built: in a
	// batch each group's readings, in a stream each reading once, when its
	// window's first on-time or late firing builds it.
	Readings = Key{"group", "readings"}
	// Duplicates counts readings merged into another with the same
	// identity and millisecond.
	Duplicates = Key{"group", "duplicates"}
	// Recovered counts readings a stream read back from Bigtable and
	// built into an hour: read by another run (a killed one, another
	// stream on the subscription, the job an update replaced), not this
	// one.
	Recovered = Key{"group", "recovered"}
	// UnchangedHours counts the sensor-hours a batch merged with what
	// Bigtable holds and found unchanged: no Bigtable cell was written
	// for them.
	UnchangedHours = Key{"group", "unchanged_hours"}

	// Replayed counts the dead letters a replay (--format=deadletter)
	// unwrapped and fed to the parse, or to a rollup's rebuild; each is
	// also a record read (InputRecords) unless it is a rebuild.
	Replayed = Key{"replay", "records"}
	// ReplayFiltered counts the dead letters the replay's filters left
	// out (not records read).
	ReplayFiltered = Key{"replay", "filtered"}
	// ReplayRebuilds counts the rollups' dead letters replayed as the
	// rebuild of their sensor-hour.
	ReplayRebuilds = Key{"replay", "rebuilds"}
	// ReplayNotReadBack counts the too_large dead letters of files a
	// replay could not read back, because the file changed (or is gone)
	// since: each is dead-lettered again, and the run fails.
	ReplayNotReadBack = Key{"replay", "not_read_back"}
)

// InputRows counts the rows read from files of a table format (csv,
// parquet, avro): each is also a record read (InputRecords), as a reading
// or a rejected record.
func InputRows(format string) Key { return Key{"input", "rows_" + format} }

// ReplaySkipped counts the readings a replay built but did not route to
// sink, because they were dead letters of another sink's write, which sink
// had taken.
func ReplaySkipped(sink string) Key { return Key{"replay", "skipped." + sink} }

// Outcomes of one write.
const (
	// Routed: the write reached the sink (or was rejected on its way).
	Routed = "routed"
	// Written: the store acknowledged it.
	Written = "written"
	// Failed: it was dead-lettered (write_failed, or rejected while being
	// built for this table).
	Failed = "failed"
	// Unavailable: the subset of Failed dead-lettered because the store
	// stayed unavailable until the retry deadline, rather than rejected it.
	Unavailable = "unavailable"
	// Unchanged: not routed, because the sink holds it already (a batch
	// merged with stored hours: Bigtable's cells, or a BigQuery table's
	// marks; see hours.MergeChanges).
	Unchanged = "unchanged"
)

// SinkKey is the counter of outcome for writes of kind to a sink's table.
func SinkKey(sink, table string, kind hours.OriginKind, outcome string) Key {
	return Key{"sink/" + sink + "/" + table, kind.String() + "." + outcome}
}

// RowsKey counts the rows (Bigtable row mutations, BigQuery rows) a sink's
// table acknowledged.
func RowsKey(sink, table string) Key { return Key{"sink/" + sink + "/" + table, "rows.written"} }

// DeadLetterKey counts the dead letters of sink with reason that the
// dead-letter store took.
func DeadLetterKey(sink, reason string) Key { return Key{"deadletter", sink + "." + reason} }

// UnknownFieldNamespace is the namespace of the counters of payload keys
// the spec does not read, one counter per key.
const UnknownFieldNamespace = "fields_not_in_spec"

// UnknownFieldKey counts the readings whose payload has the key name,
// which the spec does not read.
func UnknownFieldKey(name string) Key { return Key{UnknownFieldNamespace, name} }

// ClockAheadNamespace is the namespace of the counters of readings
// rejected because their event time was further ahead of the wall clock
// than the spec's max_future, one counter per sensor (identity).
const ClockAheadNamespace = "clock_ahead"

// ClockAheadKey counts the readings of sensor rejected for a clock ahead
// (out_of_range dead letters, also counted as rejected input).
func ClockAheadKey(sensor string) Key { return Key{ClockAheadNamespace, sensor} }

// stageKeys are the counters of the stages before the sinks.
var stageKeys = []Key{InputRecords, InputMessages, InputRejected, TooLate, GroupRejected, Readings, Duplicates, Recovered, UnchangedHours,
	TimestampAttributeMissing, TimestampAttributeUnparseable, TimestampAttributeDisagrees}

// Family lists the counters a step that keeps k may come to keep too: the
// other stage counters; every kind and outcome of k's sink table; every
// sink and reason of the dead letters. A step registers the whole family
// at its first count (Recorder.Register), so that a counter first counted
// by several bundles at once (every bundle's write_failed when a store
// dies) is already known to the runner. Prism (v2.77) keeps one payload
// of a counter it does not know yet while it asks the worker what it is,
// and a second bundle's payload replaces the first: its counts are lost.
func Family(k Key) []Key {
	switch {
	case k.Namespace == "deadletter":
		var out []Key
		for _, sink := range deadletter.Sinks {
			for _, reason := range schemas.Reasons() {
				out = append(out, DeadLetterKey(sink, reason))
			}
		}
		return out
	case strings.HasPrefix(k.Namespace, "sink/"):
		out := []Key{{k.Namespace, "rows." + Written}}
		for _, kind := range hours.OriginKinds {
			for _, o := range []string{Routed, Written, Failed, Unavailable, Unchanged} {
				out = append(out, Key{k.Namespace, kind.String() + "." + o})
			}
		}
		return out
	}
	for _, s := range stageKeys {
		if s == k {
			return stageKeys
		}
	}
	return []Key{k}
}

// Ledger is a run's account.
type Ledger struct {
	// Stream is set for a stream, which a stop leaves with readings in
	// open windows and writes in flight.
	Stream bool `json:"stream"`

	// Messages are a stream's Pub/Sub messages, each of one or more
	// records.
	Messages int64 `json:"messages_read,omitempty"`
	Read     int64 `json:"records_read"`
	// RowsByFormat are the rows read from CSV, Parquet and Avro files, by
	// format (InputRows); each is also a record read.
	RowsByFormat map[string]int64 `json:"rows_read_by_format,omitempty"`
	Readings     int64            `json:"distinct_valid_readings"`
	Duplicates   int64            `json:"duplicates_merged"`
	// Rejected are the parse and too_late dead letters.
	Rejected int64 `json:"rejected_records"`
	// Recovered are readings a stream read back from Bigtable that
	// another run had read.
	Recovered int64 `json:"recovered_readings,omitempty"`
	// UnchangedHours are the sensor-hours a batch found stored in
	// Bigtable as it would write them, and did not write there.
	UnchangedHours int64 `json:"unchanged_hours,omitempty"`
	// Replayed are the dead letters a replay unwrapped (ledger.Replayed),
	// ReplayFiltered those its filters left out, ReplayRebuilds the
	// rollups' among Replayed; ReplaySkipped, by sink, the readings it
	// did not route to a sink that had taken them.
	Replayed       int64            `json:"replayed,omitempty"`
	ReplayFiltered int64            `json:"replay_filtered,omitempty"`
	ReplayRebuilds int64            `json:"replay_rebuilds,omitempty"`
	ReplaySkipped  map[string]int64 `json:"replay_skipped,omitempty"`
	// ReplayNotReadBack are the too_large records a replay could not
	// read back from their changed source files.
	ReplayNotReadBack int64 `json:"replay_not_read_back,omitempty"`
	// Unfired are a stream's readings in windows that had not fired when
	// it stopped (read, not yet built); always 0 for a batch.
	Unfired int64 `json:"in_open_windows,omitempty"`

	// FieldsNotInSpec counts, per payload key the spec does not read, the
	// readings that had it.
	FieldsNotInSpec map[string]int64 `json:"fields_not_in_spec,omitempty"`
	// ClockAhead counts, per sensor, the readings a stream rejected
	// (out_of_range) because their event time was further ahead of the
	// wall clock than the spec's max_future.
	ClockAhead map[string]int64 `json:"clock_ahead,omitempty"`
	// TimestampAttribute counts the messages whose --timestamp_attribute
	// was missing or unparseable, and the readings whose event time
	// disagreed with it beyond the spec's tolerance.
	TimestampAttribute *AttributeCounts `json:"timestamp_attribute,omitempty"`

	Sinks []Sink `json:"sinks"`

	// DeadLetters are the dead letters the store took, by sink and reason.
	DeadLetters map[string]map[string]int64 `json:"dead_letters"`

	Balanced bool `json:"balanced"`
	// Problems say, one line each, what does not add up.
	Problems []string `json:"problems,omitempty"`

	// CountsFrom says where the counts come from: the run's durable
	// record (FromRecord, with its folder) or the runner's metrics
	// (FromRunnerMetrics).
	CountsFrom string `json:"counts_from,omitempty"`
}

// Where a ledger's counts come from (Ledger.CountsFrom).
const (
	FromRecord        = "the run's record"
	FromRunnerMetrics = "the runner's metrics"
)

// Sink is one sink table's account. For bigtable and bigquery the counted
// things are readings; for bigquery_rollups, rollup rows.
type Sink struct {
	Sink  string `json:"sink"`
	Table string `json:"table"`

	Routed      int64 `json:"routed"`
	Written     int64 `json:"written"`
	Failed      int64 `json:"dead_lettered"`
	Unavailable int64 `json:"dead_lettered_unavailable,omitempty"`
	// Unchanged are the readings (rollup rows) not routed because the
	// sink holds them as they would be written: each is one of the
	// distinct valid readings, so Routed + Unchanged is every reading.
	Unchanged int64 `json:"unchanged_not_rewritten,omitempty"`
	// Rows are the rows the store acknowledged.
	Rows int64 `json:"rows_written"`

	// Writes beyond the counted one: a stream's provisional writes
	// (on arrival, early firings), rewrites, and rollups (Bigtable cells
	// of a row no reading of the firing touched).
	Other []Count `json:"other_writes,omitempty"`
}

// AttributeCounts are the timestamp attribute's problems.
type AttributeCounts struct {
	Missing     int64 `json:"missing"`
	Unparseable int64 `json:"unparseable"`
	Disagrees   int64 `json:"disagrees"`
}

// Count is one named figure.
type Count struct {
	What string `json:"what"`
	N    int64  `json:"n"`
}

// FromCounters builds and checks the ledger of a run. stream says the run
// was a stream (which may stop with readings in open windows).
func FromCounters(c Counters, stream bool) *Ledger {
	l := &Ledger{
		Stream:     stream,
		Messages:   c[InputMessages],
		Read:       c[InputRecords],
		Readings:   c[Readings],
		Duplicates: c[Duplicates],
		Recovered:  c[Recovered],

		UnchangedHours: c[UnchangedHours],
		DeadLetters:    map[string]map[string]int64{},

		Replayed:       c[Replayed],
		ReplayFiltered: c[ReplayFiltered],
		ReplayRebuilds: c[ReplayRebuilds],

		ReplayNotReadBack: c[ReplayNotReadBack],
	}
	for _, sink := range deadletter.Sinks {
		if n := c[ReplaySkipped(sink)]; n != 0 {
			if l.ReplaySkipped == nil {
				l.ReplaySkipped = map[string]int64{}
			}
			l.ReplaySkipped[sink] = n
		}
	}
	sinks := map[[2]string]*Sink{}
	for k, n := range c {
		if format, ok := strings.CutPrefix(k.Name, "rows_"); ok && k.Namespace == InputRecords.Namespace && n != 0 {
			if l.RowsByFormat == nil {
				l.RowsByFormat = map[string]int64{}
			}
			l.RowsByFormat[format] = n
		}
		switch {
		case k.Namespace == UnknownFieldNamespace:
			if n == 0 {
				continue
			}
			if l.FieldsNotInSpec == nil {
				l.FieldsNotInSpec = map[string]int64{}
			}
			l.FieldsNotInSpec[k.Name] += n
		case k.Namespace == ClockAheadNamespace:
			if n == 0 {
				continue
			}
			if l.ClockAhead == nil {
				l.ClockAhead = map[string]int64{}
			}
			l.ClockAhead[k.Name] += n
		case k.Namespace == "deadletter":
			sink, reason, ok := strings.Cut(k.Name, ".")
			if !ok || n == 0 {
				continue
			}
			if l.DeadLetters[sink] == nil {
				l.DeadLetters[sink] = map[string]int64{}
			}
			l.DeadLetters[sink][reason] += n
		case strings.HasPrefix(k.Namespace, "sink/") && n != 0:
			parts := strings.SplitN(k.Namespace, "/", 3)
			if len(parts) != 3 {
				continue
			}
			id := [2]string{parts[1], parts[2]}
			s := sinks[id]
			if s == nil {
				s = &Sink{Sink: parts[1], Table: parts[2]}
				sinks[id] = s
			}
			s.add(k.Name, n)
		}
	}
	for _, s := range sinks {
		sort.Slice(s.Other, func(i, j int) bool { return s.Other[i].What < s.Other[j].What })
		l.Sinks = append(l.Sinks, *s)
	}
	sort.Slice(l.Sinks, func(i, j int) bool {
		a, b := l.Sinks[i], l.Sinks[j]
		if a.Sink != b.Sink {
			return sinkOrder(a.Sink) < sinkOrder(b.Sink)
		}
		return a.Table < b.Table
	})
	if a := (AttributeCounts{Missing: c[TimestampAttributeMissing], Unparseable: c[TimestampAttributeUnparseable],
		Disagrees: c[TimestampAttributeDisagrees]}); a != (AttributeCounts{}) {
		l.TimestampAttribute = &a
	}
	l.Rejected = c[InputRejected] + c[TooLate] + c[GroupRejected]
	l.check(c)
	return l
}

func sinkOrder(s string) int {
	for i, x := range deadletter.Sinks {
		if x == s {
			return i
		}
	}
	return len(deadletter.Sinks)
}

// add adds the counter named kind.outcome to the sink's account.
func (s *Sink) add(name string, n int64) {
	counted := hours.OriginReading.String()
	if s.Sink == deadletter.SinkBigQueryRollups {
		counted = hours.OriginRollup.String()
	}
	kind, outcome, _ := strings.Cut(name, ".")
	switch {
	case kind == "rows" && outcome == Written:
		s.Rows += n
	case kind == counted && outcome == Routed:
		s.Routed += n
	case kind == counted && outcome == Written:
		s.Written += n
	case kind == counted && outcome == Failed:
		s.Failed += n
	case kind == counted && outcome == Unavailable:
		s.Unavailable += n
	case kind == counted && outcome == Unchanged:
		s.Unchanged += n
	case outcome == Routed || n == 0:
		// Routed writes of the other kinds are their written plus failed.
	default:
		s.Other = append(s.Other, Count{What: kind + " " + outcome, N: n})
	}
}

// failures are the dead letters a sink table made, of every kind.
func (s *Sink) failures() int64 {
	n := s.Failed
	for _, o := range s.Other {
		if strings.HasSuffix(o.What, " "+Failed) {
			n += o.N
		}
	}
	return n
}

// rollupsOnly reports whether the sink's table takes no reading, only
// rollup writes: a spec's inventory table (one row per sensor, written
// per hour), which holds no reading to account for.
func (s *Sink) rollupsOnly() bool {
	if s.Routed != 0 || s.Written != 0 || s.Failed != 0 || s.Unchanged != 0 || len(s.Other) == 0 {
		return false
	}
	for _, o := range s.Other {
		if !strings.HasPrefix(o.What, hours.OriginRollup.String()+" ") {
			return false
		}
	}
	return true
}

// check fills Balanced and Problems.
func (l *Ledger) check(c Counters) {
	var p []string
	built := l.Readings + l.Duplicates + l.Rejected
	if l.Stream {
		// The rest were read and sit in windows that have not fired.
		l.Unfired = l.Read - built
		if l.Unfired < 0 {
			p = append(p, fmt.Sprintf("records read %d < distinct readings %d + merged duplicates %d + rejected %d: readings counted twice",
				l.Read, l.Readings, l.Duplicates, l.Rejected))
		}
	} else if l.Read != built {
		p = append(p, fmt.Sprintf("records read %d != distinct readings %d + merged duplicates %d + rejected %d (off by %d)",
			l.Read, l.Readings, l.Duplicates, l.Rejected, l.Read-built))
	}
	for _, s := range l.Sinks {
		what := "readings"
		switch s.Sink {
		case deadletter.SinkBigQueryRollups:
			what = "rollup rows"
		case deadletter.SinkSilences:
			what = "silence records"
		}
		done := s.Written + s.Failed
		switch {
		case s.Routed != done && !l.Stream:
			p = append(p, fmt.Sprintf("%s %s: %s routed %d != written %d + dead-lettered %d (off by %d)",
				s.Sink, s.Table, what, s.Routed, s.Written, s.Failed, s.Routed-done))
		case s.Routed < done:
			p = append(p, fmt.Sprintf("%s %s: %s written %d + dead-lettered %d > routed %d", s.Sink, s.Table, what, s.Written, s.Failed, s.Routed))
		}
		if skipped := l.ReplaySkipped[s.Sink]; s.Sink != deadletter.SinkBigQueryRollups && s.Sink != deadletter.SinkSilences && !l.Stream && s.Routed+skipped+s.Unchanged != l.Readings && !s.rollupsOnly() {
			if s.Unchanged > 0 {
				p = append(p, fmt.Sprintf("%s %s: routed %d readings and left %d unchanged, of %d distinct valid readings (off by %d)",
					s.Sink, s.Table, s.Routed, s.Unchanged, l.Readings, l.Readings-s.Routed-skipped-s.Unchanged))
			} else if skipped > 0 {
				p = append(p, fmt.Sprintf("%s %s: routed %d readings and left out %d replayed for another sink, of %d distinct valid readings (off by %d)",
					s.Sink, s.Table, s.Routed, skipped, l.Readings, l.Readings-s.Routed-skipped))
			} else {
				p = append(p, fmt.Sprintf("%s %s: routed %d readings of %d distinct valid readings (off by %d)",
					s.Sink, s.Table, s.Routed, l.Readings, l.Readings-s.Routed))
			}
		}
	}
	if !l.Stream {
		// Every dead letter a stage made reached the store.
		made := map[string]int64{deadletter.SinkParse: c[InputRejected], deadletter.SinkWindow: c[TooLate] + c[GroupRejected]}
		for _, s := range l.Sinks {
			made[s.Sink] += s.failures()
		}
		for _, sink := range sortedKeys(made, l.DeadLetters) {
			var stored int64
			for _, n := range l.DeadLetters[sink] {
				stored += n
			}
			if stored != made[sink] {
				p = append(p, fmt.Sprintf("dead letters of %s: %d made, %d stored (off by %d)", sink, made[sink], stored, made[sink]-stored))
			}
		}
	}
	l.Problems = p
	l.Balanced = len(p) == 0
}

func sortedKeys(ms ...any) []string {
	set := map[string]bool{}
	for _, m := range ms {
		switch m := m.(type) {
		case map[string]int64:
			for k := range m {
				set[k] = true
			}
		case map[string]map[string]int64:
			for k := range m {
				set[k] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		return sinkOrder(out[i]) < sinkOrder(out[j]) || sinkOrder(out[i]) == sinkOrder(out[j]) && out[i] < out[j]
	})
	return out
}

// DeadLettered is every dead letter the store took.
func (l *Ledger) DeadLettered() int64 {
	var n int64
	for _, byReason := range l.DeadLetters {
		for _, m := range byReason {
			n += m
		}
	}
	return n
}

// Unavailable lists the sink tables that dead-lettered writes because the
// store stayed unavailable until the retry deadline.
func (l *Ledger) Unavailable() []Sink {
	var out []Sink
	for _, s := range l.Sinks {
		if s.Unavailable > 0 {
			out = append(out, s)
		}
	}
	return out
}

// WriteText prints the ledger for people, one figure a line.
func (l *Ledger) WriteText(w io.Writer) {
	if l.Messages > 0 {
		fmt.Fprintf(w, "  messages read:           %d (%.1f records a message)\n", l.Messages, float64(l.Read)/float64(l.Messages))
	}
	fmt.Fprintf(w, "  records read:            %d\n", l.Read)
	if len(l.RowsByFormat) > 0 {
		formats := make([]string, 0, len(l.RowsByFormat))
		for f := range l.RowsByFormat {
			formats = append(formats, f)
		}
		sort.Strings(formats)
		for i, f := range formats {
			formats[i] = fmt.Sprintf("%s %d", f, l.RowsByFormat[f])
		}
		fmt.Fprintf(w, "    rows read:               %s\n", strings.Join(formats, ", "))
	}
	if l.Stream {
		// A stream's readings are final once their hour has fired; the
		// rest are written provisionally and counted apart.
		fmt.Fprintf(w, "    distinct valid readings: %d (final: their hour has closed)\n", l.Readings)
	} else {
		fmt.Fprintf(w, "    distinct valid readings: %d\n", l.Readings)
	}
	fmt.Fprintf(w, "    duplicates merged:       %d (same identity and millisecond)\n", l.Duplicates)
	fmt.Fprintf(w, "    rejected:                %d (parse and too_late dead letters)\n", l.Rejected)
	if l.Stream {
		fmt.Fprintf(w, "    in open hours:           %d (read and written provisionally; final when their hour closes)\n", l.Unfired)
	}
	if len(l.FieldsNotInSpec) > 0 {
		names := make([]string, 0, len(l.FieldsNotInSpec))
		for k := range l.FieldsNotInSpec {
			names = append(names, k)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, k := range names {
			parts[i] = fmt.Sprintf("%s %d", k, l.FieldsNotInSpec[k])
		}
		fmt.Fprintf(w, "  fields not in the spec:  %s (readings with the key; the spec's unknown_fields says what they do)\n", strings.Join(parts, ", "))
	}
	if len(l.ClockAhead) > 0 {
		names := sortedKeys(l.ClockAhead)
		parts := make([]string, len(names))
		for i, k := range names {
			parts[i] = fmt.Sprintf("%s %d", k, l.ClockAhead[k])
		}
		fmt.Fprintf(w, "  clock ahead, rejected:   %s (readings per sensor further ahead of the wall clock than the spec's max_future; out_of_range dead letters)\n", strings.Join(parts, ", "))
	}
	if a := l.TimestampAttribute; a != nil {
		fmt.Fprintf(w, "  timestamp attribute:     missing %d, unparseable %d (messages); off the event time by more than the spec's tolerance %d (readings)\n",
			a.Missing, a.Unparseable, a.Disagrees)
	}
	if l.Recovered > 0 {
		fmt.Fprintf(w, "  recovered from Bigtable:   %d (readings of its hours another run stored)\n", l.Recovered)
	}
	if l.UnchangedHours > 0 {
		fmt.Fprintf(w, "  unchanged, not rewritten: %d sensor-hours (Bigtable holds them as the merge would write them; per table below)\n", l.UnchangedHours)
	}
	if l.Replayed > 0 || l.ReplayFiltered > 0 {
		fmt.Fprintf(w, "  replayed dead letters:     %d (%d rollup rebuilds; %d left out by the filters)", l.Replayed, l.ReplayRebuilds, l.ReplayFiltered)
		for _, sink := range sortedKeys(l.ReplaySkipped) {
			fmt.Fprintf(w, "; %d readings not sent to %s, which had them", l.ReplaySkipped[sink], sink)
		}
		if l.ReplayNotReadBack > 0 {
			fmt.Fprintf(w, "; %d too_large records not read back: their source files changed", l.ReplayNotReadBack)
		}
		fmt.Fprintln(w)
	}
	for _, s := range l.Sinks {
		what := "readings"
		switch s.Sink {
		case deadletter.SinkBigQueryRollups:
			what = "rollup rows"
		case deadletter.SinkSilences:
			what = "silence records"
		}
		fmt.Fprintf(w, "  %s %s: %s routed %d = written %d + dead-lettered %d", s.Sink, s.Table, what, s.Routed, s.Written, s.Failed)
		if s.Unavailable > 0 {
			fmt.Fprintf(w, " (%d while the store was unavailable)", s.Unavailable)
		}
		if s.Unchanged > 0 {
			fmt.Fprintf(w, "; %s unchanged, not rewritten %d", what, s.Unchanged)
		}
		fmt.Fprintf(w, "; rows written %d", s.Rows)
		for _, o := range s.Other {
			fmt.Fprintf(w, "; %s %d", otherWrites(o.What), o.N)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  dead letters:            %d", l.DeadLettered())
	if sinks := sortedKeys(l.DeadLetters); len(sinks) > 0 {
		var parts []string
		for _, sink := range sinks {
			reasons := make([]string, 0, len(l.DeadLetters[sink]))
			for r := range l.DeadLetters[sink] {
				reasons = append(reasons, r)
			}
			sort.Strings(reasons)
			for _, r := range reasons {
				parts = append(parts, fmt.Sprintf("%s/%s %d", sink, r, l.DeadLetters[sink][r]))
			}
		}
		fmt.Fprintf(w, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	if l.CountsFrom != "" {
		fmt.Fprintf(w, "  counts from:             %s\n", l.CountsFrom)
	}
	if l.Balanced {
		fmt.Fprintln(w, "  ledger: balanced")
	} else {
		fmt.Fprintf(w, "  ledger: DOES NOT BALANCE: %s\n", strings.Join(l.Problems, "; "))
	}
}

// otherWrites names, for people, the writes a sink made beyond each
// reading's counted one (Sink.Other).
func otherWrites(what string) string {
	switch what {
	case hours.OriginProvisional.String() + " " + Written:
		return "plus provisional writes (on arrival and early firings, before the hour closed)"
	case hours.OriginRewrite.String() + " " + Written:
		return "plus rewrites (late firings, duplicates)"
	case hours.OriginRollup.String() + " " + Written:
		return "plus rollup writes"
	case hours.OriginRewrite.String() + " " + Unchanged:
		return "stored readings merged and unchanged, not rewritten"
	case hours.OriginRollup.String() + " " + Unchanged:
		return "rollups unchanged, not rewritten"
	}
	return what
}

// WriteJSON writes the ledger as one JSON document.
func (l *Ledger) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(l)
}
