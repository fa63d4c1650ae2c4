package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/bigtable"
	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bench"
)

var (
	backlogMode = flag.Bool("backlog", false, "Instead of the two phases, the stream-backlog comparison: -readings readings (default 200,000 here) from -sensors sensors (default 1,000 here), "+
		"all in the current hour, published first to each side's own Pub/Sub emulator; the launcher (--source=pubsub, its defaults) drains its subscription into a fresh Bigtable emulator, "+
		"then a plain Go subscriber (the -plain_* flags) drains the other into another; readings count when their probe cell lands in Bigtable.")
	backlogPoll    = flag.Duration("backlog_poll", 500*time.Millisecond, "-backlog: how often each side's landed probe cells are counted in its Bigtable emulator.")
	backlogSample  = flag.Int("backlog_sample", 20, "-backlog: the polls count the landed readings of one sensor in this many (estimating the rest), and all of them once those are complete.")
	backlogTimeout = flag.Duration("backlog_timeout", 5*time.Minute, "-backlog: the most one side may take to land every reading.")
	cpuProfile     = flag.String("cpuprofile", "", "-backlog: save a CPU profile of the launcher (from its --debug_addr) over -cpuprofile_seconds of its drain, from its first landed reading, to this file.")
	cpuProfileSecs = flag.Int("cpuprofile_seconds", 15, "-backlog: the length of -cpuprofile's profile.")
)

// Backlog is the stream-backlog comparison's figures.
type Backlog struct {
	Machine        bench.Machine `json:"machine"`
	Time           string        `json:"time"`
	Readings       int           `json:"readings"`
	Sensors        int           `json:"sensors"`
	PublishSeconds float64       `json:"publish_seconds"`
	WarmupSeconds  float64       `json:"warmup_seconds,omitempty"`
	PublishPerSec  float64       `json:"publish_readings_per_sec"`
	LauncherArgs   []string      `json:"launcher_args"`
	Pipeline       *BacklogSide  `json:"pipeline,omitempty"`
	Plain          *BacklogSide  `json:"plain,omitempty"`
	Ratio          float64       `json:"rate_ratio_pipeline_over_plain,omitempty"`
	// EndToEndRatio is the rates' ratio over the whole drain, each side's
	// start-up included: the contract's.
	EndToEndRatio   float64 `json:"end_to_end_rate_ratio_pipeline_over_plain,omitempty"`
	CPURatio        float64 `json:"cpu_per_reading_ratio_pipeline_over_plain,omitempty"`
	HourClosed      bool    `json:"hour_closed_during_run"`
	Profile         string  `json:"launcher_cpu_profile,omitempty"`
	LauncherSummary string  `json:"launcher_summary,omitempty"`
	PlainSummary    string  `json:"plain_summary,omitempty"`
	TotalSeconds    float64 `json:"total_seconds"`
	Error           string  `json:"error,omitempty"`
}

// BacklogSide is one side's drain of the backlog, timed by its readings'
// landing: the polls of its Bigtable emulator that count the probe cells.
type BacklogSide struct {
	Name string `json:"name"`
	// FirstLandedSeconds and AllLandedSeconds are from the side's process
	// start to the end of the first poll that counted a landed reading,
	// and to the moment a poll found the sample complete, when a count of
	// the whole table after it confirmed every reading.
	FirstLandedSeconds float64 `json:"first_landed_seconds"`
	AllLandedSeconds   float64 `json:"all_landed_seconds"`
	// ConfirmSeconds is how long the count of the whole table took that
	// confirmed every reading had landed, after the poll that found the
	// sample complete (the all-landed moment).
	ConfirmSeconds float64 `json:"confirm_seconds,omitempty"`
	// ReadingsPerSec is the readings landed between those two polls over
	// the time between them (a side's start-up left out);
	// EndToEndPerSec is every reading over AllLandedSeconds.
	ReadingsPerSec float64 `json:"readings_per_sec"`
	EndToEndPerSec float64 `json:"end_to_end_readings_per_sec"`
	// DrainReadings landed between the two polls; the CPU figures are over
	// the same span: the side's process, its Bigtable emulator and its
	// Pub/Sub emulator.
	DrainReadings      int64   `json:"drain_readings"`
	DrainSeconds       float64 `json:"drain_seconds"`
	CPUSeconds         float64 `json:"cpu_seconds"`
	CPUMicrosPerRead   float64 `json:"cpu_us_per_reading"`
	BigtableCPUSeconds float64 `json:"bigtable_emulator_cpu_seconds"`
	PubSubCPUSeconds   float64 `json:"pubsub_emulator_cpu_seconds"`
	// StartCPUSeconds is the process's CPU from its start to the first
	// landed reading (the launcher's includes prism's start-up).
	StartCPUSeconds float64 `json:"start_cpu_seconds"`
	RSSMB           float64 `json:"rss_mb"` // at the last poll
	// Heap is the launcher's Go heap at the last poll, from its
	// /debug/vars (the pipeline side only): how much of RSSMB is objects,
	// and how much spans free or the collector's headroom.
	Heap  *RSSAt   `json:"heap,omitempty"`
	Polls []Landed `json:"polls"`
}

