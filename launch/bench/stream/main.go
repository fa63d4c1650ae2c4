// Command stream measures sensorpipe's streaming job as users run it: the
// launcher (built from ./launch) with --source=pubsub on prism, reading a
// Pub/Sub emulator and writing a Bigtable emulator and a BigQuery emulator.
// It starts all three emulators itself (Bigtable and Pub/Sub as processes
// through internal/testrig/emulators, BigQuery in this process with launch/bqemulator/bqemu)
// and stops them, and the launcher, by their PIDs when it ends, also on
// errors and Ctrl-C.
//
//	go run ./launch/bench/stream                       # both phases, about 100 s on 2 cores
//	go run ./launch/bench/stream -readings 200000 -rate 4000 -duration 30s
//
// It measures, one phase after the other on one running launcher:
//
//  1. Throughput: -readings readings published as fast as the in-process
//     publisher can (event times of now, attribute event_ts), and the rate
//     at which the launcher reads them, from its progress lines ("read N"
//     every second): readings/s between the first progress line that shows
//     them and the one where all are read. It then checks every one of them
//     has its cells in Bigtable.
//     With -per_message N each message carries N readings (NDJSON lines),
//     and the phase reports the Pub/Sub bytes billed per reading.
//  2. Latency: readings published at a steady -rate for -duration, each
//     sensor at -rate/-sensors Hz; one sensor in -sample is sampled, so one
//     reading in -sample, evenly over time. A sampled reading is visible
//     once its probe cell (the default spec's first column holding a
//     required field, target.go), at its event time, can be read from its
//     row. -pollers goroutines each
//     read their share of the sampled rows every -poll_interval, one
//     ReadRows per poll restricted to the waiting readings' cells. The
//     latency is from just before Publish to the poll that read the cell;
//     readings not seen within -deadline of their publish are failures:
//     counted, reported and ranked above every observed latency in the
//     percentiles. The target is p99 <= early firing + 2s.
//
// Each phase writes its own sensors' rows, so the second never re-fires the
// first's windows (but prism keeps them in memory, which costs it CPU). The
// figures also come by publish time, in 10-second slices, so that a latency
// that grows through the phase shows (each early firing writes only the
// readings it brings, but the runner's state grows with the open hours).
//
// The BigQuery sink is on, but a stream sends a reading to BigQuery only
// when its hour's window closes: unless the run crosses an hour, BigQuery
// gets no rows, and the report says so.
//
// With -backlog it measures instead the stream draining a backlog against
// a plain subscriber, side by side in one run (backlog.go): -readings
// readings (200,000 by default there) of -sensors sensors (1,000), all in
// the current hour, are published first to one topic with two
// subscriptions. The launcher (--source=pubsub, its defaults, Bigtable
// only) drains one into a fresh Bigtable emulator; then this program, run
// again as a plain Go subscriber (plainsub.go: the v2 client's Receive with
// 16 streams, the same cells through the schemas package, ApplyBulk batches
// of 1,000 rows with 4 in flight, acks after each write), drains the other
// into another fresh one. A reading counts when its probe cell lands (polls
// of each emulator, not the progress line); each side's rate and CPU per
// reading are from its first landed reading to its last, with its Bigtable
// emulator's and the Pub/Sub emulator's CPU over the same span.
//
//	go run ./launch/bench/stream -backlog                    # about 2 minutes on 2 cores
//	go run ./launch/bench/stream -backlog -readings 50000 -cpuprofile .run/stream-backlog.pprof
//
// The figures, with the machine and the CPU each process used, are printed
// and written as JSON to -out. They are benchmarks, not assertions, and on
// a shared machine they are noisy.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"cloud.google.com/go/bigtable"
	"cloud.google.com/go/pubsub/v2"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bench"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
)

var (
	readings     = flag.Int("readings", 100_000, "Throughput phase: readings published as fast as possible (0 skips the phase). With -backlog: the backlog's readings (default 200,000 there).")
	tputSensors  = flag.Int("throughput_sensors", 2000, "Throughput phase: distinct sensors the readings cycle through.")
	rate         = flag.Float64("rate", 2000, "Latency phase: readings per second, published at a steady pace (0 skips the phase).")
	duration     = flag.Duration("duration", 60*time.Second, "Latency phase: how long to publish at -rate.")
	sensors      = flag.Int("sensors", 2000, "Latency phase: distinct sensors, each reporting at -rate/-sensors Hz. With -backlog: the sensors the backlog's readings cycle through (default 1,000 there).")
	sampleEvery  = flag.Int("sample", 10, "Latency phase: watch the readings of one sensor in this many (one reading in this many).")
	pollers      = flag.Int("pollers", 4, "Latency phase: goroutines reading the sampled rows back from Bigtable.")
	pollInterval = flag.Duration("poll_interval", 100*time.Millisecond, "Latency phase: how often each poller reads its rows (the latency's resolution).")
	deadline     = flag.Duration("deadline", 30*time.Second, "Latency phase: a sampled reading not visible this long after its publish is a failure.")
	earlyFiring  = flag.Duration("early_firing", 10*time.Second, "The launcher's --early_firing; the p99 target is this plus 2s.")
	launcherBin  = flag.String("launcher", "", "A launcher binary to run instead of building ./launch.")
	launcherArgs = flag.String("launcher_args", "", "Extra launcher flags, space-separated (e.g. --bigquery_write_method=insert_all).")
	outFlag      = flag.String("out", ".run/bench-stream.json", "Write the figures as JSON to this file (empty: do not; with -backlog the default is .run/bench-stream-backlog.json).")
	keep         = flag.Bool("keep", false, "Keep the work directory (launcher binary, dead letters).")
	perMessage   = flag.Int("per_message", 1, "Throughput phase: readings each Pub/Sub message carries (NDJSON lines); the phase reports the read rate and the Pub/Sub bytes billed per reading (1 KB a message at least).")
	sideBySide   = flag.Bool("side_by_side", false, "With -cadence: run the launcher -pairs times without the cadence and with it, alternately, each on fresh emulators, and report each side's figures and their ratios (written to -out).")
	pairs        = flag.Int("pairs", 1, "With -side_by_side: how many runs each side gets.")
	cadence      = flag.Duration("cadence", 0, "Run the spec with this cadence declared (cadence: in a copy of schemas/specs/SPEC.yaml), so that the stream also tracks each sensor and raises silences to BigQuery's sensor_silences; compare its figures with a run without (0: the spec as it is).")
	hourCloseAt  = flag.Duration("hour_close_at", 0, "With -readings 0: move every event time back, from the warm-up on, so that the top of an hour falls this long after the warm-up's start (a few seconds before the latency phase's), and the hour's on-time firings come within the run (0: event times are the wall clock's; an hour then closes only if the run crosses one).")
)

