package dofns

import (
	"context"
	"errors"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/rowkey"
	"github.com/sensorpipe/sensorpipe/schemas/silences"
)

// Stores are what the core reads back from the edges' stores: a
// stream's or a merge's readings from Bigtable (Recovery, readBacker)
// and a replay's dead-lettered records from their files
// (UnwrapDeadLetterFn). The program that wires the edges to the core
// registers them once, from an init function (package pipelines does),
// so that a worker, which runs the same binary, has them too: a DoFn
// carries only the coordinates it reads, which serialize, never a client.
type Stores struct {
	// OpenTables opens the Bigtable instance project/instance for
	// reading.
	OpenTables func(ctx context.Context, project, instance string) (TableReader, error)
	// ReadRecord reads the length bytes at offset of the file at path
	// and checks that their SHA-256 is sum (hex): a dead letter's record,
	// read back for a replay.
	ReadRecord func(ctx context.Context, path string, offset, length int64, sum string) ([]byte, error)
	// ReadSilences reads the silence and resumed records with
	// silent_since at or after sinceMs from the silences table
	// (silences.SilencesTable) of the BigQuery dataset project.dataset,
	// each with its identity's values in spec.Identity order: what a
	// restarted local stream raised before (RecoverSilencesFn). A table
	// that does not exist holds none.
	ReadSilences func(ctx context.Context, project, dataset string, spec *schemas.Spec, sinceMs int64) ([]silences.Silence, error)
}

// A TableReader reads rows of a stored table back.
type TableReader interface {
	// ReadRows calls row for each row of table within ranges, in key
	// order, with those of its cells that are in one of families and
	// whose timestamps are in [fromMs, toMs) (toMs math.MaxInt64: no
	// end). It makes one attempt; the caller retries.
	ReadRows(ctx context.Context, table string, ranges []rowkey.RowRange, families []string, fromMs, toMs int64, row func(hours.ReadRow)) error
	// Close releases the reader's client.
	Close() error
}

// stores are the registered stores; RegisterStores sets them before any
// DoFn runs.
var stores Stores

// errNoStore means no store of the kind asked for was registered.
var errNoStore = errors.New("no store registered (dofns.RegisterStores)")

// RegisterStores sets the stores the core reads back from. Call it from
// an init function, before any pipeline is built or run.
func RegisterStores(s Stores) { stores = s }