// Landed is a poll's count of landed readings, Seconds after the side's
// process started: estimated from the sample's rows (landingSample)
// until the last poll, which counts them all.
type Landed struct {
	Seconds float64 `json:"s"`
	Count   int64   `json:"landed"`
}

// backlogDefaults gives -readings and -sensors the comparison's defaults
// unless they were set.
func backlogDefaults() {
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["readings"] {
		*readings = 200_000
	}
	if !set["sensors"] {
		*sensors = 1000
	}
	if !set["out"] {
		*outFlag = ".run/bench-stream-backlog.json"
	}
}

// runBacklog runs the stream-backlog comparison.
func runBacklog(ctx context.Context) (err error) {
	backlogDefaults()
	switch {
	case *readings < 1 || *sensors < 1 || *sensors > maxSensors:
		return fmt.Errorf("-readings must be positive and -sensors in 1..%d", maxSensors)
	case *backlogPoll <= 0 || *backlogTimeout <= 0 || *backlogSample < 1 || *backlogSample > *sensors:
		return errors.New("-backlog_poll and -backlog_timeout must be positive, -backlog_sample in 1..-sensors")
	case *backlogWarmup < -1:
		return errors.New("-backlog_warmup must be -1 (as many as -readings), 0 (none) or a number of messages")
	}
	began := time.Now()
	rep := &Backlog{Machine: bench.ThisMachine(), Time: began.UTC().Format(time.RFC3339), Readings: *readings, Sensors: *sensors}
	fmt.Printf("machine: %s\n", rep.Machine)
	defer func() {
		if err != nil {
			rep.Error = err.Error()
		}
		rep.TotalSeconds = round(time.Since(began).Seconds(), 1)
		if werr := writeJSON(rep); err == nil {
			err = werr
		}
	}()
	work, done, err := bench.WorkDir("sensorpipe-bench-backlog-", *keep)
	if err != nil {
		return err
	}
	defer done()
	self, err := os.Executable()
	if err != nil {
		return err
	}

	// The emulators and the launcher build, at once. Each side has its own
	// Pub/Sub emulator, as it has its own Bigtable emulator, warmed the
	// same way: with one emulator for both, the side that drained first
	// cost it 1.5-1.9 times the CPU of the side that drained second,
	// whichever side that was (docs/performance.md).
	var (
		wg                               sync.WaitGroup
		btPipe, btPlain, psPipe, psPlain *bench.Emulator
		bin                              string
		errs                             [5]error
	)
	wg.Add(5)
	go func() { defer wg.Done(); btPipe, errs[0] = bench.StartBigtable() }()
	go func() { defer wg.Done(); btPlain, errs[1] = bench.StartBigtable() }()
	go func() { defer wg.Done(); psPipe, errs[2] = bench.StartPubSub() }()
	go func() { defer wg.Done(); psPlain, errs[3] = bench.StartPubSub() }()
	go func() {
		defer wg.Done()
		if bin = *launcherBin; bin == "" {
			bin, errs[4] = bench.BuildLauncher(ctx, work)
		}
	}()
	wg.Wait()
	for _, e := range []*bench.Emulator{btPipe, btPlain, psPipe, psPlain} {
		if e != nil {
			defer e.Stop()
		}
	}
	if err := errors.Join(errs[:]...); err != nil {
		return err
	}
	fmt.Printf("emulators: pipeline: Pub/Sub pid %d on %s, Bigtable pid %d on %s; plain subscriber: Pub/Sub pid %d on %s, Bigtable pid %d on %s\n",
		psPipe.PID, psPipe.HostPort, btPipe.PID, btPipe.HostPort, psPlain.PID, psPlain.HostPort, btPlain.PID, btPlain.HostPort)

	topic := "projects/" + project + "/topics/" + target.spec.Name
	subPipe, subPlain := "projects/"+project+"/subscriptions/"+target.spec.Name+"-pipeline", "projects/"+project+"/subscriptions/"+target.spec.Name+"-plain"
	pubPipe, err := backlogPublisher(ctx, psPipe, topic, subPipe, rep)
	if err != nil {
		return err
	}
	defer pubPipe.close()
	pubPlain, err := backlogPublisher(ctx, psPlain, topic, subPlain, rep)
	if err != nil {
		return err
	}
	defer pubPlain.close()

	// The backlog: every reading published before either side starts,
	// with event times of now (each sensor's in time order), all in the
	// current hour: near its end they stop 10 s before it.
	hourEnd := began.UTC().Truncate(time.Hour).Add(time.Hour)
	start := time.Now()
	ls := newLandingSample()
	for i := range *readings {
		s := throughputSensor0 + i%*sensors
		at := time.Now()
		if lim := hourEnd.Add(-10 * time.Second); at.After(lim) {
			at = lim
		}
		ms := pubPipe.clock.Next(s, at)
		ls.add(s, ms)
		pubPipe.send(ctx, s, ms, nil)
		pubPlain.send(ctx, s, ms, nil)
	}
	for _, pub := range []*publisher{pubPipe, pubPlain} {
		if err := pub.waitAnswered(ctx); err != nil {
			return err
		}
		if n := pub.failed.Load(); n > 0 {
			return fmt.Errorf("%d publishes failed: %w", n, pub.firstError())
		}
	}
	rep.PublishSeconds = round(time.Since(start).Seconds(), 2)
	rep.PublishPerSec = round(float64(*readings)/rep.PublishSeconds, 0)
	fmt.Printf("backlog: %d readings of %d sensors published to %s on each side's emulator (subscriptions %s and %s) in %.1fs = %.0f/s\n",
		*readings, *sensors, topic, subPipe, subPlain, rep.PublishSeconds, rep.PublishPerSec)

	// The pipeline side: the launcher, as users run it, Bigtable only.
	port, err := emulators.FreeLoopbackPort()
	if err != nil {
		return err
	}
	debug := fmt.Sprintf("127.0.0.1:%d", port)
	args := []string{"--source=pubsub", "--subscription=" + subPipe, "--timestamp_attribute=event_ts", "--id_attribute=record_id",
		"--early_firing=" + earlyFiring.String(),
		"--bigtable_project=" + project, "--bigtable_instance=" + instance, "--bigtable_table=" + target.table, "--spec=" + target.spec.Name,
		"--dead_letter=" + filepath.Join(work, "deadletter"), "--progress_interval=1s",
		"--summary_json=" + filepath.Join(work, "ledger.json"), "--debug_addr=" + debug}
	args = append(args, strings.Fields(*launcherArgs)...)
	rep.LauncherArgs = args
	env := []string{"BIGTABLE_EMULATOR_HOST=" + btPipe.HostPort, "PUBSUB_EMULATOR_HOST=" + psPipe.HostPort}
	j, err := startJob(bin, filepath.Join(work, "launcher.stderr"), env, args...)
	if err != nil {
		return err
	}
	fmt.Printf("pipeline: launcher pid %d: %s %s\n", j.cmd.Process.Pid, filepath.Base(bin), strings.Join(args, " "))
	var profiled chan error
	onFirst := func() {
		if *cpuProfile == "" {
			return
		}
		profiled = make(chan error, 1)
		go func() { profiled <- fetchProfile(ctx, debug, *cpuProfile, *cpuProfileSecs) }()
	}
	rep.Pipeline, err = drain(ctx, "pipeline", j.cmd.Process.Pid, j.started, btPipe, psPipe, ls, debug, j.exited, onFirst)
	if profiled != nil {
		if perr := <-profiled; perr != nil {
			fmt.Printf("pipeline: CPU profile: %v\n", perr)
		} else {
			rep.Profile = *cpuProfile
			fmt.Printf("pipeline: CPU profile of %ds of the drain in %s\n", *cpuProfileSecs, *cpuProfile)
		}
	}
	summary, serr := j.stop()
	rep.LauncherSummary = summary
	if err := errors.Join(err, serr); err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	if n, first := j.errorLines(); n > 0 {
		fmt.Printf("pipeline: the launcher logged %d ERROR lines; the first: %s\n", n, first)
	}

	// The plain side: this program as the plain subscriber.
	cmd := exec.CommandContext(ctx, self, "-plain_subscriber="+subPlain, fmt.Sprintf("-plain_streams=%d", *plainStreams),
		fmt.Sprintf("-plain_batch=%d", *plainBatch), fmt.Sprintf("-plain_in_flight=%d", *plainInFlight), "-plain_flush_after="+plainFlushAfter.String())
	cmd.Env = append(os.Environ(), "BIGTABLE_EMULATOR_HOST="+btPlain.HostPort, "PUBSUB_EMULATOR_HOST="+psPlain.HostPort)
	var out tailBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	plainStart := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("plain subscriber: %w", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var exitErr error
	exited := func() error {
		select {
		case exitErr = <-waited:
			return fmt.Errorf("the plain subscriber exited (%v):\n%s", exitErr, out.String())
		default:
			return nil
		}
	}
	fmt.Printf("plain: subscriber pid %d: %s\n", cmd.Process.Pid, strings.Join(cmd.Args, " "))
	rep.Plain, err = drain(ctx, "plain", cmd.Process.Pid, plainStart, btPlain, psPlain, ls, "", exited, nil)
	if exitErr == nil {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-waited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-waited
		}
	}
	rep.PlainSummary = strings.TrimSpace(out.String())
	if err != nil {
		return fmt.Errorf("plain: %w", err)
	}

	p, q := rep.Pipeline, rep.Plain
	rep.Ratio = round(p.ReadingsPerSec/q.ReadingsPerSec, 3)
	rep.EndToEndRatio = round(p.EndToEndPerSec/q.EndToEndPerSec, 3)
	rep.CPURatio = round(p.CPUMicrosPerRead/q.CPUMicrosPerRead, 2)
	rep.HourClosed = time.Now().UTC().After(hourEnd)
	fmt.Printf("\n%d readings of %d sensors, drained by each side from its own subscription into its own Bigtable emulator:\n", *readings, *sensors)
	fmt.Printf("  %-9s %12s %12s %14s %12s %12s %10s\n", "side", "readings/s", "end to end", "CPU/reading", "Bigtable emu", "Pub/Sub emu", "start CPU")
	for _, s := range []*BacklogSide{p, q} {
		fmt.Printf("  %-9s %12.0f %12.0f %11.1f µs %10.1f s %10.1f s %8.1f s\n", s.Name, s.ReadingsPerSec, s.EndToEndPerSec, s.CPUMicrosPerRead,
			s.BigtableCPUSeconds, s.PubSubCPUSeconds, s.StartCPUSeconds)
	}
	fmt.Printf("  ratio pipeline/plain: %.2f readings/s end to end, start-up included (target >= 0.9); %.2f from each side's first landed reading; CPU per reading %.2fx (target <= 1.5)\n",
		rep.EndToEndRatio, rep.Ratio, rep.CPURatio)
	fmt.Printf("  (rates and CPU from the first landed reading to the last; emulators' CPU over the same span; end to end includes each side's start-up)\n")
	if rep.HourClosed {
		fmt.Printf("  the readings' hour closed during the run: the pipeline's on-time firing may have come within it\n")
	}
	fmt.Printf("pipeline launcher's summary:\n%s\nplain subscriber: %s\n", indent(rep.LauncherSummary), rep.PlainSummary)
	return nil
}

