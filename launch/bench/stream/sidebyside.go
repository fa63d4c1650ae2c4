package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// SideBySide is -side_by_side's figures: the runs without the cadence
// (Plain) and with it (Cadenced), alternately, and the ratios of their
// medians, cadenced over plain.
type SideBySide struct {
	Cadence  string    `json:"cadence"`
	Plain    []*Report `json:"plain"`
	Cadenced []*Report `json:"cadenced"`
	// ReadRateRatio is the throughput phase's read rate (readings/s);
	// EndToEndRatio its end-to-end rate; LauncherCPURatio the launcher's
	// CPU seconds per reading in that phase; P99Ratio the latency phase's
	// p99.
	ReadRateRatio    float64 `json:"read_rate_ratio"`
	EndToEndRatio    float64 `json:"end_to_end_ratio"`
	LauncherCPURatio float64 `json:"launcher_cpu_per_reading_ratio"`
	P99Ratio         float64 `json:"p99_ratio,omitempty"`
	// LoadBefore and LoadAfter are the machine's load averages (uptime)
	// when the runs began and ended: on a shared machine only the ratios
	// of runs close in time mean much.
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`
}

// runSideBySide runs the launcher -pairs times without -cadence and with
// it, alternately (plain first), and writes both sides' figures and the
// ratios of their medians to -out.
func runSideBySide(ctx context.Context) error {
	if *cadence <= 0 {
		return fmt.Errorf("-side_by_side needs -cadence")
	}
	if *pairs < 1 {
		return fmt.Errorf("-pairs must be at least 1")
	}
	sb := &SideBySide{Cadence: cadence.String(), LoadBefore: load()}
	fmt.Printf("side by side: %d runs each without and with cadence %s; load %s\n", *pairs, sb.Cadence, sb.LoadBefore)
	for i := 0; i < *pairs; i++ {
		for _, cad := range []time.Duration{0, *cadence} {
			fmt.Printf("\n== run %d of %d, cadence %v ==\n", i+1, *pairs, cad)
			rep, err := runOne(ctx, cad)
			if cad == 0 {
				sb.Plain = append(sb.Plain, rep)
			} else {
				sb.Cadenced = append(sb.Cadenced, rep)
			}
			if err != nil {
				sb.LoadAfter = load()
				_ = writeJSON(sb)
				return err
			}
		}
	}
	sb.LoadAfter = load()
	pick := func(reps []*Report, f func(*Report) (float64, bool)) float64 {
		var xs []float64
		for _, r := range reps {
			if v, ok := f(r); ok {
				xs = append(xs, v)
			}
		}
		return median(xs)
	}
	ratio := func(f func(*Report) (float64, bool)) float64 {
		p, c := pick(sb.Plain, f), pick(sb.Cadenced, f)
		if p == 0 {
			return 0
		}
		return round(c/p, 3)
	}
	readRate := func(r *Report) (float64, bool) {
		return tput(r, func(t *Throughput) float64 { return t.ReadingsPerSec })
	}
	endToEnd := func(r *Report) (float64, bool) {
		return tput(r, func(t *Throughput) float64 { return t.EndToEndPerSec })
	}
	cpu := func(r *Report) (float64, bool) {
		return tput(r, func(t *Throughput) float64 { return t.CPU.Launcher / float64(t.Readings) })
	}
	p99 := func(r *Report) (float64, bool) {
		if r == nil || r.Latency == nil {
			return 0, false
		}
		return r.Latency.P99ms, r.Latency.P99ms > 0
	}
	sb.ReadRateRatio, sb.EndToEndRatio, sb.LauncherCPURatio, sb.P99Ratio = ratio(readRate), ratio(endToEnd), ratio(cpu), ratio(p99)
	fmt.Printf("\nside by side (cadence %s over none, medians of %d runs each; load before %s, after %s):\n", sb.Cadence, *pairs, sb.LoadBefore, sb.LoadAfter)
	for _, side := range []struct {
		name string
		reps []*Report
	}{{"plain", sb.Plain}, {"cadence", sb.Cadenced}} {
		for i, r := range side.reps {
			rr, _ := readRate(r)
			ee, _ := endToEnd(r)
			c, _ := cpu(r)
			p, _ := p99(r)
			fmt.Printf("  %-8s run %d: read %.0f readings/s, end to end %.0f/s, launcher CPU %.1f µs/reading, p99 %.0f ms\n", side.name, i+1, rr, ee, c*1e6, p)
		}
	}
	fmt.Printf("  ratios: read rate %.3f, end to end %.3f, launcher CPU per reading %.3f, p99 %.3f\n", sb.ReadRateRatio, sb.EndToEndRatio, sb.LauncherCPURatio, sb.P99Ratio)
	return writeJSON(sb)
}

// tput is f of r's throughput phase, when it ran.
func tput(r *Report, f func(*Throughput) float64) (float64, bool) {
	if r == nil || r.Throughput == nil || r.Throughput.Readings == 0 {
		return 0, false
	}
	v := f(r.Throughput)
	return v, v > 0
}

// median is xs's median (0: none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// load is uptime's load averages, or why not.
func load() string {
	out, err := exec.Command("uptime").Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	s := strings.TrimSpace(string(out))
	if i := strings.Index(s, "load average"); i >= 0 {
		return s[i:]
	}
	return s
}
