package bench

import (
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"time"
)

// SampleHeap watches this process's live heap every interval and, each
// time it passes its previous peak by a tenth, writes a heap profile to
// path (after a GC, so the profile shows what was live at that peak). The
// returned stop ends the sampling and returns the peak live heap in MB.
func SampleHeap(path string, interval time.Duration) (stop func() float64) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	done := make(chan struct{})
	var (
		wg      sync.WaitGroup
		peak    uint64
		written uint64
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			metrics.Read(sample)
			live := sample[0].Value.Uint64()
			if live > peak {
				peak = live
			}
			if live > written+written/10 {
				written = live
				runtime.GC()
				if f, err := os.Create(path); err == nil {
					_ = pprof.Lookup("heap").WriteTo(f, 0)
					f.Close()
				}
			}
		}
	}()
	return func() float64 {
		close(done)
		wg.Wait()
		return float64(peak) / (1 << 20)
	}
}
