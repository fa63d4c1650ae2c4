package bigtableio

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sensorpipe/sensorpipe/dofns/bigtableio/flowcontrol"
	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// TestTwoPipelinesInOneProcessKeepTheirOwnFlowControl runs two pipelines
// at once in this process, writing the same Bigtable table with different
// flow-control caps and batch sizes. Each must be paced by a controller
// of its own settings: one controller per target would run the second
// pipeline under the first one's cap.
func TestTwoPipelinesInOneProcessKeepTheirOwnFlowControl(t *testing.T) {
	host := emulators.StartBigtable(t)
	t.Setenv("BIGTABLE_EMULATOR_HOST", host)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const project = "two-pipelines"
	createTable(t, ctx, project)

	configs := []Config{
		{Project: project, Instance: "i", BatchCells: 2_000, WorkerBudget: true, Flow: flowcontrol.Settings{MaxMutations: 4_000}},
		{Project: project, Instance: "i", BatchCells: 5_000, WorkerBudget: true, Flow: flowcontrol.Settings{MaxMutations: 20_000}},
	}
	var wg sync.WaitGroup
	errs := make([]error, len(configs))
	for i, cfg := range configs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, s := beam.NewPipelineWithRoot()
			var rows []hours.RowMutation
			for j := 0; j < 40; j++ {
				rows = append(rows, row(fmt.Sprintf("p%d-%03d", i, j), "f", 500, fmt.Sprintf("pipeline %d reading %d", i, j)))
			}
			passert.Empty(s, Write(s, cfg, beam.CreateList(s, rows)))
			_, errs[i] = ptest.RunWithMetrics(p)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("pipeline %d: %v", i, err)
		}
	}
	if rows, cells := countCells(t, ctx, project); rows != 80 || cells != 40_000 {
		t.Fatalf("table holds %d rows, %d cells; want 80 and 40000", rows, cells)
	}
	for i, cfg := range configs {
		s := flowcontrol.ForWorker(project+"/i/", cfg.Flow).Stats()
		t.Logf("pipeline %d (cap %d, batches of %d cells): %+v", i, cfg.Flow.MaxMutations, cfg.BatchCells, s)
		if s.Requests == 0 {
			t.Errorf("pipeline %d's controller (cap %d) admitted no request: its writes went through another's", i, cfg.Flow.MaxMutations)
		}
		if s.Limit != cfg.Flow.MaxMutations || s.PeakMutations > cfg.Flow.MaxMutations {
			t.Errorf("pipeline %d's controller: limit %d, peak %d mutations outstanding; want its own cap %d and at most that",
				i, s.Limit, s.PeakMutations, cfg.Flow.MaxMutations)
		}
	}
	a, b := workerCells(project+"/i/", 4*2_000), workerCells(project+"/i/", 4*5_000)
	if a == b {
		t.Error("the two pipelines' cell budgets are one semaphore")
	}
}