// backlogPublisher connects to the Pub/Sub emulator ps, warms it up
// (-backlog_warmup) and returns a publisher to topic, created there with
// its one subscription sub. The client is closed with the publisher.
func backlogPublisher(ctx context.Context, ps *bench.Emulator, topic, sub string, rep *Backlog) (*publisher, error) {
	// The clients take their emulator from PUBSUB_EMULATOR_HOST; the
	// emulators are set up one after the other.
	os.Setenv("PUBSUB_EMULATOR_HOST", ps.HostPort)
	c, err := pubsub.NewClient(ctx, project)
	if err != nil {
		return nil, fmt.Errorf("pubsub client: %w", err)
	}
	if n := warmupMessages(); n > 0 {
		took, err := warmPubSub(ctx, c, project, n)
		if err != nil {
			c.Close()
			return nil, err
		}
		rep.WarmupSeconds = round(rep.WarmupSeconds+took.Seconds(), 1)
		fmt.Printf("warm-up of %s: %d messages published and drained by Pull and by Receive in %.1fs (the emulator's pull paths compiled before its side drains)\n",
			ps.HostPort, n, took.Seconds())
	}
	pub, err := newPublisher(ctx, c, topic, sub)
	if err != nil {
		c.Close()
		return nil, err
	}
	pub.onClose = func() { c.Close() }
	return pub, nil
}

