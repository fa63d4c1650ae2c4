package pipelines

import (
	"context"

	"github.com/sensorpipe/sensorpipe/dofns"
	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/dofns/fileio"
)

// init wires the edges' stores into the core's read-back: a worker runs
// this binary, so its DoFns find them too (dofns.Stores).
func init() {
	dofns.RegisterStores(dofns.Stores{
		OpenTables: func(ctx context.Context, project, instance string) (dofns.TableReader, error) {
			r, err := bigtableio.OpenReader(ctx, project, instance)
			if err != nil {
				return nil, err
			}
			return r, nil
		},
		ReadRecord:   fileio.ReadRecord,
		ReadSilences: bigqueryio.ReadSilences,
	})
}
