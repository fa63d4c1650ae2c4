// Command e2e measures sensorpipe's end-to-end write throughput: the batch
// pipeline on prism into a Bigtable emulator, against a plain Go writer (no
// Beam) that parses with the same schemas parser, builds the same cells with
// the same Builder, and writes them with ApplyBulk, one entry per reading,
// with the pipeline sink's flow control (4 calls in flight).
// Each side gets a fresh emulator, started here and stopped by its PID.
//
//	go run ./launch/bench/e2e                       # 1,000 sensors x 300 s
//	go run ./launch/bench/e2e -sensors 2000 -out .run/bench.json
//	go run ./launch/bench/e2e -cpuprofile .run/pipeline.pprof   # in-process pipeline
//	go run ./launch/bench/e2e -formats                    # JSON lines, CSV, Parquet, Avro
//
// By default the pipeline side runs the real launcher (built from ./launch)
// as a separate process, as users run it. With -pipeline=inprocess, or with
// -cpuprofile, it runs the same pipelines.Batch in this process instead, so
// the prism runner and the SDK harness show up in one CPU profile.
//
// The figures are readings per second over each side's run: for the
// pipeline, the launcher's own "run finished in" time (from its start: the
// table check, pipeline construction, prism start-up and the job); for the plain writer,
// from opening the client to the last ApplyBulk. They are benchmarks, not
// assertions, and on a shared machine they are noisy.
package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beamlog "github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	_ "github.com/duckdb/duckdb-go/v2" // -format=parquet writes its file with DuckDB
	"golang.org/x/sync/errgroup"

	// -pipeline=inprocess runs on prism in this process.
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"

	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bench"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
	"github.com/sensorpipe/sensorpipe/pipelines"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

var (
	sensors       = flag.Int("sensors", 1000, "Sensors in the generated workload, each reporting at 1 Hz.")
	seconds       = flag.Int("seconds", 300, "Seconds of readings in the generated workload.")
	inputFlag     = flag.String("input", "", "Use this JSON Lines file instead of generating one (its line count is the readings figure).")
	sides         = flag.String("sides", "both", "Which sides to run: both, pipeline or plain.")
	mode          = flag.String("pipeline", "exec", "How to run the pipeline: exec (build ./launch and run it, as users do) or inprocess (pipelines.Batch in this process).")
	launcher      = flag.String("launcher", "", "A launcher binary to exec instead of building ./launch.")
	cpuProfile    = flag.String("cpuprofile", "", "Write a CPU profile of the pipeline run here (implies -pipeline=inprocess).")
	plainProf     = flag.String("plain_cpuprofile", "", "Write a CPU profile of the plain writer here.")
	memProfile    = flag.String("memprofile", "", "Write a heap profile of the pipeline run here, taken when the live heap peaks (implies -pipeline=inprocess).")
	shuffle       = flag.Bool("shuffle", false, "Shuffle the generated workload's lines (a fixed seed), for the memory of out-of-order input; the default is time order, as historical exports are.")
	batch         = flag.Int("plain_batch", 1000, "Entries (readings) per ApplyBulk call of the plain writer.")
	plainInFlight = flag.Int("plain_in_flight", 4, "ApplyBulk calls the plain writer keeps in flight (the pipeline's Bigtable sink keeps 4 batches in flight).")
	verify        = flag.Bool("verify", true, "After each side, read the table back and check both sides wrote the same number of rows and cells.")
	outFlag       = flag.String("out", "", "Also write the figures as JSON to this file.")
	keep          = flag.Bool("keep", false, "Keep the work directory (input, dead letters, launcher).")
	extraFlags    = flag.String("launcher_args", "", "Extra flags for the launcher, space-separated (e.g. --local_part_mb=0 runs the input as one job).")
	mergeBench    = flag.Bool("merge", true, "Also measure the batch's merge with stored hours (exec mode): the pipeline with --merge_stored=false into empty tables, and the pipeline run twice, the second time into hours already stored.")
	rekeyBench    = flag.Bool("rekey", false, "Measure a rekey instead (exec mode): the workload batched under the default spec, then read back from that table (--source=bigtable) and written under -rekey_spec, against a file batch of the same readings under -rekey_spec into an empty table, each on an emulator of its own.")
	formats       = flag.Bool("formats", false, "Measure the file formats instead (exec mode): the workload's readings batched from JSON lines, CSV, Parquet (written by DuckDB) and Avro, each into an empty table on an emulator of its own.")
	rekeySpec     = flag.String("rekey_spec", "testdata/rekey/vitals_salted.yaml", "With -rekey: the spec the stored table is rekeyed into.")
	formatFlag    = flag.String("format", "json", "The pipeline's input format: json (the generated JSON lines) or parquet (the same readings written to one Parquet file by DuckDB, another library than the launcher's reader, in row groups of -parquet_row_group rows).")
	rowGroup      = flag.Int("parquet_row_group", 122880, "With -format=parquet: the Parquet file's rows per row group (DuckDB's default).")
	rekeyBatch    = flag.Bool("rekey_batch", true, "With -rekey: also run the file batch under -rekey_spec to compare with (false: the rekey alone, for its memory).")
	withBQ        = flag.Bool("bigquery", true, "Also run the pipeline into both sinks, Bigtable and an in-process BigQuery emulator, with each Storage Write method (storage_write, and upsert with change data capture), and report those rates.")
)