const (
	project  = "bench"
	instance = "bench"
	warmup   = 200 // readings that show the job is reading before the phases
)

// Throughput is the throughput phase's figures.
type Throughput struct {
	Readings int `json:"readings"`
	Sensors  int `json:"sensors"`
	// PerMessage readings a message; Messages published; BytesPerReading
	// and BilledBytesPerReading the messages' data and attributes, and what
	// Pub/Sub bills for them (1 KB a message at least), per reading, for
	// one direction (publish; a subscription's delivery is billed alike).
	PerMessage            int     `json:"readings_per_message"`
	Messages              int64   `json:"messages"`
	BytesPerReading       float64 `json:"message_bytes_per_reading"`
	BilledBytesPerReading float64 `json:"billed_bytes_per_reading"`
	PublishSeconds        float64 `json:"publish_seconds"` // first Publish call to the last publish answered
	PublishPerSec         float64 `json:"publish_readings_per_sec"`
	// ReadingsPerSec is the launcher's read rate between the first progress
	// line showing the phase's readings and the first showing all of them.
	ReadingsPerSec float64 `json:"readings_per_sec"`
	// AllReadSeconds is from the first Publish call to the progress line
	// showing all read; EndToEndPerSec is Readings over it.
	AllReadSeconds float64      `json:"all_read_seconds"`
	EndToEndPerSec float64      `json:"end_to_end_readings_per_sec"`
	InBigtable     int64        `json:"in_bigtable"` // readings whose probe cell is there afterwards
	PublishFailed  int64        `json:"publish_failed"`
	CPU            CPU          `json:"cpu"`
	Progress       []ProgressAt `json:"progress"`
}

// ProgressAt is a launcher progress line, Seconds after the phase began,
// with the readings read and written to Bigtable since it began (locally a
// reading is written on arrival and by its firing, and again when its
// hour's close changes its imputation).
type ProgressAt struct {
	Seconds float64 `json:"s"`
	Read    int64   `json:"read"`
	Written int64   `json:"written"`
}

// Latency is the latency phase's figures. Percentiles are over every
// sampled reading published, those never seen ranking last.
type Latency struct {
	Rate            float64 `json:"rate"`
	Seconds         float64 `json:"seconds"`
	Sensors         int     `json:"sensors"`
	Published       int64   `json:"published"`
	PublishFailed   int64   `json:"publish_failed"`
	AchievedPerSec  float64 `json:"achieved_readings_per_sec"`
	SampleEvery     int     `json:"sample_every"`
	Sampled         int     `json:"sampled"`
	Seen            int     `json:"seen"`
	Missed          int     `json:"missed"` // not seen within the deadline: failures
	DeadlineSeconds float64 `json:"deadline_seconds"`
	P50ms           float64 `json:"p50_ms"` // -1: not seen within the deadline
	P90ms           float64 `json:"p90_ms"`
	P99ms           float64 `json:"p99_ms"`
	Maxms           float64 `json:"max_ms"`
	Minms           float64 `json:"min_ms"`
	// ByPublishTime is the latency by when the readings were published,
	// in 10s buckets from the phase's start, so that growth through the
	// phase shows.
	ByPublishTime []Bucket `json:"by_publish_time"`
	// MissedCells describes (up to 20 of) the missed readings, read again
	// at the end.
	MissedCells    []string `json:"missed_cells,omitempty"`
	TargetP99ms    float64  `json:"target_p99_ms"`
	TargetMet      bool     `json:"target_met"`
	PollIntervalms float64  `json:"poll_interval_ms"`
	Pollers        int      `json:"pollers"`
	PollReads      int64    `json:"poll_reads"`
	PollErrors     int64    `json:"poll_errors"`
	PollMeanms     float64  `json:"poll_mean_ms"` // mean duration of one poll's ReadRows
	CPU            CPU      `json:"cpu"`
	// Progress is the launcher's progress lines during the phase.
	Progress []ProgressAt `json:"progress"`
}

