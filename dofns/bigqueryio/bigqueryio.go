// Package bigqueryio is sensorpipe's BigQuery edge: the sink that writes
// the readings' and rollups' rows (Write, writeFn) with the Storage Write
// API (with or without change data capture) or tabledata.insertAll, the
// source that reads a table's readings back with the Storage Read API
// (Read, createSessionFn, readStreamFn), its clients' options (honouring
// the emulator variables), and its table set-up (EnsureTable,
// CheckSchema, EnsurePrimaryKey).
//
// It replaces Beam's bigqueryio, which funnels every row through one
// GroupByKey on a fixed key.
package bigqueryio

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"

	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// Config is the table Write writes (or Read reads) and how. Its zero values take the
// defaults: DefaultWriteMethod, DefaultBQRequestBytes,
// DefaultBQBufferedBytes, retry.Policy's.
type Config struct {
	Project string
	Dataset string
	Table   string
	// WriteMethod is WriteUpsert, WriteStorageWrite or WriteInsertAll
	// ("": DefaultWriteMethod).
	WriteMethod string
	// Retry is the writes' retry policy.
	Retry retry.Settings
	// MaxRequestBytes caps one request (0: DefaultBQRequestBytes).
	MaxRequestBytes int
	// MaxBufferedBytes caps the memory of the Storage Write requests in
	// flight, or of an insertAll batch (0: DefaultBQBufferedBytes; see
	// writeFn.MaxBufferedBytes).
	MaxBufferedBytes int
	// Sink names the sink in dead letters and the run's ledger
	// (deadletter.SinkBigQuery or deadletter.SinkBigQueryRollups).
	Sink string
	// Columns describes the table's columns: the spec's BigQuery section,
	// or the hourly rollup table.
	Columns *schemas.BigQuerySpec

	// Spec is the spec whose bigquery.columns map the table's columns
	// back to its fields (Read; required there).
	Spec *hours.Compiled
	// FromMs and ToMs bound the event times Read reads to [FromMs, ToMs),
	// epoch milliseconds (0: unbounded).
	FromMs, ToMs int64
	// Streams is how many streams Read asks its read session for (0:
	// defaultReadStreams).
	Streams int
}

// Write writes BQRows to cfg's table and returns the dead letters of the
// rows BigQuery rejected, in the global window. Each DoFn instance writes
// on its own: there is no grouping onto a fixed key.
//
// Rows may come in any window and pane: the sink takes them in the
// global window, where its end-of-bundle dead letters are emitted.
func Write(s beam.Scope, cfg Config, rows beam.PCollection) beam.PCollection {
	s = s.Scope("bigquery.Write")
	return beam.ParDo(s, cfg.writeFn(), beam.WindowInto(s.Scope("GlobalWindow"), window.NewGlobalWindows(), rows))
}

// WriteMarked is Write that also returns the BigQuery marks the rows carry
// (hours.BQRow.Mark), as Bigtable mutations of the marks table
// (hours.MarksTable), each once BigQuery holds every row of it (see
// markedWriteFn), in the global window.
func WriteMarked(s beam.Scope, cfg Config, rows beam.PCollection) (dead, marks beam.PCollection) {
	s = s.Scope("bigquery.Write")
	return beam.ParDo2(s, &markedWriteFn{*cfg.writeFn()}, beam.WindowInto(s.Scope("GlobalWindow"), window.NewGlobalWindows(), rows))
}

// writeFn is the writer cfg describes.
func (cfg Config) writeFn() *writeFn {
	fn := newWriteFn(cfg.Project, cfg.Dataset, cfg.Table, cfg.WriteMethod, cfg.Columns)
	fn.Sink, fn.Retry, fn.MaxRequestBytes, fn.MaxBufferedBytes = cfg.Sink, cfg.Retry, cfg.MaxRequestBytes, cfg.MaxBufferedBytes
	return fn
}