const (
	project  = "bench"
	instance = "bench"
)

// Side is one side's figures.
type Side struct {
	Name            string  `json:"name"`
	Readings        int64   `json:"readings"`
	Seconds         float64 `json:"seconds"`
	ReadingsPerSec  float64 `json:"readings_per_sec"`
	ProcessSeconds  float64 `json:"process_seconds,omitempty"` // exec mode: the launcher process's wall time
	CPUSeconds      float64 `json:"cpu_seconds"`               // user+system CPU of the side (launcher process, or this process during the side)
	EmulatorCPU     float64 `json:"emulator_cpu_seconds"`      // user+system CPU of the side's emulator, up to the end of the side
	PeakRSSMB       float64 `json:"peak_rss_mb,omitempty"`     // exec mode: the launcher process's own peak resident memory (VmHWM, polled)
	PeakHeapMB      float64 `json:"peak_heap_mb,omitempty"`    // in-process: the peak live heap seen by -memprofile's sampler
	Rows            int64   `json:"rows,omitempty"`
	Cells           int64   `json:"cells,omitempty"`
	ApplyBulkCalls  int     `json:"apply_bulk_calls,omitempty"`
	DeadLetters     int64   `json:"dead_letters"`
	EmulatorPID     int     `json:"emulator_pid"`
	PipelineMode    string  `json:"pipeline_mode,omitempty"`
	ProfileFile     string  `json:"profile,omitempty"`
	LauncherSummary string  `json:"launcher_summary,omitempty"`

	ledger *ledger.Ledger // exec mode: the launcher's --summary_json
	// table is the Bigtable table the side writes ("": tableName(Name)).
	table string
}

// Table is the Bigtable table the side writes.
func (s *Side) Table() string {
	if s.table != "" {
		return s.table
	}
	return tableName(s.Name)
}

// Report is the run's figures.
type Report struct {
	Machine  bench.Machine `json:"machine"`
	Workload string        `json:"workload"`
	Input    string        `json:"input"`
	Readings int64         `json:"readings"`
	Pipeline *Side         `json:"pipeline,omitempty"`
	BothSink *Side         `json:"pipeline_with_bigquery,omitempty"`
	Upsert   *Side         `json:"pipeline_with_bigquery_upsert,omitempty"`
	Plain    *Side         `json:"plain,omitempty"`
	// MergeOff is the pipeline into empty tables with --merge_stored=false
	// (each sensor-hour built from the batch's readings only, no read
	// back); MergeExisting the pipeline (merge on) run a second time over
	// the same input, every hour already stored.
	MergeOff      *Side `json:"pipeline_merge_off,omitempty"`
	MergeFirst    *Side `json:"pipeline_rerun_first,omitempty"`
	MergeExisting *Side `json:"pipeline_hours_exist,omitempty"`
	// RerunRatio is MergeExisting's wall time over MergeFirst's: the
	// re-run of the same input against the first run into empty tables,
	// on one emulator, one after the other.
	RerunRatio     float64 `json:"rerun_ratio,omitempty"`
	MergeCost      float64 `json:"merge_cost_empty_tables,omitempty"`
	MergeExistCost float64 `json:"merge_cost_hours_exist,omitempty"`
	// Rekey is a rekey of the workload's table into -rekey_spec
	// (--source=bigtable), RekeyBatch a file batch of the same readings
	// under -rekey_spec into an empty table; RekeyRatio is the rekey's
	// rate over the batch's.
	Rekey      *Side   `json:"rekey,omitempty"`
	RekeyBatch *Side   `json:"rekey_file_batch,omitempty"`
	RekeyRatio float64 `json:"ratio_rekey_over_file_batch,omitempty"`
	// Formats are the same readings batched from JSON lines, CSV,
	// Parquet and Avro (-formats), in that order.
	Formats []*Side `json:"formats,omitempty"`
	Ratio   float64 `json:"ratio_pipeline_over_plain,omitempty"`
	Time    string  `json:"time"`
}

