package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

var (
	rssEvery   = flag.Duration("rss_every", 30*time.Second, "Latency phase: how often to sample the launcher's resident memory.")
	profileDir = flag.String("profile_dir", "", "Save heap profiles of the launcher (go tool pprof) to this folder, every minute of the latency phase and at its end (empty: none; the launcher always runs with --debug_addr, for the heap figures of each RSS sample).")
)

// RSSAt is the launcher's resident memory Seconds into the latency phase,
// with the Go runtime's account of its heap at that moment (read from
// /debug/vars, which does not force a collection; zero if it did not
// answer).
type RSSAt struct {
	Seconds float64 `json:"s"`
	MB      float64 `json:"mb"`
	// HeapAllocMB is the heap's objects, live or not yet collected;
	// HeapInuseMB the spans that hold them; HeapFreeMB the spans free and
	// not yet returned to the OS (HeapIdle - HeapReleased); NextGCMB the
	// heap size at which the next collection starts.
	HeapAllocMB float64 `json:"heap_alloc_mb,omitempty"`
	HeapInuseMB float64 `json:"heap_inuse_mb,omitempty"`
	HeapFreeMB  float64 `json:"heap_free_mb,omitempty"`
	NextGCMB    float64 `json:"next_gc_mb,omitempty"`
}

// heapFigures reads the launcher's MemStats from its /debug/vars into at.
func heapFigures(ctx context.Context, debug string, at *RSSAt) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+debug+"/debug/vars", nil)
	if err != nil {
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	var vars struct {
		MemStats struct{ HeapAlloc, HeapInuse, HeapIdle, HeapReleased, NextGC uint64 } `json:"memstats"`
	}
	if json.NewDecoder(resp.Body).Decode(&vars) != nil {
		return
	}
	m := vars.MemStats
	mb := func(b uint64) float64 { return round(float64(b)/(1<<20), 1) }
	at.HeapAllocMB, at.HeapInuseMB, at.HeapFreeMB, at.NextGCMB = mb(m.HeapAlloc), mb(m.HeapInuse), mb(m.HeapIdle-m.HeapReleased), mb(m.NextGC)
}

// Memory is the launcher's resident memory over the latency phase. The
// target is RSS at 10 minutes <= 1.25x RSS at 3 minutes.
type Memory struct {
	Samples []RSSAt `json:"samples"`
	// At3m and At10m are the first samples at or after 3 and 10 minutes
	// (0: the phase was shorter); Ratio is At10m/At3m, or the last
	// sample's over At3m when the phase was shorter than 10 minutes
	// (RatioToLast says which).
	At3mMB      float64 `json:"rss_3m_mb"`
	At10mMB     float64 `json:"rss_10m_mb,omitempty"`
	Ratio       float64 `json:"ratio"`
	RatioToLast bool    `json:"ratio_to_last_sample,omitempty"`
	// SlopeMBPerMin is the least-squares slope of the samples from 3
	// minutes on.
	SlopeMBPerMin float64  `json:"slope_mb_per_min_after_3m"`
	Profiles      []string `json:"heap_profiles,omitempty"`
}

// rssSampler samples a process's RSS every -rss_every and, with
// -profile_dir, saves its heap profile every minute.
type rssSampler struct {
	pid     int
	debug   string // the launcher's --debug_addr
	mu      sync.Mutex
	samples []RSSAt
	files   []string
}

// run samples until ctx ends.
func (r *rssSampler) run(ctx context.Context, start time.Time) {
	tick := time.NewTicker(*rssEvery)
	defer tick.Stop()
	nextProfile := time.Minute
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			at := now.Sub(start)
			sample := RSSAt{Seconds: round(at.Seconds(), 1), MB: rssMB(r.pid)}
			heapFigures(ctx, r.debug, &sample)
			r.mu.Lock()
			r.samples = append(r.samples, sample)
			r.mu.Unlock()
			if *profileDir != "" && at >= nextProfile {
				r.profile(ctx, fmt.Sprintf("heap-%03.0fs.pb.gz", at.Seconds()))
				nextProfile += time.Minute
			}
		}
	}
}

// profile saves the launcher's heap profile as name in -profile_dir.
func (r *rssSampler) profile(ctx context.Context, name string) {
	if *profileDir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.debug+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		fmt.Printf("memory: heap profile %s: %v\n", name, err)
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Printf("memory: heap profile %s: %v\n", name, err)
		return
	}
	defer resp.Body.Close()
	path := filepath.Join(*profileDir, name)
	f, err := os.Create(path)
	if err != nil {
		fmt.Printf("memory: heap profile %s: %v\n", name, err)
		return
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		fmt.Printf("memory: heap profile %s: %v\n", name, err)
		return
	}
	r.mu.Lock()
	r.files = append(r.files, path)
	r.mu.Unlock()
}

