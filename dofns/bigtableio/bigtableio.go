// Package bigtableio is sensorpipe's Cloud Bigtable edge: the sink that
// writes the readings' and rollups' row mutations (Write, writeFn), its
// flow control (flow.go and the flowcontrol package), its clients
// (NewClient), its table set-up (EnsureTables), the read-back of stored
// rows (Reader), and the source that reads a stored table's readings back
// in parallel by key range (Read, readRowsFn).
//
// It replaces Beam's bigtableio, which routes every write through one
// GroupByKey on a fixed key and so serialises the sink.
package bigtableio

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"

	"github.com/sensorpipe/sensorpipe/dofns/bigtableio/flowcontrol"
	"github.com/sensorpipe/sensorpipe/internal/retry"
)

// DefaultFlow is the flow control the launcher gives a run
// (--bigtable_max_outstanding_mutations and _bytes): about what one
// worker's ApplyBulk batches hold in flight without Bigtable pushing
// back. A Config's zero Flow has no caps.
var DefaultFlow = flowcontrol.Settings{MaxMutations: 200_000, MaxBytes: 128 << 20}

// Config is where and how Write writes. Its zero values take the
// defaults: DefaultBatchCells, the instance's default app profile, the
// retry policy's defaults, and no flow-control caps.
type Config struct {
	Project  string
	Instance string
	// AppProfile is the app profile the writes use ("" is the instance's
	// default), e.g. a single-cluster profile for backfills.
	AppProfile string
	// Flow caps and paces each worker's outstanding writes (zero: no
	// caps; DefaultFlow is the launcher's).
	Flow flowcontrol.Settings
	// BatchCells is the cells of one ApplyBulk batch (0:
	// DefaultBatchCells).
	BatchCells int
	// Retry is the writes' retry policy (zero: retry.Policy's defaults).
	Retry retry.Settings
	// WorkerBudget bounds the cells in flight per worker process rather
	// than per DoFn instance (see writeFn.WorkerBudget): a batch's.
	WorkerBudget bool
	// Uncounted writes bookkeeping, not readings (the BigQuery marks,
	// hours.MarksTable): none of its writes is counted in the run's
	// ledger, and one that fails is logged, not dead-lettered.
	Uncounted bool
}

// Write writes RowMutations to cfg's instance and returns the dead
// letters of those that failed, in the global window. Rows may come in any
// window and pane: the sink takes them in the global window, where its
// end-of-bundle dead letters are emitted.
func Write(s beam.Scope, cfg Config, rows beam.PCollection) beam.PCollection {
	s = s.Scope("bigtable.Write")
	fn := newWriteFn(cfg.Project, cfg.Instance)
	fn.Retry, fn.BatchCells = cfg.Retry, cfg.BatchCells
	fn.AppProfile, fn.Flow = cfg.AppProfile, cfg.Flow
	fn.WorkerBudget, fn.Uncounted = cfg.WorkerBudget, cfg.Uncounted
	return beam.ParDo(s, fn, beam.WindowInto(s.Scope("GlobalWindow"), window.NewGlobalWindows(), rows))
}