func main() {
	flag.Parse()
	beamlog.LogLevel = "warn"
	// Needed for -pipeline=inprocess: prism runs the Go SDK harness in this
	// process (loopback), and beam.Init must run before it.
	beam.Init()
	if err := run(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	if *cpuProfile != "" || *memProfile != "" {
		*mode = "inprocess"
	}
	if *mode != "exec" && *mode != "inprocess" {
		return fmt.Errorf("-pipeline=%q: use exec or inprocess", *mode)
	}
	if *sides != "both" && *sides != "pipeline" && *sides != "plain" {
		return fmt.Errorf("-sides=%q: use both, pipeline or plain", *sides)
	}
	if _, err := emulators.Bigtable.Find(); err != nil {
		return fmt.Errorf("the end-to-end benchmark needs the Bigtable emulator: %w", err)
	}
	work, done, err := bench.WorkDir("sensorpipe-bench-", *keep)
	if err != nil {
		return err
	}
	defer done()

	rep := Report{Machine: bench.ThisMachine(), Time: time.Now().UTC().Format(time.RFC3339)}
	fmt.Printf("machine: %s\n", rep.Machine)
	input := *inputFlag
	if input == "" {
		w := bench.Workload{Sensors: *sensors, Seconds: *seconds, Start: bench.DefaultStart}
		input = filepath.Join(work, schemas.DefaultSpecName()+".jsonl")
		f, err := os.Create(input)
		if err != nil {
			return err
		}
		size, err := w.WriteTo(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write workload: %w", err)
		}
		rep.Workload = w.String()
		if *shuffle {
			if err := shuffleLines(input); err != nil {
				return fmt.Errorf("shuffle workload: %w", err)
			}
			rep.Workload += ", lines shuffled"
		}
		fmt.Printf("workload: %s, %.1f MB at %s\n", w, float64(size)/1e6, input)
	} else {
		rep.Workload = "file " + input
	}
	rep.Input = input
	if rep.Readings, err = countLines(input); err != nil {
		return err
	}
	if *rekeyBench {
		return runRekey(ctx, &rep, work, input)
	}
	if *formats {
		return runFormats(ctx, &rep, work, input)
	}
	switch *formatFlag {
	case "json":
	case "parquet":
		pq := strings.TrimSuffix(input, filepath.Ext(input)) + ".parquet"
		began := time.Now()
		if err := toParquet(input, pq, *rowGroup); err != nil {
			return err
		}
		st, err := os.Stat(pq)
		if err != nil {
			return err
		}
		fmt.Printf("input as Parquet: %.1f MB at %s (DuckDB, row groups of %d rows; written in %v)\n", float64(st.Size())/1e6, pq, *rowGroup, time.Since(began).Round(time.Second))
		rep.Workload += fmt.Sprintf(", as one Parquet file (DuckDB, row groups of %d rows)", *rowGroup)
		input, rep.Input = pq, pq
	default:
		return fmt.Errorf("-format=%q: use json or parquet", *formatFlag)
	}

	if *sides != "plain" {
		s, err := withEmulator(func(host string) (*Side, error) { return pipelineSide(ctx, host, work, input) })
		if err != nil {
			return fmt.Errorf("pipeline: %w", err)
		}
		rep.Pipeline = s
		printSide(s)
	}
	if *sides != "plain" && *mode == "exec" && *mergeBench {
		// The merge's cost: the same run without it, into empty tables,
		// and the run again with every hour already stored.
		off, err := withEmulator(func(host string) (*Side, error) {
			s := &Side{Name: "merge_off", PipelineMode: *mode}
			if err := pipelineExec(ctx, s, host, work, input, filepath.Join(work, "deadletter-merge-off"), []string{"--merge_stored=false"}, nil); err != nil {
				return nil, err
			}
			s.ReadingsPerSec = float64(s.Readings) / s.Seconds
			return s, nil
		})
		if err != nil {
			return fmt.Errorf("pipeline without the merge: %w", err)
		}
		rep.MergeOff = off
		printSide(off)
		var first *Side
		exist, err := withEmulator(func(host string) (*Side, error) {
			// Both runs write the first run's table (and, with -bigquery,
			// one BigQuery emulator's dataset): the re-run merges with the
			// hours the first stored.
			var args, env []string
			if *withBQ {
				bq, closeBQ, err := startBigQuery()
				if err != nil {
					return nil, err
				}
				defer closeBQ()
				args, env = append(args, bq.args("upsert")...), bq.env
			}
			first = &Side{Name: "rerun_first", PipelineMode: *mode}
			if err := pipelineExec(ctx, first, host, work, input, filepath.Join(work, "deadletter-fill"), args, env); err != nil {
				return nil, err
			}
			first.ReadingsPerSec = float64(first.Readings) / first.Seconds
			s := &Side{Name: "hours_exist", PipelineMode: *mode, table: first.Table()}
			if err := pipelineExec(ctx, s, host, work, input, filepath.Join(work, "deadletter-exist"), args, env); err != nil {
				return nil, err
			}
			s.ReadingsPerSec = float64(s.Readings) / s.Seconds
			return s, nil
		})
		if err != nil {
			return fmt.Errorf("pipeline into hours already stored: %w", err)
		}
		rep.MergeFirst, rep.MergeExisting = first, exist
		printSide(first)
		printSide(exist)
		rep.RerunRatio = exist.Seconds / first.Seconds
		fmt.Printf("re-run of %d readings into the hours the first run stored: %.1fs against the first run's %.1fs into empty tables = %.2fx (target <= 1.5)\n",
			exist.Readings, exist.Seconds, first.Seconds, rep.RerunRatio)
		if err := rerunWroteNothing(exist); err != nil {
			return err
		}
		if rep.Pipeline != nil {
			rep.MergeCost = rep.Pipeline.Seconds / off.Seconds
			rep.MergeExistCost = exist.Seconds / off.Seconds
			fmt.Printf("merge with stored hours: into empty tables %.2fx the time without it (%.1fs vs %.1fs; target <= 1.10); every hour already stored %.2fx (%.1fs)\n",
				rep.MergeCost, rep.Pipeline.Seconds, off.Seconds, rep.MergeExistCost, exist.Seconds)
		}
	}
	if *sides != "plain" && *withBQ && *mode == "exec" {
		for _, m := range []struct {
			method string
			side   **Side
		}{{"storage_write", &rep.BothSink}, {"upsert", &rep.Upsert}} {
			s, err := withEmulator(func(host string) (*Side, error) { return bothSinksSide(ctx, host, work, input, m.method) })
			if err != nil {
				return fmt.Errorf("pipeline with bigquery (%s): %w", m.method, err)
			}
			*m.side = s
			printSide(s)
		}
	}
	if *sides != "pipeline" {
		s, err := withEmulator(func(host string) (*Side, error) { return plainSide(ctx, host, input) })
		if err != nil {
			return fmt.Errorf("plain writer: %w", err)
		}
		rep.Plain = s
		printSide(s)
	}
	if rep.Pipeline != nil && rep.Plain != nil {
		rep.Ratio = rep.Pipeline.ReadingsPerSec / rep.Plain.ReadingsPerSec
		fmt.Printf("ratio pipeline/plain: %.2f readings/s (the Bigtable emulator bounds both)", rep.Ratio)
		if rep.Pipeline.Readings > 0 && rep.Plain.Readings > 0 && rep.Plain.CPUSeconds > 0 {
			fmt.Printf("; CPU per reading %.2f x the plain writer's (target <= 1.0)",
				(rep.Pipeline.CPUSeconds/float64(rep.Pipeline.Readings))/(rep.Plain.CPUSeconds/float64(rep.Plain.Readings)))
		}
		fmt.Println()
		if *verify && (rep.Pipeline.Cells != rep.Plain.Cells || rep.Pipeline.Rows != rep.Plain.Rows) {
			return fmt.Errorf("the sides wrote different data: pipeline %d rows %d cells, plain %d rows %d cells",
				rep.Pipeline.Rows, rep.Pipeline.Cells, rep.Plain.Rows, rep.Plain.Cells)
		}
	}
	if *outFlag != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*outFlag, append(b, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Printf("figures written to %s\n", *outFlag)
	}
	return nil
}

func printSide(s *Side) {
	fmt.Printf("%-8s %9d readings in %7.2fs = %9.0f readings/s", s.Name, s.Readings, s.Seconds, s.ReadingsPerSec)
	if s.ProcessSeconds > 0 {
		fmt.Printf(" (launcher process %.2fs)", s.ProcessSeconds)
	}
	if s.PeakRSSMB > 0 {
		fmt.Printf("; peak RSS %.0f MB", s.PeakRSSMB)
	}
	if s.PeakHeapMB > 0 {
		fmt.Printf("; peak live heap %.0f MB", s.PeakHeapMB)
	}
	if s.Cells > 0 {
		fmt.Printf("; %d rows, %d cells", s.Rows, s.Cells)
	}
	if s.ApplyBulkCalls > 0 {
		fmt.Printf("; %d ApplyBulk calls", s.ApplyBulkCalls)
	}
	if s.Cells > 0 && s.Readings > 0 {
		// A batch sets each cell once (no rewrites): the cells read back
		// are its Bigtable cell mutations.
		fmt.Printf("; %.2f Bigtable cell mutations per reading", float64(s.Cells)/float64(s.Readings))
	}
	fmt.Printf("; CPU %.1fs", s.CPUSeconds)
	if s.Readings > 0 {
		fmt.Printf(" = %.1f µs per reading", s.CPUSeconds*1e6/float64(s.Readings))
	}
	fmt.Printf(", emulator CPU %.1fs", s.EmulatorCPU)
	if s.DeadLetters > 0 {
		fmt.Printf("; %d DEAD LETTERS", s.DeadLetters)
	}
	fmt.Println()
}

// withEmulator runs fn against a fresh Bigtable emulator, then stops it by
// its PID and, with -verify, counts what fn wrote first.
func withEmulator(fn func(host string) (*Side, error)) (*Side, error) {
	emu, err := bench.StartBigtable()
	if err != nil {
		return nil, err
	}
	defer emu.Stop()
	os.Setenv("BIGTABLE_EMULATOR_HOST", emu.HostPort)
	cpu0 := bench.SelfCPU()
	s, err := fn(emu.HostPort)
	if err != nil {
		return nil, err
	}
	if s.CPUSeconds == 0 { // in this process
		s.CPUSeconds = bench.SelfCPU() - cpu0
	}
	s.EmulatorCPU = emu.CPUSeconds()
	s.EmulatorPID = emu.PID
	if *verify {
		if s.Rows, s.Cells, err = countCells(context.Background(), s.Table()); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// tableName is the default spec's first Bigtable table, one per side.
func tableName(side string) string {
	spec, err := schemas.BuiltinSpec(schemas.DefaultSpecName())
	if err != nil {
		panic(err) // the default spec is built in and tested (schemas)
	}
	return spec.Bigtable.Tables[0].Name + "_" + side
}

// sideSpec is the default spec writing to side's table.
func sideSpec(side string) (*schemas.Spec, error) {
	spec, err := schemas.BuiltinSpec(schemas.DefaultSpecName())
	if err != nil {
		return nil, err
	}
	return spec, spec.RenameTable(spec.Bigtable.Tables[0].Name, tableName(side))
}

func pipelineSide(ctx context.Context, host, work, input string) (*Side, error) {
	dead := filepath.Join(work, "deadletter-pipeline")
	s := &Side{Name: "pipeline", PipelineMode: *mode}
	if *mode == "inprocess" {
		if err := pipelineInProcess(ctx, s, input, dead); err != nil {
			return nil, err
		}
	} else if err := pipelineExec(ctx, s, host, work, input, dead, nil, nil); err != nil {
		return nil, err
	}
	s.ReadingsPerSec = float64(s.Readings) / s.Seconds
	return s, nil
}

// bothSinksSide runs the launcher into Bigtable and a BigQuery emulator
// served by this process with BigQuery write method method, and checks
// every reading reached BigQuery.
// bigQuery is an in-process BigQuery emulator a launcher run writes to.
type bigQuery struct {
	env []string
}

// args are the launcher's flags to write the emulator's bench.readings
// with method.
func (bigQuery) args(method string) []string {
	return []string{"--bigquery_project=" + project, "--bigquery_dataset=bench", "--bigquery_table=readings", "--bigquery_write_method=" + method}
}

// startBigQuery serves an in-process BigQuery emulator until closed.
func startBigQuery() (bigQuery, func(), error) {
	srv := bqemu.New(bqemu.Options{Quiet: true})
	rest, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return bigQuery{}, nil, err
	}
	grpcLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		rest.Close()
		srv.Close()
		return bigQuery{}, nil, err
	}
	go srv.ServeREST(rest)
	go srv.ServeGRPC(grpcLis)
	env := []string{"BIGQUERY_EMULATOR_HOST=" + rest.Addr().String(), "BIGQUERY_STORAGE_EMULATOR_HOST=" + grpcLis.Addr().String()}
	return bigQuery{env: env}, func() { srv.Close() }, nil
}

// rerunWroteNothing checks that a re-run of unchanged readings wrote
// nothing: no sink was routed a reading, and every sink the first run
// wrote readings to counts them all unchanged.
func rerunWroteNothing(s *Side) error {
	for _, sk := range s.ledger.Sinks {
		if sk.Routed != 0 || (sk.Unchanged != 0 && sk.Sink != deadletter.SinkBigQueryRollups && sk.Unchanged != s.ledger.Readings) {
			return fmt.Errorf("the re-run wrote %s %s: %d readings routed, %d unchanged of %d", sk.Sink, sk.Table, sk.Routed, sk.Unchanged, s.ledger.Readings)
		}
	}
	return nil
}

func bothSinksSide(ctx context.Context, host, work, input, method string) (*Side, error) {
	bq, closeBQ, err := startBigQuery()
	if err != nil {
		return nil, err
	}
	defer closeBQ()
	s := &Side{Name: "bigquery_" + method, PipelineMode: *mode}
	if err := pipelineExec(ctx, s, host, work, input, filepath.Join(work, "deadletter-"+s.Name), bq.args(method), bq.env); err != nil {
		return nil, err
	}
	var bqRows int64
	for _, sk := range s.ledger.Sinks {
		if sk.Sink == deadletter.SinkBigQuery {
			bqRows += sk.Written
		}
	}
	if bqRows != s.Readings {
		return nil, fmt.Errorf("BigQuery got %d readings; Bigtable %d", bqRows, s.Readings)
	}
	s.ReadingsPerSec = float64(s.Readings) / s.Seconds
	return s, nil
}

// pipelineExec builds the launcher (unless -launcher) and runs it.
func pipelineExec(ctx context.Context, s *Side, host, work, input, dead string, extraArgs, extraEnv []string) error {
	bin := *launcher
	if bin == "" {
		bin = filepath.Join(work, "sensorpipe")
	}
	if _, err := os.Stat(bin); err != nil {
		if bin, err = bench.BuildLauncher(ctx, work); err != nil {
			return err
		}
	}
	summary := filepath.Join(work, "summary-"+s.Name+".json")
	var source []string
	if input != "" { // "": extraArgs name another --source
		source = []string{"--source=files", "--input=" + input}
	}
	cmd := exec.CommandContext(ctx, bin, append(source,
		"--bigtable_project="+project, "--bigtable_instance="+instance, "--bigtable_table="+s.Table(),
		"--dead_letter="+dead, "--progress_interval=0", "--summary_json="+summary)...)
	cmd.Args = append(append(cmd.Args, extraArgs...), strings.Fields(*extraFlags)...)
	cmd.Env = append(append(os.Environ(), "BIGTABLE_EMULATOR_HOST="+host), extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Start()
	if err == nil {
		peak := bench.WatchPeakRSS(cmd.Process.Pid)
		err = cmd.Wait()
		s.PeakRSSMB = peak()
	}
	s.ProcessSeconds = time.Since(start).Seconds()
	if cmd.ProcessState != nil {
		s.CPUSeconds = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	if err != nil {
		return fmt.Errorf("launcher: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	s.LauncherSummary = strings.TrimSpace(out)
	took, err := summaryField(out, `run finished in (\S+)`)
	if err != nil {
		return err
	}
	d, err := time.ParseDuration(took)
	if err != nil {
		return fmt.Errorf("launcher summary: %w", err)
	}
	s.Seconds = d.Seconds()
	b, err := os.ReadFile(summary)
	if err != nil {
		return fmt.Errorf("launcher summary: %w", err)
	}
	s.ledger = &ledger.Ledger{}
	if err := json.Unmarshal(b, s.ledger); err != nil {
		return fmt.Errorf("launcher summary %s: %w", summary, err)
	}
	for _, sk := range s.ledger.Sinks {
		if sk.Sink == deadletter.SinkBigtable {
			// A re-run's readings are unchanged, not written.
			s.Readings += sk.Written + sk.Unchanged
		}
	}
	s.DeadLetters = s.ledger.DeadLettered()
	return nil
}

func summaryField(out, re string) (string, error) {
	m := regexp.MustCompile(re).FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("launcher summary has no %q:\n%s", re, out)
	}
	return m[1], nil
}

// pipelineInProcess runs what the launcher's run does for --source=files
// on prism: check the tables, build pipelines.Batch, run it.
func pipelineInProcess(ctx context.Context, s *Side, input, dead string) error {
	spec, err := sideSpec(s.Name)
	if err != nil {
		return err
	}
	if err := bigtableio.EnsureTables(ctx, project, instance, spec, true, 10*time.Second); err != nil {
		return err
	}
	compiled, err := hours.Compile(spec, hours.CompileOptions{})
	if err != nil {
		return err
	}
	cfg := pipelines.Config{Spec: compiled, Bigtable: bigtableio.Config{Project: project, Instance: instance}, DeadLetter: targets.DeadLetterTarget{Path: dead}}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
		s.ProfileFile = *cpuProfile
	}
	if *memProfile != "" {
		stop := bench.SampleHeap(*memProfile, 100*time.Millisecond)
		defer func() { s.PeakHeapMB = stop() }()
		s.ProfileFile = *memProfile
	}
	start := time.Now()
	p, root := beam.NewPipelineWithRoot()
	if err := pipelines.Batch(root, cfg, pipelines.BatchOptions{Input: input}); err != nil {
		return err
	}
	pr, err := beam.Run(ctx, "prism", p)
	if err != nil {
		return fmt.Errorf("job failed: %w", err)
	}
	s.Seconds = time.Since(start).Seconds()
	res := pr.Metrics()
	l := ledger.FromCounters(ledger.FromMetrics(&res), false)
	for _, sk := range l.Sinks {
		if sk.Sink == deadletter.SinkBigtable {
			s.Readings += sk.Written
		}
	}
	s.DeadLetters = l.DeadLettered()
	return nil
}

// plainSide is the baseline without Beam: read the file, Parse and Check
// every line, group by identity and event-time hour (as the pipeline's
// GroupByKey does, so imputation yields the same cells), the batch's
// per-hour rule per group (Compiled.BatchHour, as BuildRowsFn runs it), then
// ApplyBulk one entry per reading in batches of -plain_batch entries,
// -plain_in_flight calls at a time.
func plainSide(ctx context.Context, host, input string) (*Side, error) {
	if *batch < 1 || *plainInFlight < 1 {
		return nil, errors.New("-plain_batch and -plain_in_flight must be at least 1")
	}
	s := &Side{Name: "plain"}
	spec, err := sideSpec(s.Name)
	if err != nil {
		return nil, err
	}
	if err := bigtableio.EnsureTables(ctx, project, instance, spec, true, 10*time.Second); err != nil {
		return nil, err
	}
	compiled, err := hours.Compile(spec, hours.CompileOptions{})
	if err != nil {
		return nil, err
	}
	bld, parser := compiled.Builder(), codec.NewParser(spec)
	if *plainProf != "" {
		f, err := os.Create(*plainProf)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
		s.ProfileFile = *plainProf
	}

	start := time.Now()
	client, err := bigtableio.NewClient(ctx, project, instance)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	tbl := client.Open(s.Table())

	type groupKey struct {
		identity string
		hour     int64
	}
	groups := map[groupKey][]schemas.Record{}
	var order []groupKey
	f, err := os.Open(input)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rd := bufio.NewReaderSize(f, 1<<20)
	var recs []schemas.Record
	for {
		line, rerr := rd.ReadBytes('\n')
		if len(line) > 0 {
			recs, err = parser.Parse(recs[:0], bytes.TrimRight(line, "\r\n"), input)
			for i := 0; err == nil && i < len(recs); i++ {
				err = bld.Check(&recs[i])
			}
			if err != nil {
				s.DeadLetters++
			} else {
				for _, r := range recs {
					k := groupKey{group.IdentityKey(spec, &r), floorDiv(r.EventMs, 3_600_000)}
					if _, ok := groups[k]; !ok {
						order = append(order, k)
					}
					groups[k] = append(groups[k], r)
				}
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, rerr
		}
	}

	// Up to -plain_in_flight ApplyBulk calls at once, as the pipeline's
	// sink keeps batches in flight: the same flow control.
	var calls errgroup.Group
	calls.SetLimit(*plainInFlight)
	keys := make([]string, 0, *batch)
	muts := make([]*bigtable.Mutation, 0, *batch)
	flush := func() error {
		if len(keys) == 0 {
			return nil
		}
		k, m := keys, muts
		calls.Go(func() error { return bench.ApplyBulk(ctx, tbl, k, m) })
		s.ApplyBulkCalls++
		keys, muts = make([]string, 0, *batch), make([]*bigtable.Mutation, 0, *batch)
		return nil
	}
	for _, k := range order {
		// The batch's per-hour rule, as BuildRowsFn runs it (the group's
		// UTC hour: the plain writer has no windows).
		out := hours.BatchHour(compiled, hours.HourPane{Records: groups[k]}, false, 0)
		s.DeadLetters += int64(len(out.Dead))
		for _, rm := range out.Rows {
			err := bench.ReadingMutations(rm, func(key string, m *bigtable.Mutation) error {
				keys, muts = append(keys, key), append(muts, m)
				s.Readings++
				if len(keys) >= *batch {
					return flush()
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
		delete(groups, k)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if err := calls.Wait(); err != nil {
		return nil, err
	}
	s.Seconds = time.Since(start).Seconds()
	s.ReadingsPerSec = float64(s.Readings) / s.Seconds
	return s, nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// countCells reads table back and counts its rows and cells.
func countCells(ctx context.Context, table string) (rows, cells int64, err error) {
	c, err := bigtableio.NewClient(ctx, project, instance)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	err = c.Open(table).ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		rows++
		for _, items := range r {
			cells += int64(len(items))
		}
		return true
	}, bigtable.RowFilter(bigtable.StripValueFilter()))
	if err != nil {
		return 0, 0, fmt.Errorf("read back %s: %w", table, err)
	}
	return rows, cells, nil
}

// shuffleLines rewrites the file at path with its lines in a random order
// (a fixed seed, so runs compare).
func shuffleLines(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	if n := len(lines); n > 0 && len(lines[n-1]) == 0 {
		lines = lines[:n-1]
	}
	if n := len(lines); n > 0 && !bytes.HasSuffix(lines[n-1], []byte("\n")) {
		lines[n-1] = append(lines[n-1], '\n')
	}
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
	return os.WriteFile(path, bytes.Join(lines, nil), 0o644)
}

func countLines(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	buf := make([]byte, 1<<20)
	for {
		m, err := f.Read(buf)
		n += int64(bytes.Count(buf[:m], []byte{'\n'}))
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// runRekey measures a rekey against a file batch of the same readings
// under the same spec, and writes the report.
func runRekey(ctx context.Context, rep *Report, work, input string) error {
	spec, err := filepath.Abs(*rekeySpec)
	if err != nil {
		return err
	}
	if !*rekeyBatch {
		return runRekeyAlone(ctx, rep, work, input, spec)
	}
	batch, err := withEmulator(func(host string) (*Side, error) {
		s := &Side{Name: "rekey_file_batch", PipelineMode: "exec"}
		if err := pipelineExec(ctx, s, host, work, input, filepath.Join(work, "deadletter-rekey-batch"), []string{"--spec=" + spec}, nil); err != nil {
			return nil, err
		}
		s.ReadingsPerSec = float64(s.Readings) / s.Seconds
		return s, nil
	})
	if err != nil {
		return fmt.Errorf("file batch under %s: %w", *rekeySpec, err)
	}
	rep.RekeyBatch = batch
	printSide(batch)
	rekey, err := withEmulator(func(host string) (*Side, error) {
		src := &Side{Name: "rekey_source", PipelineMode: "exec"}
		if err := pipelineExec(ctx, src, host, work, input, filepath.Join(work, "deadletter-rekey-source"), nil, nil); err != nil {
			return nil, err
		}
		s := &Side{Name: "rekey", PipelineMode: "exec"}
		args := []string{"--source=bigtable", "--from_spec=" + schemas.DefaultSpecName(), "--from_table=" + tableName(src.Name), "--spec=" + spec}
		if err := pipelineExec(ctx, s, host, work, "", filepath.Join(work, "deadletter-rekey"), args, nil); err != nil {
			return nil, err
		}
		s.ReadingsPerSec = float64(s.Readings) / s.Seconds
		return s, nil
	})
	if err != nil {
		return fmt.Errorf("rekey into %s: %w", *rekeySpec, err)
	}
	rep.Rekey = rekey
	printSide(rekey)
	rep.RekeyRatio = rekey.ReadingsPerSec / batch.ReadingsPerSec
	fmt.Printf("ratio rekey/file batch: %.2f readings/s (target >= 0.8); peak RSS %.0f MB vs %.0f MB\n",
		rep.RekeyRatio, rekey.PeakRSSMB, batch.PeakRSSMB)
	if *verify && (rekey.Cells != batch.Cells || rekey.Rows != batch.Rows || rekey.Readings != batch.Readings) {
		return fmt.Errorf("the rekey and the file batch wrote different data: rekey %d readings %d rows %d cells, file batch %d readings %d rows %d cells",
			rekey.Readings, rekey.Rows, rekey.Cells, batch.Readings, batch.Rows, batch.Cells)
	}
	if *outFlag != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*outFlag, append(b, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Printf("figures written to %s\n", *outFlag)
	}
	return nil
}

// runRekeyAlone measures a rekey into spec alone (its memory): the
// workload batched under the default spec, then read back from that table
// and written under spec; and writes the report.
func runRekeyAlone(ctx context.Context, rep *Report, work, input, spec string) error {
	rekey, err := withEmulator(func(host string) (*Side, error) {
		src := &Side{Name: "rekey_source", PipelineMode: "exec"}
		if err := pipelineExec(ctx, src, host, work, input, filepath.Join(work, "deadletter-rekey-source"), nil, nil); err != nil {
			return nil, err
		}
		src.ReadingsPerSec = float64(src.Readings) / src.Seconds
		rep.Pipeline = src
		printSide(src)
		s := &Side{Name: "rekey", PipelineMode: "exec"}
		args := []string{"--source=bigtable", "--from_spec=" + schemas.DefaultSpecName(), "--from_table=" + tableName(src.Name), "--spec=" + spec}
		if err := pipelineExec(ctx, s, host, work, "", filepath.Join(work, "deadletter-rekey"), args, nil); err != nil {
			return nil, err
		}
		s.ReadingsPerSec = float64(s.Readings) / s.Seconds
		return s, nil
	})
	if err != nil {
		return fmt.Errorf("rekey into %s: %w", *rekeySpec, err)
	}
	rep.Rekey = rekey
	printSide(rekey)
	if *verify && rekey.Readings != rep.Pipeline.Readings {
		return fmt.Errorf("the rekey wrote %d readings; the batch it read from %d", rekey.Readings, rep.Pipeline.Readings)
	}
	if *outFlag != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*outFlag, append(b, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Printf("figures written to %s\n", *outFlag)
	}
	return nil
}

// toParquet writes the JSON lines at in (the generated workload's: the
// timestamp RFC 3339 text or epoch milliseconds) to out as one Parquet
// file with DuckDB: the event time a UTC-adjusted TIMESTAMP(MICROS), the
// values DOUBLE, nulls null, in row groups of rowGroup rows.
func toParquet(in, out string, rowGroup int) error {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return fmt.Errorf("duckdb: %w", err)
	}
	defer db.Close()
	q := fmt.Sprintf(`SET TimeZone='UTC';
		COPY (SELECT sensor_id,
			CASE WHEN regexp_full_match(timestamp, '[0-9]+') THEN make_timestamptz(timestamp::BIGINT * 1000) ELSE timestamp::TIMESTAMPTZ END AS timestamp,
			heart_rate::DOUBLE AS heart_rate, body_temperature::DOUBLE AS body_temperature, spO2::DOUBLE AS spO2, battery_level::DOUBLE AS battery_level
		FROM read_json('%s', format='newline_delimited', columns={sensor_id: 'VARCHAR', timestamp: 'VARCHAR', heart_rate: 'DOUBLE',
			body_temperature: 'DOUBLE', spO2: 'DOUBLE', battery_level: 'DOUBLE'}))
		TO '%s' (FORMAT PARQUET, ROW_GROUP_SIZE %d)`, in, out, rowGroup)
	if _, err := db.Exec(q); err != nil {
		return fmt.Errorf("write %s as Parquet with DuckDB: %w", in, err)
	}
	return nil
}