// CPU is the user+system CPU seconds each process used during a phase.
type CPU struct {
	Seconds  float64 `json:"wall_seconds"`
	Launcher float64 `json:"launcher"` // prism and the SDK harness run in it
	Bigtable float64 `json:"bigtable_emulator"`
	PubSub   float64 `json:"pubsub_emulator"`
	Bench    float64 `json:"bench"` // this process: publisher, pollers, BigQuery emulator
	// LauncherRSSMB is the launcher's resident memory at the phase's end:
	// prism keeps every window's readings in memory.
	LauncherRSSMB float64 `json:"launcher_rss_mb"`
}

// Report is the run's figures.
type Report struct {
	Machine     bench.Machine `json:"machine"`
	Time        string        `json:"time"`
	EarlyFiring string        `json:"early_firing"`
	Launcher    []string      `json:"launcher_args"`
	Throughput  *Throughput   `json:"throughput,omitempty"`
	Latency     *Latency      `json:"latency,omitempty"`
	// BigQueryRows is what the launcher counted into BigQuery by the end.
	BigQueryRows       int64  `json:"bigquery_rows"`
	DeadLetters        int64  `json:"dead_letters"`
	HourClosed         bool   `json:"hour_closed_during_run"`
	LauncherErrors     int    `json:"launcher_error_lines"`
	LauncherFirstError string `json:"launcher_first_error,omitempty"`
	LauncherSummary    string `json:"launcher_summary"`
	// Memory is the launcher's RSS over the latency phase; Mutations its
	// Bigtable writes per reading over the whole run.
	Memory       *Memory    `json:"memory,omitempty"`
	Mutations    *Mutations `json:"mutations,omitempty"`
	TotalSeconds float64    `json:"total_seconds"`
	// Cadence is the cadence declared in the spec's copy ("": none).
	Cadence string `json:"cadence,omitempty"`
	// Error is why the run stopped early, if it did.
	Error string `json:"error,omitempty"`
}