// warmupMessages is -backlog_warmup, or -readings where it is -1.
func warmupMessages() int {
	if *backlogWarmup == -1 {
		return *readings
	}
	return *backlogWarmup
}

// drain polls bt until all -readings readings have landed and returns
// the side's figures; started is its process start, exited reports its
// end; debug, if set, is its --debug_addr, for its Go heap's figures at
// the end; onFirst, if set, runs at the first poll that counts a reading.
func drain(ctx context.Context, name string, pid int, started time.Time, bt, ps *bench.Emulator, ls *landingSample, debug string, exited func() error, onFirst func()) (*BacklogSide, error) {
	s := &BacklogSide{Name: name}
	// The client takes its emulator from BIGTABLE_EMULATOR_HOST (over
	// any endpoint option); the sides are drained one after the other.
	os.Setenv("BIGTABLE_EMULATOR_HOST", bt.HostPort)
	c, err := bigtable.NewClientWithConfig(ctx, project, instance, bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}})
	if err != nil {
		return s, fmt.Errorf("bigtable client: %w", err)
	}
	defer c.Close()
	cnt := &landedCounter{tbl: c.Open(target.table), sample: ls, total: int64(*readings)}
	n := int64(*readings)
	deadline := time.Now().Add(*backlogTimeout)
	tick := time.NewTicker(*backlogPoll)
	defer tick.Stop()
	// moment is an instant of the drain with the CPU seconds the side's
	// process and its emulators had used by then.
	type moment struct {
		at           time.Time
		proc, bt, ps float64
	}
	mark := func() moment {
		return moment{time.Now(), bench.ProcessCPUSeconds(pid), bt.CPUSeconds(), ps.CPUSeconds()}
	}
	var (
		first  *Landed
		start0 moment // at the first landed reading
	)
	for {
		if err := exited(); err != nil {
			return s, err
		}
		pctx, cancel := context.WithDeadline(ctx, deadline)
		var sampled *moment // when the sample was found complete
		landed, counted, err := cnt.count(pctx, func() { m := mark(); sampled = &m })
		cancel()
		if err != nil {
			return s, err
		}
		if !counted {
			landed = min(landed, n-1) // an estimate is never all
		}
		end := mark()
		if counted && landed >= n && sampled != nil {
			// The moment the sample was complete, which the whole table's
			// count then confirmed; not the end of that count, which
			// takes seconds and would count in each side's time.
			s.ConfirmSeconds = round(end.at.Sub(sampled.at).Seconds(), 1)
			end = *sampled
		}
		now := end.at
		at := Landed{Seconds: round(now.Sub(started).Seconds(), 3), Count: landed}
		s.Polls = append(s.Polls, at)
		if first == nil && landed > 0 {
			first, start0 = &at, end
			s.FirstLandedSeconds = at.Seconds
			s.StartCPUSeconds = round(start0.proc, 2)
			fmt.Printf("%s: first readings landed %.1fs after its start (%d)\n", name, at.Seconds, landed)
			if onFirst != nil {
				onFirst()
			}
		}
		if landed >= n {
			s.AllLandedSeconds = at.Seconds
			s.DrainReadings = landed - first.Count
			s.DrainSeconds = round(at.Seconds-first.Seconds, 3)
			s.CPUSeconds = round(end.proc-start0.proc, 2)
			s.BigtableCPUSeconds = round(end.bt-start0.bt, 2)
			s.PubSubCPUSeconds = round(end.ps-start0.ps, 2)
			s.RSSMB = rssMB(pid)
			heap := ""
			if debug != "" {
				s.Heap = &RSSAt{Seconds: at.Seconds, MB: s.RSSMB}
				heapFigures(ctx, debug, s.Heap)
				heap = fmt.Sprintf(" (Go heap: objects %.0f MB, spans in use %.0f, free not returned %.0f, next collection at %.0f)",
					s.Heap.HeapAllocMB, s.Heap.HeapInuseMB, s.Heap.HeapFreeMB, s.Heap.NextGCMB)
			}
			if s.DrainSeconds > 0 && s.DrainReadings > 0 {
				s.ReadingsPerSec = round(float64(s.DrainReadings)/s.DrainSeconds, 0)
				s.CPUMicrosPerRead = round(s.CPUSeconds*1e6/float64(s.DrainReadings), 1)
			}
			s.EndToEndPerSec = round(float64(n)/at.Seconds, 0)
			fmt.Printf("%s: all %d landed %.1fs after its start: %.0f readings/s over %.1fs from the first landed; CPU %.1fs = %.1f µs a reading; Bigtable emulator %.1fs, Pub/Sub emulator %.1fs; RSS %.0f MB%s (the sample complete then; the count of the whole table that confirmed it took %.1fs more)\n",
				name, n, at.Seconds, s.ReadingsPerSec, s.DrainSeconds, s.CPUSeconds, s.CPUMicrosPerRead, s.BigtableCPUSeconds, s.PubSubCPUSeconds, s.RSSMB, heap, s.ConfirmSeconds)
			if landed > n {
				return s, fmt.Errorf("%d readings landed, more than the %d published", landed, n)
			}
			return s, nil
		}
		if now.After(deadline) {
			return s, fmt.Errorf("%d of %d readings landed within %v", landed, n, *backlogTimeout)
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-tick.C:
		}
	}
}