// memory is the samples' summary.
func (r *rssSampler) memory() *Memory {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := &Memory{Samples: append([]RSSAt(nil), r.samples...), Profiles: r.files}
	var xs, ys []float64
	for _, s := range m.Samples {
		if s.Seconds >= 180 {
			if m.At3mMB == 0 {
				m.At3mMB = s.MB
			}
			xs, ys = append(xs, s.Seconds/60), append(ys, s.MB)
		}
		if s.Seconds >= 600 && m.At10mMB == 0 {
			m.At10mMB = s.MB
		}
	}
	switch {
	case m.At3mMB > 0 && m.At10mMB > 0:
		m.Ratio = round(m.At10mMB/m.At3mMB, 3)
	case m.At3mMB > 0:
		m.Ratio, m.RatioToLast = round(m.Samples[len(m.Samples)-1].MB/m.At3mMB, 3), true
	}
	if len(xs) >= 2 {
		var mx, my float64
		for i := range xs {
			mx, my = mx+xs[i], my+ys[i]
		}
		mx, my = mx/float64(len(xs)), my/float64(len(xs))
		var num, den float64
		for i := range xs {
			num += (xs[i] - mx) * (ys[i] - my)
			den += (xs[i] - mx) * (xs[i] - mx)
		}
		m.SlopeMBPerMin = round(num/den, 1)
	}
	return m
}

func (m *Memory) String() string {
	s := fmt.Sprintf("launcher RSS at 3 min %.0f MB", m.At3mMB)
	switch {
	case m.At10mMB > 0:
		s += fmt.Sprintf(", at 10 min %.0f MB: ratio %.2f (target <= 1.25)", m.At10mMB, m.Ratio)
	case m.RatioToLast:
		s += fmt.Sprintf(", at the end %.0f MB: ratio %.2f (the phase was shorter than 10 min)", m.Samples[len(m.Samples)-1].MB, m.Ratio)
	}
	s += fmt.Sprintf("; slope from 3 min %.1f MB/min; samples (s:MB)", m.SlopeMBPerMin)
	for _, x := range m.Samples {
		s += fmt.Sprintf(" %.0f:%.0f", x.Seconds, x.MB)
	}
	s += "; Go heap (s: objects/spans in use/free not returned/next GC, MB)"
	for _, x := range m.Samples {
		if x.HeapInuseMB > 0 {
			s += fmt.Sprintf(" %.0f:%.0f/%.0f/%.0f/%.0f", x.Seconds, x.HeapAllocMB, x.HeapInuseMB, x.HeapFreeMB, x.NextGCMB)
		}
	}
	return s
}

// Mutations is the launcher's Bigtable writes per reading read, from its
// ledger (--summary_json) at the end of the run.
type Mutations struct {
	Read int64 `json:"read"`
	// ReadingWrites are the writes of one reading's cells, of every kind
	// (the counted one, provisional ones on arrival and by early firings,
	// rewrites); ByKind splits them.
	ReadingWrites int64            `json:"reading_writes"`
	ByKind        map[string]int64 `json:"by_kind"`
	// Rows are the row mutations (ApplyBulk entries) Bigtable
	// acknowledged, rollup cells included.
	Rows            int64   `json:"row_mutations"`
	WritesPerRead   float64 `json:"reading_writes_per_reading"`
	RowsPerReading  float64 `json:"row_mutations_per_reading"`
	RollupRowWrites int64   `json:"rollup_row_writes"`
	// RollupRows are the BigQuery rollup rows routed: one a sensor-hour
	// when its hour closed on time, one more for each late firing.
	RollupRows int64 `json:"bigquery_rollup_rows"`
}

// mutations reads the launcher's ledger JSON.
func mutations(path string) (*Mutations, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("launcher ledger: %w", err)
	}
	var l ledger.Ledger
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("launcher ledger %s: %w", path, err)
	}
	m := &Mutations{Read: l.Read, ByKind: map[string]int64{}}
	for _, s := range l.Sinks {
		if s.Sink == deadletter.SinkBigQueryRollups {
			m.RollupRows += s.Routed
		}
		if s.Sink != deadletter.SinkBigtable {
			continue
		}
		m.Rows += s.Rows
		m.ReadingWrites += s.Written
		m.ByKind[hours.OriginReading.String()] += s.Written
		for _, o := range s.Other {
			kind, outcome, _ := cutLast(o.What)
			if outcome != ledger.Written {
				continue
			}
			if kind == hours.OriginRollup.String() {
				m.RollupRowWrites += o.N
				continue
			}
			m.ByKind[kind] += o.N
			m.ReadingWrites += o.N
		}
	}
	if m.Read > 0 {
		m.WritesPerRead = round(float64(m.ReadingWrites)/float64(m.Read), 3)
		m.RowsPerReading = round(float64(m.Rows)/float64(m.Read), 3)
	}
	return m, nil
}

// cutLast splits "kind outcome".
func cutLast(s string) (kind, outcome string, ok bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func (m *Mutations) String() string {
	return fmt.Sprintf("Bigtable: %d readings read, %d reading writes (%.2f per reading: %v), %d row mutations (%.2f per reading), %d rollup-only row writes",
		m.Read, m.ReadingWrites, m.WritesPerRead, m.ByKind, m.Rows, m.RowsPerReading, m.RollupRowWrites)
}