func main() {
	flag.Parse()
	if *plainSubscription != "" {
		if err := runPlainSubscriber(); err != nil {
			fmt.Fprintf(os.Stderr, "plain subscriber: %v\n", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := run
	if *backlogMode {
		run = runBacklog
	}
	if err := run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "stream: %v\n", err)
		os.Exit(1)
	}
}

func validate() error {
	switch {
	case *perMessage < 1 || *perMessage > 1000:
		return fmt.Errorf("-per_message must be in 1..1000")
	case *readings < 0 || *tputSensors < 1 || *tputSensors > maxSensors:
		return fmt.Errorf("-readings must be >= 0 and -throughput_sensors in 1..%d", maxSensors)
	case *rate < 0 || *duration <= 0 || *sensors < 1 || *sensors > maxSensors:
		return fmt.Errorf("-rate must be >= 0, -duration positive and -sensors in 1..%d", maxSensors)
	case *sampleEvery < 1 || *sampleEvery > *sensors:
		return fmt.Errorf("-sample must be in 1..-sensors")
	case *pollers < 1 || *pollInterval <= 0 || *deadline <= 0 || *earlyFiring <= 0:
		return fmt.Errorf("-pollers, -poll_interval, -deadline and -early_firing must be positive")
	case *hourCloseAt < 0 || *hourCloseAt > 0 && (*readings != 0 || *rate <= 0):
		return fmt.Errorf("-hour_close_at needs -readings 0 and a -rate: the latency phase must follow the warm-up at once (see hourShift)")
	}
	return nil
}

// hourShift is how far back to move event times so that the top of an
// hour falls at wall time at. Back, not ahead: the local reader never
// moves the watermark past the wall clock, so an hour ahead of it would
// not close within the run. And from the warm-up on: the warm-up's
// readings move the watermark to their event times, and readings behind
// it would all be late, each firing its hour again. For the same reason
// the latency phase must follow the warm-up within the reader's idle
// advance (3 s), after which the watermark moves to the wall clock.
func hourShift(at time.Time) time.Duration {
	return at.Truncate(time.Hour).Sub(at)
}

func run(ctx context.Context) error {
	if err := validate(); err != nil {
		return err
	}
	if *sideBySide {
		return runSideBySide(ctx)
	}
	rep, err := runOne(ctx, *cadence)
	// The figures so far, also when a phase failed.
	if werr := writeReport(rep); err == nil {
		err = werr
	}
	return err
}

// runOne runs the launcher once, with the spec's cadence declared as cad
// (0: the spec as it is), and returns its figures, so far when it failed.
func runOne(ctx context.Context, cad time.Duration) (rep *Report, err error) {
	began := time.Now()
	rep = &Report{Machine: bench.ThisMachine(), Time: began.UTC().Format(time.RFC3339), EarlyFiring: earlyFiring.String()}
	if cad > 0 {
		rep.Cadence = cad.String()
	}
	fmt.Printf("machine: %s\n", rep.Machine)
	defer func() {
		if err != nil {
			rep.Error = err.Error()
		}
		rep.TotalSeconds = round(time.Since(began).Seconds(), 1)
	}()
	work, done, err := bench.WorkDir("sensorpipe-bench-stream-", *keep)
	if err != nil {
		return rep, err
	}
	defer done()

	// The emulators and the launcher build, at once: the Pub/Sub emulator's
	// JVM takes seconds to start.
	var (
		wg                     sync.WaitGroup
		bt, ps                 *bench.Emulator
		bin                    string
		btErr, psErr, buildErr error
	)
	wg.Add(3)
	go func() { defer wg.Done(); bt, btErr = bench.StartBigtable() }()
	go func() { defer wg.Done(); ps, psErr = bench.StartPubSub() }()
	go func() {
		defer wg.Done()
		if bin = *launcherBin; bin == "" {
			bin, buildErr = bench.BuildLauncher(ctx, work)
		}
	}()
	wg.Wait()
	if bt != nil {
		defer bt.Stop()
	}
	if ps != nil {
		defer ps.Stop()
	}
	if err := errors.Join(btErr, psErr, buildErr); err != nil {
		return rep, err
	}
	bq, err := startBigQuery()
	if err != nil {
		return rep, err
	}
	defer bq.stop()
	fmt.Printf("emulators: Bigtable pid %d on %s, Pub/Sub pid %d on %s, BigQuery in this process on %s (REST) and %s (gRPC)\n",
		bt.PID, bt.HostPort, ps.PID, ps.HostPort, bq.rest, bq.grpc)
	os.Setenv("BIGTABLE_EMULATOR_HOST", bt.HostPort)
	os.Setenv("PUBSUB_EMULATOR_HOST", ps.HostPort)

	psClient, err := pubsub.NewClient(ctx, project)
	if err != nil {
		return rep, fmt.Errorf("pubsub client: %w", err)
	}
	defer psClient.Close()
	topic, sub := "projects/"+project+"/topics/"+target.spec.Name, "projects/"+project+"/subscriptions/"+target.spec.Name+"-bench"
	pub, err := newPublisher(ctx, psClient, topic, sub)
	if err != nil {
		return rep, err
	}
	defer pub.close()
	btClient, err := bigtable.NewClient(ctx, project, instance)
	if err != nil {
		return rep, fmt.Errorf("bigtable client: %w", err)
	}
	defer btClient.Close()
	tbl := btClient.Open(target.table)

	args := []string{"--source=pubsub", "--subscription=" + sub, "--timestamp_attribute=event_ts", "--id_attribute=record_id",
		"--early_firing=" + earlyFiring.String(),
		"--bigtable_project=" + project, "--bigtable_instance=" + instance, "--bigtable_table=" + target.table,
		"--bigquery_project=" + project, "--bigquery_dataset=" + target.spec.Name, "--spec=" + target.spec.Name,
		"--dead_letter=" + filepath.Join(work, "deadletter"), "--progress_interval=1s",
		"--summary_json=" + filepath.Join(work, "ledger.json")}
	// The debug server: the runtime's memory figures with each RSS
	// sample, and heap profiles with -profile_dir.
	if *profileDir != "" {
		if err := os.MkdirAll(*profileDir, 0o755); err != nil {
			return rep, err
		}
	}
	port, err := emulators.FreeLoopbackPort()
	if err != nil {
		return rep, err
	}
	debug := fmt.Sprintf("127.0.0.1:%d", port)
	args = append(args, "--debug_addr="+debug)
	if cad > 0 {
		path, err := cadencedSpec(work, target.spec.Name, cad)
		if err != nil {
			return rep, err
		}
		args = append(args, "--spec="+path)
	}
	args = append(args, strings.Fields(*launcherArgs)...)
	rep.Launcher = args
	env := []string{"BIGTABLE_EMULATOR_HOST=" + bt.HostPort, "PUBSUB_EMULATOR_HOST=" + ps.HostPort,
		"BIGQUERY_EMULATOR_HOST=" + bq.rest, "BIGQUERY_STORAGE_EMULATOR_HOST=" + bq.grpc}
	j, err := startJob(bin, filepath.Join(work, "launcher.stderr"), env, args...)
	if err != nil {
		return rep, err
	}
	stopped := false
	defer func() {
		if !stopped {
			j.stop()
		}
	}()
	fmt.Printf("launcher: pid %d: %s %s\n", j.cmd.Process.Pid, filepath.Base(bin), strings.Join(args, " "))
	cpu := cpuMeter{launcher: j.cmd.Process.Pid, bt: bt, ps: ps}

	// Warm-up: the job reads (prism has started it) before any phase.
	if *hourCloseAt > 0 {
		pub.shift = hourShift(time.Now().Add(*hourCloseAt))
	}
	for i := range warmup {
		s := warmupSensor0 + i
		pub.send(ctx, s, pub.eventMs(s), nil)
	}
	t0 := time.Now()
	if _, err := j.waitProgress(ctx, 2*time.Minute, "warm-up readings read", func(p progressLine) bool { return p.Read >= warmup }); err != nil {
		return rep, err
	}
	fmt.Printf("warm-up: the job read %d readings %.1fs after they were published\n", warmup, time.Since(t0).Seconds())

	if *readings > 0 {
		t, err := throughput(ctx, j, pub, tbl, &cpu)
		rep.Throughput = t
		if err != nil {
			return rep, fmt.Errorf("throughput phase: %w", err)
		}
	}
	if *rate > 0 {
		rss := &rssSampler{pid: j.cmd.Process.Pid, debug: debug}
		l, err := latency(ctx, j, pub, tbl, &cpu, rss)
		rep.Latency = l
		rep.Memory = rss.memory()
		fmt.Printf("memory: %s\n", rep.Memory)
		if err != nil {
			return rep, fmt.Errorf("latency phase: %w", err)
		}
	}

	last := j.last()
	rep.BigQueryRows, rep.DeadLetters = last.BigQuery, last.Dead
	stopped = true
	summary, err := j.stop()
	rep.LauncherSummary = summary
	if err != nil {
		return rep, err
	}
	if m, err := mutations(filepath.Join(work, "ledger.json")); err != nil {
		fmt.Printf("mutations: %v\n", err)
	} else {
		rep.Mutations = m
		fmt.Printf("mutations: %s\n", m)
		if *hourCloseAt > 0 {
			// Every sensor, the warm-up's too, reported in the closed hour.
			fmt.Printf("closed hour: %d BigQuery rollup rows for %d sensor-hours: one each when the hour closed on time, one more for each late firing\n",
				m.RollupRows, *sensors+warmup)
		}
	}
	rep.LauncherErrors, rep.LauncherFirstError = j.errorLines()
	rep.HourClosed = *hourCloseAt > 0 || began.UTC().Truncate(time.Hour) != time.Now().UTC().Truncate(time.Hour)
	fmt.Printf("launcher stopped (SIGTERM); its summary:\n%s\n", indent(summary))
	fmt.Printf("bigquery: %d rows written by the launcher", rep.BigQueryRows)
	if !rep.HourClosed {
		fmt.Printf(" (the stream sends a reading to BigQuery when its hour's window closes, and no hour closed during the run)")
	}
	fmt.Println()
	if rep.LauncherErrors > 0 {
		fmt.Printf("launcher: logged %d ERROR lines; the first: %s\n", rep.LauncherErrors, rep.LauncherFirstError)
	}
	if rep.DeadLetters > 0 {
		fmt.Printf("DEAD LETTERS: %d\n", rep.DeadLetters)
	}
	fmt.Printf("total: %.0fs\n", time.Since(began).Seconds())
	return rep, nil
}

// writeReport writes rep as JSON to -out.
func writeReport(rep *Report) error { return writeJSON(rep) }

// writeJSON writes rep as JSON to -out.
func writeJSON(rep any) error {
	if *outFlag == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(*outFlag), 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(*outFlag, append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Printf("figures written to %s\n", *outFlag)
	return nil
}

// throughput publishes -readings readings as fast as it can and measures
// the launcher's read rate.
func throughput(ctx context.Context, j *job, pub *publisher, tbl *bigtable.Table, cpu *cpuMeter) (*Throughput, error) {
	n, S := *readings, *tputSensors
	t := &Throughput{Readings: n, Sensors: S, PerMessage: *perMessage}
	b0 := j.last()
	base := b0.Read
	failed0 := pub.failed.Load()
	seq0, bytes0, billed0 := pub.seq.Load(), pub.bytes.Load(), pub.billed.Load()
	c0 := cpu.take()
	start := time.Now()
	var batch []int
	var times []int64
	for i := range n {
		s := throughputSensor0 + i%S
		if *perMessage == 1 {
			pub.send(ctx, s, pub.eventMs(s), nil)
			continue
		}
		batch, times = append(batch, s), append(times, pub.eventMs(s))
		if len(batch) == *perMessage || i == n-1 {
			pub.sendBatch(ctx, batch, times)
			batch, times = batch[:0], times[:0]
		}
	}
	t.Messages = pub.seq.Load() - seq0
	t.BytesPerReading = round(float64(pub.bytes.Load()-bytes0)/float64(n), 1)
	t.BilledBytesPerReading = round(float64(pub.billed.Load()-billed0)/float64(n), 1)
	if err := pub.waitAnswered(ctx); err != nil {
		return t, err
	}
	t.PublishSeconds = time.Since(start).Seconds()
	t.PublishPerSec = float64(n) / t.PublishSeconds
	t.PublishFailed = pub.failed.Load() - failed0
	if t.PublishFailed > 0 {
		return t, fmt.Errorf("%d publishes failed: %w", t.PublishFailed, pub.firstError())
	}
	fmt.Printf("throughput: published %d readings (%d sensors) in %d messages of %d in %.2fs = %.0f readings/s; %.0f message bytes and %.0f Pub/Sub bytes billed a reading (1 KB a message at least)\n",
		n, S, t.Messages, t.PerMessage, t.PublishSeconds, t.PublishPerSec, t.BytesPerReading, t.BilledBytesPerReading)
	all, err := j.waitProgress(ctx, 3*time.Minute, "throughput readings read", func(p progressLine) bool { return p.Read >= base+int64(n) })
	if err != nil {
		return t, err
	}
	t.AllReadSeconds = all.At.Sub(start).Seconds()
	t.EndToEndPerSec = float64(n) / t.AllReadSeconds
	var first *progressLine
	for _, p := range j.since(start) {
		if p.At.After(all.At) {
			break
		}
		t.Progress = append(t.Progress, ProgressAt{Seconds: round(p.At.Sub(start).Seconds(), 3), Read: p.Read - base, Written: p.Written - b0.Written})
		if first == nil && p.Read > base {
			first = &p
		}
	}
	// From the first line showing the readings, so that the launcher's
	// reaction time is left out; if one line shows them all, from the
	// first publish.
	from, fromRead := start, base
	if first != nil && all.At.After(first.At) {
		from, fromRead = first.At, first.Read
	}
	t.ReadingsPerSec = float64(all.Read-fromRead) / all.At.Sub(from).Seconds()
	t.CPU = cpu.since(c0)
	fmt.Printf("throughput: all %d read %.2fs after the first publish: %.0f readings/s read (over %.0fs of progress lines), %.0f readings/s end to end\n",
		n, t.AllReadSeconds, t.ReadingsPerSec, all.At.Sub(from).Seconds(), t.EndToEndPerSec)
	fmt.Printf("throughput: CPU %s\n", t.CPU)

	// Let the phase's early firing pass before the latency phase: written
	// settles.
	settle := all.At.Add(*earlyFiring + 2*time.Second)
	prevWritten := int64(-1)
	if _, err := j.waitProgress(ctx, *earlyFiring+time.Minute, "writes settling after the throughput phase", func(p progressLine) bool {
		ok := p.At.After(settle) && p.Written == prevWritten
		prevWritten = p.Written
		return ok
	}); err != nil {
		return t, err
	}
	// Every reading landed: count the phase's probe cells.
	counted := time.Now()
	rng := bigtable.NewRange(target.keyPrefix(throughputSensor0), target.keyPrefix(latencySensor0))
	err = tbl.ReadRows(ctx, rng, func(r bigtable.Row) bool {
		t.InBigtable += int64(len(r[target.family]))
		return true
	}, bigtable.RowFilter(probeCells()))
	if err != nil {
		return t, fmt.Errorf("count cells: %w", err)
	}
	fmt.Printf("throughput: %d of %d readings in Bigtable (counted in %.1fs)\n", t.InBigtable, n, time.Since(counted).Seconds())
	if t.InBigtable != int64(n) {
		return t, fmt.Errorf("%d of %d readings are in Bigtable", t.InBigtable, n)
	}
	return t, nil
}

// latency publishes at a steady -rate for -duration and measures, for one
// reading in -sample, the time from its publish until its cell can be read.
func latency(ctx context.Context, j *job, pub *publisher, tbl *bigtable.Table, cpu *cpuMeter, rss *rssSampler) (*Latency, error) {
	l := &Latency{Rate: *rate, Sensors: *sensors, SampleEvery: *sampleEvery, DeadlineSeconds: deadline.Seconds(),
		TargetP99ms: float64((*earlyFiring + 2*time.Second).Milliseconds()), PollIntervalms: float64(pollInterval.Milliseconds()), Pollers: *pollers}
	ps := make([]*poller, *pollers)
	pctx, stopPolling := context.WithCancel(ctx)
	var pwg sync.WaitGroup
	for i := range ps {
		ps[i] = newPoller(tbl, *pollInterval, *deadline)
		pwg.Add(1)
		go func() { defer pwg.Done(); ps[i].run(pctx) }()
	}
	defer func() { stopPolling(); pwg.Wait() }()

	var samples []*sample
	total := int64(math.Round(*rate * duration.Seconds()))
	failed0, ok0 := pub.failed.Load(), pub.ok.Load()
	b0 := j.last()
	c0 := cpu.take()
	fmt.Printf("latency: publishing %d readings at %.0f/s for %v over %d sensors, watching 1 in %d\n", total, *rate, *duration, *sensors, *sampleEvery)
	tick := time.NewTicker(10 * time.Millisecond)
	start := time.Now()
	if *hourCloseAt > 0 {
		top := start.Add(pub.shift).Truncate(time.Hour).Add(time.Hour) // in event time
		fmt.Printf("latency: event times %v behind the wall clock: an hour closes %v into the phase\n",
			(-pub.shift).Round(time.Second), top.Add(-pub.shift).Sub(start).Round(100*time.Millisecond))
	}
	rctx, stopRSS := context.WithCancel(ctx)
	rssDone := make(chan struct{})
	go func() { defer close(rssDone); rss.run(rctx, start) }()
	defer func() {
		stopRSS()
		<-rssDone
		rss.profile(ctx, "heap-end.pb.gz")
	}()
	var sent int64
	for sent < total {
		select {
		case <-ctx.Done():
			tick.Stop()
			return l, ctx.Err()
		case now := <-tick.C:
			due := min(total, int64(now.Sub(start).Seconds()**rate))
			for ; sent < due; sent++ {
				k := int(sent % int64(*sensors))
				s := latencySensor0 + k
				ms := pub.eventMs(s)
				if k%*sampleEvery != 0 {
					pub.send(ctx, s, ms, nil)
					continue
				}
				sm := &sample{key: rowKey(s, ms), tsMicros: ms * 1000}
				p := ps[(k / *sampleEvery)%len(ps)]
				samples = append(samples, sm)
				sm.published = time.Now()
				p.add(sm)
				pub.send(ctx, s, ms, func() { p.failed(sm) })
			}
		}
	}
	tick.Stop()
	l.Seconds = time.Since(start).Seconds()
	if err := pub.waitAnswered(ctx); err != nil {
		return l, err
	}
	l.PublishFailed = pub.failed.Load() - failed0
	l.Published = pub.ok.Load() - ok0
	l.AchievedPerSec = float64(l.Published) / l.Seconds
	fmt.Printf("latency: published %d readings in %.2fs = %.0f readings/s (%d failed); waiting for the sampled readings to show\n",
		l.Published, l.Seconds, l.AchievedPerSec, l.PublishFailed)
	waitUntil := time.Now().Add(*deadline + 5*time.Second)
	for {
		n := 0
		for _, p := range ps {
			n += p.pending()
		}
		if n == 0 {
			break
		}
		if err := j.exited(); err != nil {
			return l, err
		}
		if time.Now().After(waitUntil) {
			return l, fmt.Errorf("%d sampled readings still waiting %v after the last publish", n, *deadline+5*time.Second)
		}
		select {
		case <-ctx.Done():
			return l, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	stopPolling()
	pwg.Wait()
	l.CPU = cpu.since(c0)
	for _, p := range j.since(start) {
		l.Progress = append(l.Progress, ProgressAt{Seconds: round(p.At.Sub(start).Seconds(), 3), Read: p.Read - b0.Read, Written: p.Written - b0.Written})
	}

	var lat []time.Duration
	for _, s := range samples {
		switch s.state {
		case seen:
			l.Seen++
			lat = append(lat, s.visible.Sub(s.published))
		case missed:
			l.Missed++
			lat = append(lat, never)
			if len(l.MissedCells) < 20 {
				l.MissedCells = append(l.MissedCells, missedCell(ctx, tbl, s))
			}
		}
	}
	l.Sampled = len(samples)
	l.ByPublishTime = buckets(samples, start, 10*time.Second)
	for _, p := range ps {
		l.PollReads += p.reads.Load()
		l.PollErrors += p.readErrs.Load()
		l.PollMeanms += float64(p.readNanos.Load()) / 1e6
	}
	if l.PollReads > 0 {
		l.PollMeanms = round(l.PollMeanms/float64(l.PollReads), 1)
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		l.P50ms, l.P90ms, l.P99ms, l.Maxms, l.Minms = ms(percentile(lat, 0.5)), ms(percentile(lat, 0.9)), ms(percentile(lat, 0.99)), ms(lat[len(lat)-1]), ms(lat[0])
	}
	l.TargetMet = l.Seen > 0 && l.P99ms >= 0 && l.P99ms <= l.TargetP99ms
	show := func(v float64) string {
		if v < 0 {
			return "never (not within the deadline)"
		}
		return fmt.Sprintf("%.0f ms", v)
	}
	fmt.Printf("latency: publish -> visible in Bigtable at %.0f readings/s: p50 %s, p90 %s, p99 %s, max %s, min %s\n",
		l.AchievedPerSec, show(l.P50ms), show(l.P90ms), show(l.P99ms), show(l.Maxms), show(l.Minms))
	fmt.Printf("latency: %d sampled, %d seen, %d NOT SEEN within %v (failures), %d publish failures; %d polls (%d errors, %.1f ms each on average), every %v by %d pollers\n",
		l.Sampled, l.Seen, l.Missed, *deadline, l.PublishFailed, l.PollReads, l.PollErrors, l.PollMeanms, *pollInterval, *pollers)
	verdict := "MET"
	if !l.TargetMet {
		verdict = "NOT MET"
	}
	fmt.Printf("latency: by publish time (p50/p99/max ms):")
	for _, b := range l.ByPublishTime {
		fmt.Printf(" %s %s/%s/%s;", b.From, showMs(b.P50ms), showMs(b.P99ms), showMs(b.Maxms))
	}
	fmt.Println()
	if b := l.ByPublishTime; len(b) >= 3 {
		first, last := b[0], b[len(b)-1]
		if last.Sampled < first.Sampled/2 { // the phase's last moments
			last = b[len(b)-2]
		}
		if last.P99ms < 0 || last.P99ms > 2*first.P99ms {
			fmt.Printf("latency: growing through the phase (p99 %s ms in the first 10s, %s ms from %s): a longer -duration gives higher figures\n",
				showMs(first.P99ms), showMs(last.P99ms), last.From)
		}
	}
	for _, m := range l.MissedCells {
		fmt.Printf("latency: not seen: %s\n", m)
	}
	fmt.Printf("latency: target p99 <= early firing %v + 2s = %.0f ms: %s\n", *earlyFiring, l.TargetP99ms, verdict)
	fmt.Printf("latency: CPU %s\n", l.CPU)
	for _, p := range ps {
		if err, _ := p.lastErr.Load().(error); err != nil {
			fmt.Printf("latency: last poll error: %v\n", err)
			break
		}
	}
	return l, nil
}

// Bucket is the latency of the sampled readings published in one span of
// the latency phase.
type Bucket struct {
	From    string  `json:"from"` // e.g. "10s", from the phase's start
	Sampled int     `json:"sampled"`
	Missed  int     `json:"missed"`
	P50ms   float64 `json:"p50_ms"` // -1: not seen within the deadline
	P99ms   float64 `json:"p99_ms"`
	Maxms   float64 `json:"max_ms"`
}

// buckets groups the seen and missed samples by publish time since start.
func buckets(samples []*sample, start time.Time, width time.Duration) []Bucket {
	var lats [][]time.Duration
	for _, s := range samples {
		var d time.Duration
		switch s.state {
		case seen:
			d = s.visible.Sub(s.published)
		case missed:
			d = never
		default:
			continue
		}
		i := int(s.published.Sub(start) / width)
		for len(lats) <= i {
			lats = append(lats, nil)
		}
		lats[i] = append(lats[i], d)
	}
	var out []Bucket
	for i, l := range lats {
		if len(l) == 0 {
			continue
		}
		slices.Sort(l)
		b := Bucket{From: (time.Duration(i) * width).String(), Sampled: len(l),
			P50ms: ms(percentile(l, 0.5)), P99ms: ms(percentile(l, 0.99)), Maxms: ms(l[len(l)-1])}
		for _, d := range l {
			if d == never {
				b.Missed++
			}
		}
		out = append(out, b)
	}
	return out
}

// ms is d in milliseconds to 0.1, or -1 for never.
func ms(d time.Duration) float64 {
	if d == never {
		return -1
	}
	return round(float64(d)/float64(time.Millisecond), 1)
}

// showMs prints a figure of ms.
func showMs(v float64) string {
	if v < 0 {
		return "never"
	}
	return fmt.Sprintf("%.0f", v)
}

// missedCell describes a missed reading and whether its cell is there now.
func missedCell(ctx context.Context, tbl *bigtable.Table, s *sample) string {
	desc := fmt.Sprintf("%s %s@%d published %s", s.key, target.cell(), s.tsMicros, s.published.UTC().Format("15:04:05.000"))
	row, err := tbl.ReadRow(ctx, s.key, bigtable.RowFilter(probeCells()))
	if err != nil {
		return desc + fmt.Sprintf(": reading the row again failed: %v", err)
	}
	for _, it := range row[target.family] {
		if int64(it.Timestamp) == s.tsMicros {
			return desc + fmt.Sprintf(": there %s after its publish (its row has %d readings)", time.Since(s.published).Round(time.Second), len(row[target.family]))
		}
	}
	return desc + fmt.Sprintf(": still absent %s after its publish (its row has %d readings)", time.Since(s.published).Round(time.Second), len(row[target.family]))
}

// cpuMeter reads the CPU used so far by each process of the run.
type cpuMeter struct {
	launcher int
	bt, ps   *bench.Emulator
}

func (m *cpuMeter) take() CPU {
	return CPU{Seconds: float64(time.Now().UnixNano()) / 1e9, Launcher: bench.ProcessCPUSeconds(m.launcher),
		Bigtable: m.bt.CPUSeconds(), PubSub: m.ps.CPUSeconds(), Bench: bench.SelfCPU()}
}

// since is the CPU used since c0.
func (m *cpuMeter) since(c0 CPU) CPU {
	c := m.take()
	return CPU{Seconds: round(c.Seconds-c0.Seconds, 2), Launcher: round(c.Launcher-c0.Launcher, 2), Bigtable: round(c.Bigtable-c0.Bigtable, 2),
		PubSub: round(c.PubSub-c0.PubSub, 2), Bench: round(c.Bench-c0.Bench, 2), LauncherRSSMB: rssMB(m.launcher)}
}

func (c CPU) String() string {
	cores := func(s float64) float64 { return s / c.Seconds }
	return fmt.Sprintf("over %.1fs: launcher %.1fs (%.2f cores), Bigtable emulator %.1fs (%.2f), Pub/Sub emulator %.1fs (%.2f), bench %.1fs (%.2f); launcher RSS %.0f MB",
		c.Seconds, c.Launcher, cores(c.Launcher), c.Bigtable, cores(c.Bigtable), c.PubSub, cores(c.PubSub), c.Bench, cores(c.Bench), c.LauncherRSSMB)
}

// rssMB is a process's resident memory in MB, from /proc/<pid>/status (0
// where that is unavailable).
func rssMB(pid int) float64 { return round(bench.ProcStatusMB(pid, "VmRSS"), 1) }

// bigQuery is the in-process BigQuery emulator.
type bigQuery struct {
	srv        *bqemu.Server
	rest, grpc string // host:port
	done       chan error
}

func startBigQuery() (*bigQuery, error) {
	restLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bigquery emulator: %w", err)
	}
	grpcLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		restLis.Close()
		return nil, fmt.Errorf("bigquery emulator: %w", err)
	}
	b := &bigQuery{srv: bqemu.New(bqemu.Options{Quiet: true}), rest: restLis.Addr().String(), grpc: grpcLis.Addr().String(), done: make(chan error, 2)}
	go func() { b.done <- b.srv.ServeREST(restLis) }()
	go func() { b.done <- b.srv.ServeGRPC(grpcLis) }()
	return b, nil
}

func (b *bigQuery) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = b.srv.Shutdown(ctx)
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

// cadencedSpec writes, into dir, schemas/specs/NAME.yaml with a cadence
// declared, and returns its path.
func cadencedSpec(dir, name string, cadence time.Duration) (string, error) {
	b, err := os.ReadFile(filepath.Join("schemas", "specs", name+".yaml"))
	if err != nil {
		return "", fmt.Errorf("-cadence: the spec's file (run from the repository's root): %w", err)
	}
	path := filepath.Join(dir, name+"-cadence.yaml")
	if err := os.WriteFile(path, append(b, fmt.Sprintf("\ncadence: %s\n", cadence)...), 0o644); err != nil {
		return "", fmt.Errorf("-cadence: %w", err)
	}
	return path, nil
}