// landingSample is the rows whose probe cells the polls count: those of
// one sensor in -backlog_sample, with the readings each gets. A poll
// that reads every row copies each whole row in the emulator (every
// cell of every column), which for a table of 200,000 readings costs
// the emulator seconds a poll and slows the side it measures; the
// readings are spread evenly over the sensors (round robin), so the
// sample's share landed is the backlog's, and once the sample has all
// its readings, a count of the whole table confirms the rest.
type landingSample struct {
	rows     map[string]int64 // row key: the readings published into it
	readings int64
}

func newLandingSample() *landingSample { return &landingSample{rows: map[string]int64{}} }

// add notes a published reading.
func (ls *landingSample) add(sensor int, eventMs int64) {
	if sensor%*backlogSample != 0 {
		return
	}
	ls.rows[rowKey(sensor, eventMs)]++
	ls.readings++
}

// countRows counts the probe cells in rows (all rows when rows is nil):
// one a reading.
func countRows(ctx context.Context, tbl *bigtable.Table, rows bigtable.RowSet) (int64, error) {
	if rows == nil {
		rows = bigtable.InfiniteRange("")
	}
	var n int64
	err := tbl.ReadRows(ctx, rows, func(r bigtable.Row) bool {
		n += int64(len(r[target.family]))
		return true
	}, bigtable.RowFilter(probeCells())) // a column range: no regular expression for the emulator to compile a cell
	if status.Code(err) == codes.NotFound {
		return 0, nil // the side has not created its table yet
	}
	if err != nil {
		return 0, fmt.Errorf("count landed readings: %w", err)
	}
	return n, nil
}

// landedCounter estimates the readings landed in a table from the
// sample's rows, and counts them all once the sample is complete.
type landedCounter struct {
	tbl    *bigtable.Table
	sample *landingSample
	keys   bigtable.RowList
	total  int64 // readings published
}

// count returns the readings landed (estimated from the sample until it
// is complete, counted after) and whether that figure is a full count.
// It calls sampled when it finds the sample complete, before it counts the
// whole table.
func (c *landedCounter) count(ctx context.Context, sampled func()) (int64, bool, error) {
	if c.keys == nil {
		for k := range c.sample.rows {
			c.keys = append(c.keys, k)
		}
	}
	n, err := countRows(ctx, c.tbl, c.keys)
	if err != nil || n < c.sample.readings {
		return int64(math.Round(float64(n) * float64(c.total) / float64(c.sample.readings))), false, err
	}
	sampled()
	all, err := countRows(ctx, c.tbl, nil)
	return all, true, err
}

// fetchProfile saves a CPU profile of secs seconds from the launcher's
// debug server at addr to path.
func fetchProfile(ctx context.Context, addr, path string, secs int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs+30)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1000))
		return fmt.Errorf("profile: %s: %s", resp.Status, b)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
