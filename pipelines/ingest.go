// Package pipelines composes sensorpipe's DoFns into the transforms the
// launcher runs: read, parse, window by event-time hour, group, build rows,
// and write Bigtable, BigQuery and the dead letter. Batch and stream share
// Ingest; they differ only in the source and the trigger.
package pipelines

import (
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"

	"github.com/sensorpipe/sensorpipe/dofns"
	"github.com/sensorpipe/sensorpipe/schemas"
)

// Config says where a run writes.
type Config struct {
	Spec *schemas.Spec

	BigtableProject  string
	BigtableInstance string

	// BigQuery is nil when the BigQuery sink is off.
	BigQuery *BigQueryConfig

	// DeadLetter is a local folder or gs:// prefix.
	DeadLetter string
}

// BigQueryConfig is the BigQuery sink's destination.
type BigQueryConfig struct {
	Project     string
	Dataset     string
	Table       string
	WriteMethod string // storage_write (default) or insert_all
}

// Validate reports a configuration that cannot run.
func (c Config) Validate() error {
	switch {
	case c.Spec == nil:
		return fmt.Errorf("pipelines: no dataset spec")
	case c.BigtableProject == "" || c.BigtableInstance == "":
		return fmt.Errorf("pipelines: bigtable project and instance are required")
	case c.DeadLetter == "":
		return fmt.Errorf("pipelines: a dead-letter location is required")
	}
	return nil
}

// ReadFiles reads every line of the files matching glob (local paths or
// gs://, .gz decompressed) as KV<file, line>, and dead letters for files
// that cannot be read to the end.
func ReadFiles(s beam.Scope, glob string) (lines, dead beam.PCollection) {
	s = s.Scope("ReadFiles")
	matches := fileio.MatchFiles(s, glob, fileio.MatchEmptyAllow())
	files := fileio.ReadMatches(s, matches)
	return beam.ParDo2(s, &dofns.ReadLinesFn{}, files)
}

// Parse turns KV<source, line> into KV<identity, Record> stamped with event
// time, and the dead letters of lines that fail validation.
func Parse(s beam.Scope, spec *schemas.Spec, lines beam.PCollection) (records, dead beam.PCollection) {
	s = s.Scope("Parse")
	return beam.ParDo2(s, dofns.NewParseFn(spec), lines)
}

// HourlyWindows windows readings into fixed one-hour event-time windows, the
// UTC hours of the row keys.
func HourlyWindows(s beam.Scope, records beam.PCollection, opts ...beam.WindowIntoOption) beam.PCollection {
	return beam.WindowInto(s.Scope("HourlyWindows"), window.NewFixedWindows(time.Hour), records, opts...)
}

// Ingest groups windowed KV<identity, Record> by identity and hour, builds
// rows, and writes them to Bigtable (and BigQuery when configured). It
// returns the dead letters of the writes.
func Ingest(s beam.Scope, cfg Config, windowed beam.PCollection) []beam.PCollection {
	s = s.Scope("Ingest")
	rows, bqRows, dead := BuildRows(s, cfg.Spec, cfg.BigQuery != nil, windowed)
	btDead := WriteBigtable(s, cfg.BigtableProject, cfg.BigtableInstance, rows)
	out := []beam.PCollection{dead, btDead}
	if cfg.BigQuery != nil {
		out = append(out, WriteBigQuery(s, *cfg.BigQuery, cfg.Spec, bqRows))
	}
	return out
}

// BuildRows groups windowed KV<identity, Record> by identity and hour and
// returns the Bigtable row mutations, the BigQuery rows (empty unless
// withBigQuery) and the dead letters of records that could not be built.
func BuildRows(s beam.Scope, spec *schemas.Spec, withBigQuery bool, windowed beam.PCollection) (rows, bqRows, dead beam.PCollection) {
	s = s.Scope("BuildRows")
	grouped := beam.GroupByKey(s, windowed)
	return beam.ParDo3(s, &dofns.BuildRowsFn{Spec: spec, BigQuery: withBigQuery}, grouped)
}

// WriteBigtable writes RowMutations and returns the dead letters of those
// that failed.
func WriteBigtable(s beam.Scope, project, instance string, rows beam.PCollection) beam.PCollection {
	s = s.Scope("bigtable.Write")
	return beam.ParDo(s, dofns.NewBigtableWriteFn(project, instance), rows)
}

// WriteDeadLetters writes each PCollection of dead letters under dir. They
// are written separately, not flattened, since they may be windowed
// differently.
func WriteDeadLetters(s beam.Scope, dir string, dead ...beam.PCollection) {
	s = s.Scope("deadletter.Write")
	for _, d := range dead {
		beam.ParDo0(s, &dofns.WriteDeadLettersFn{Dir: dir}, d)
	}
}

// Batch builds the historical re-ingestion pipeline: files in, Bigtable (and
// BigQuery) out, with every rejected record in the dead letter.
func Batch(s beam.Scope, cfg Config, glob string) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	lines, readDead := ReadFiles(s, glob)
	records, parseDead := Parse(s, cfg.Spec, lines)
	dead := Ingest(s, cfg, HourlyWindows(s, records))
	WriteDeadLetters(s, cfg.DeadLetter, append(dead, readDead, parseDead)...)
	return nil
}
