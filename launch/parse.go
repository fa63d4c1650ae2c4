package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/dofns/bigtableio/flowcontrol"
	"github.com/sensorpipe/sensorpipe/dofns/deadletterio"
	"github.com/sensorpipe/sensorpipe/dofns/fileio"
	"github.com/sensorpipe/sensorpipe/dofns/pubsubio"
	"github.com/sensorpipe/sensorpipe/internal/cli"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/pipelines"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/silences"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

// plan is what run needs beyond the pipeline's configuration: the runner,
// the graph's options, and the launcher's own settings (what it checks
// before the job, what it prints, where it writes the summary).
type plan struct {
	runner    runner
	dryRun    bool // --dry_run: build the Dataflow job, submit nothing
	streaming bool // --source=pubsub
	batch     pipelines.BatchOptions
	stream    pipelines.StreamOptions
	// listInput: run lists --input before the job, and fails when it
	// matches no file (a local glob, or any glob on a local runner).
	listInput bool
	// warnings are said on stderr before the job.
	warnings []string
	// detectFormat: --format was not given and the --input glob's
	// extension names no format; run reads the format off the files it
	// matches.
	detectFormat bool

	startupTimeout   time.Duration
	createTables     bool
	summaryJSON      string
	dryRunOut        string
	debugAddr        string
	printRows        int
	progressInterval time.Duration
	localPartMB      float64
	allowAllRejected bool
	logLevel         string
	// format and spec are --format and --spec as given, for the likely
	// cause of a run that rejects every record it reads.
	format, spec string
	// args are the flags as given, for the command that replays a run's
	// write_failed dead letters.
	args []string
}

// formatDeadLetter is the --format of a dead-letter replay.
const formatDeadLetter = "deadletter"

// newFlagSet is a flag set with the launcher's flags bound to f, and a
// stand-in for each of Beam's (beamFlags) so that args may hold them.
func newFlagSet(f *flags) *flag.FlagSet {
	fs := flag.NewFlagSet("launch", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	f.register(fs)
	addBeamFlags(fs)
	return fs
}

// parse validates the launcher's command line (os.Args[1:]) and builds the
// pipeline's configuration and the plan of the run: each flag is read
// here, once. It touches no network and no global state: what needs a
// call (listing the input, checking the tables) is run's. Its errors are
// usage errors (exit 2).
//
// Beam's options are Beam's flags on flag.CommandLine, which beam.Init and
// the runners read (and which a worker's command line sets): main parses
// the command line onto flag.CommandLine first, for Beam, and parse reads
// it again with a stand-in of each Beam flag (beamFlags), so that it sees
// --runner, --endpoint, --environment_type and --dry_run as given without
// reading or writing Beam's variables.
func parse(args []string) (cfg pipelines.Config, p plan, err error) {
	var f flags
	fs := newFlagSet(&f)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, p, err
		}
		return cfg, p, usagef("%w (see --help)", err)
	}
	switch f.logLevel {
	case "debug", "info", "warn", "error":
	default:
		return cfg, p, usagef("--log_level=%q: use debug, info, warn or error", f.logLevel)
	}
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	bf, err := readBeamFlags(fs)
	if err != nil {
		return cfg, p, err
	}
	r := runner{name: bf.runner, endpoint: bf.endpoint, envType: bf.environmentType}
	if r.name == "" {
		r.name = "prism"
	}
	p = plan{
		runner: r, dryRun: bf.dryRun, streaming: f.source == "pubsub", logLevel: f.logLevel,
		startupTimeout: f.timeout, createTables: f.createTables, summaryJSON: f.summaryJSON, dryRunOut: f.dryRunOut,
		debugAddr: f.debugAddr, printRows: f.printRows, progressInterval: f.progressIval, localPartMB: f.localPartMB,
		allowAllRejected: f.allowRejected, format: f.format, spec: f.spec, args: args,
	}
	if given["bigtable_timeout"] && !given["startup_timeout"] && f.btTimeout > 0 {
		p.startupTimeout = f.btTimeout // the deprecated name, given alone
	}
	if fs.NArg() > 0 {
		return cfg, p, usagef("unexpected argument %q: every option is a --flag", fs.Arg(0))
	}
	if r.jobServer() && !r.prism() && r.endpoint == "" {
		return cfg, p, usagef("--runner=%s submits to a Beam job server: give its --endpoint=HOST:PORT", r.name)
	}
	spec, err := cli.LoadSpec(f.spec)
	if err != nil {
		return cfg, p, usagef("--spec: %w", err)
	}
	if f.btTable != "" {
		if err := spec.RenameTable(spec.Bigtable.Tables[0].Name, f.btTable); err != nil {
			return cfg, p, cli.Usage(err)
		}
	}
	// --bigtable_project as given: a defaulted one is no BigQuery default.
	btProject, btInstance, err := cli.Bigtable(f.btProject, f.btInstance)
	if err != nil {
		return cfg, p, cli.Usage(err)
	}
	if f.btMaxMuts < 0 || f.btMaxBytes < 0 || f.btLatency < 0 {
		return cfg, p, usagef("--bigtable_max_outstanding_mutations, --bigtable_max_outstanding_bytes and --bigtable_target_latency must not be negative (0 turns each off)")
	}
	bqProject, dlProject := f.bqProject, f.bqProject
	if dlProject == "" {
		dlProject = btProject
	}
	if f.bqDataset != "" {
		if bqProject, err = cli.BigQueryProject(f.bqProject, f.btProject); err != nil {
			return cfg, p, cli.Usage(err)
		}
		dlProject = bqProject
	}
	dl, err := validateDeadLetter(f.deadLetter, dlProject, r.workersSeeDisk())
	if err != nil {
		return cfg, p, cli.Usage(err)
	}
	if w := deadletterio.Limits(dl); w != "" {
		p.warnings = append(p.warnings, "warning: "+w)
	}
	if dl.Kind == targets.DeadLetterFiles && localPath(dl.Path) {
		// The workers may run in another working directory: they get
		// the folder the preflight creates and the summary names.
		if dl.Path, err = filepath.Abs(dl.Path); err != nil {
			return cfg, p, usagef("--dead_letter=%s: %w", f.deadLetter, err)
		}
	}
	payloadFormat := f.format
	if f.source == sourceBigQuery {
		// A table's rows are read back as JSON payloads.
		if given["format"] && f.format != "json" {
			return cfg, p, usagef("--format=%s: --source=bigquery reads a table's rows, not payloads; leave --format out", f.format)
		}
		payloadFormat = "json"
	} else if err := parseFileFormat(&f, given, &p); err != nil {
		return cfg, p, err
	} else if p.batch.Format != "" {
		// A table file's rows reach the parse as the JSON objects the
		// spec reads (fileio's readRowsFn).
		payloadFormat = fileio.FormatJSON
	}
	var replay *pipelines.Replay
	if f.format == formatDeadLetter {
		payloadFormat = f.replayPayload
		if replay, err = replayFilter(f.replayReason, f.replaySink); err != nil {
			return cfg, p, err
		}
	} else if given["replay_reason"] || given["replay_sink"] || given["replay_payload_format"] {
		return cfg, p, usagef("--replay_reason, --replay_sink and --replay_payload_format apply to --format=deadletter only")
	}
	opts := hours.CompileOptions{Format: payloadFormat}
	if f.bqDataset != "" {
		// A partitioned table takes event times within a window around
		// the run's start; the spec's range is narrowed to it.
		opts.BigQueryAt = time.Now().UnixMilli()
	}
	compiled, err := hours.Compile(spec, opts)
	switch {
	case errors.Is(err, codec.ErrFormat):
		return cfg, p, usagef("--format: %w", err)
	case err != nil:
		return cfg, p, usagef("--spec: %w", err)
	}
	if err := checkLimits(&f); err != nil {
		return cfg, p, err
	}
	cfg = pipelines.Config{Spec: compiled, DeadLetter: dl, Runner: r.name, Replay: replay,
		Bigtable: bigtableio.Config{Project: btProject, Instance: btInstance, AppProfile: f.btAppProfile, BatchCells: f.btBatchCells,
			Flow: flowcontrol.Settings{MaxMutations: f.btMaxMuts, MaxBytes: f.btMaxBytes, TargetLatency: f.btLatency}},
		Retry:        retry.Settings{Deadline: f.retryDeadline, AttemptTimeout: f.attemptTimeout},
		MaxLineBytes: f.maxLineBytes, MaxDecompressedBytes: f.maxUnzipped}
	if cfg.DeadLetter.Kind == targets.DeadLetterFiles {
		cfg.DeadLetter.Run = runID
	}
	if f.bqDataset != "" {
		if cfg.BigQuery, err = bigQueryConfig(&f, spec, bqProject, btProject); err != nil {
			return cfg, p, err
		}
	}
	if !readsStored(f.source) {
		for _, name := range storedFlags {
			if given[name] {
				if slices.Contains(bigtableOnlyFlags, name) {
					return cfg, p, usagef("--%s applies to --source=bigtable only", name)
				}
				return cfg, p, usagef("--%s applies to --source=bigtable or bigquery only", name)
			}
		}
	}
	switch f.source {
	case "files":
		if err := parseBatch(&f, given, r, &p); err != nil {
			return cfg, p, err
		}
	case "pubsub":
		if given["bigquery_skip_stored"] {
			return cfg, p, usagef("--bigquery_skip_stored applies to batches: a stream sends each firing's BigQuery rows and keeps no BigQuery marks")
		}
		if err := parseStream(&f, r, &cfg, &p); err != nil {
			return cfg, p, err
		}
	case sourceBigtable:
		if err := parseFromBigtable(&f, given, spec, cfg.Bigtable, &p); err != nil {
			return cfg, p, err
		}
	case sourceBigQuery:
		if err := parseFromBigQuery(&f, given, spec, &p); err != nil {
			return cfg, p, err
		}
	default:
		return cfg, p, usagef("--source=%q: use files, pubsub, bigtable or bigquery", f.source)
	}
	if err := cfg.Check(); err != nil {
		return cfg, p, cli.Usage(err)
	}
	if err := p.stream.Windowing.Check(); err != nil {
		return cfg, p, cli.Usage(err)
	}
	if err := checkBigQueryNames(cfg); err != nil {
		return cfg, p, err
	}
	switch {
	case p.dryRun && !r.dataflow():
		return cfg, p, usagef("--dry_run builds a Dataflow job without submitting it: give --runner=dataflow (a %s run has no dry run)", r.name)
	case p.dryRunOut != "" && !p.dryRun:
		return cfg, p, usagef("--dry_run_out=%s is the file a dry run writes its job to: add --dry_run (and --runner=dataflow)", p.dryRunOut)
	}
	readBack := cfg.Local != nil && cfg.Local.Recover
	// A batch that merges with stored hours (as the checks below leave
	// it) and writes BigQuery keeps BigQuery marks; a replay rewrites
	// its hours whole.
	defer func() {
		cfg.BigQueryMarks = f.bqSkipStored && !p.streaming && p.batch.MergeStored && cfg.BigQuery != nil && cfg.Replay == nil
	}()
	if !p.batch.MergeStored && !p.stream.MergeStored && !readBack {
		return cfg, p, nil
	}
	if _, err := hours.NewReadBack(spec); err != nil {
		switch {
		case p.batch.MergeStored:
			p.warnings = append(p.warnings, fmt.Sprintf("warning: a batch that splits an hour recomputes its rollup (and imputed values) from the batch's readings only: %v", err))
			p.batch.MergeStored = false
		case p.stream.MergeStored || readBack:
			p.warnings = append(p.warnings, fmt.Sprintf("warning: each hour is built from the readings this stream reads only, not those another stream on the subscription or a killed or replaced run stored: %v", err))
			p.stream.MergeStored = false
			if readBack {
				cfg.Local.Recover = false
			}
		}
	}
	return cfg, p, nil
}

// parseFileFormat reads a batch's file format: --format=csv, parquet or
// avro, or without --format the one the --input glob's extension names.
// A glob whose extension names none (dir/*) is looked at again when run
// lists it (plan.detectFormat).
func parseFileFormat(f *flags, given map[string]bool, p *plan) error {
	switch {
	case fileio.IsTableFormat(f.format):
		if f.source != "files" {
			return usagef("--format=%s reads files: it applies to --source=files only", f.format)
		}
		p.batch.Format = f.format
	case given["format"] || f.source != "files":
	default:
		p.batch.Format = fileio.FormatOf(f.input)
		if p.batch.Format != "" {
			p.format = p.batch.Format
		}
		p.detectFormat = p.batch.Format == "" && !strings.HasSuffix(strings.ToLower(f.input), ".jsonl") &&
			!strings.HasSuffix(strings.ToLower(f.input), ".json") && !fileio.Compressed(f.input)
	}
	return nil
}

// checkLimits checks the flags that bound a write or a record.
func checkLimits(f *flags) error {
	switch {
	case f.retryDeadline <= 0:
		return usagef("--write_retry_deadline=%v: give a positive duration such as 2m", f.retryDeadline)
	case f.attemptTimeout <= 0:
		return usagef("--write_attempt_timeout=%v: give a positive duration such as 30s", f.attemptTimeout)
	case f.maxLineBytes < 1<<10 || f.maxLineBytes > 100<<20:
		return usagef("--max_line_bytes=%d: give 1024..104857600", f.maxLineBytes)
	case f.maxUnzipped < 1<<20 || f.maxUnzipped > 1<<30:
		return usagef("--max_decompressed_message_bytes=%d: give 1048576..1073741824", f.maxUnzipped)
	case f.btBatchCells <= 0 || f.btBatchCells > 100_000:
		return usagef("--bigtable_batch_cells=%d: give 1..100000", f.btBatchCells)
	case f.bqReqBytes < 1<<10 || f.bqReqBytes > 10<<20:
		return usagef("--bigquery_request_bytes=%d: give 1024..10485760 (BigQuery takes at most 10 MB a request)", f.bqReqBytes)
	case f.bqBufBytes < 1<<20 || f.bqBufBytes > 1<<30:
		return usagef("--bigquery_buffer_bytes=%d: give 1048576..1073741824", f.bqBufBytes)
	}
	return nil
}

// bigQueryConfig is the BigQuery sink the flags describe: project is the
// BigQuery project (cli.BigQueryProject's), btProject the Bigtable one.
func bigQueryConfig(f *flags, spec *schemas.Spec, project, btProject string) (*bigqueryio.Config, error) {
	if spec.BigQuery == nil {
		return nil, usagef("--bigquery_dataset: spec %s has no bigquery section", spec.Name)
	}
	bq := &bigqueryio.Config{Project: project, Dataset: f.bqDataset, Table: f.bqTable, WriteMethod: f.bqMethod, MaxRequestBytes: f.bqReqBytes,
		MaxBufferedBytes: f.bqBufBytes}
	if bq.Project == "" {
		bq.Project = btProject
	}
	if bq.Table == "" {
		bq.Table = spec.BigQuery.Table
	}
	switch bq.WriteMethod {
	case bigqueryio.WriteUpsert:
		if len(spec.BigQuery.PrimaryKey) == 0 {
			return nil, usagef("--bigquery_write_method=upsert: spec %s has no bigquery primary_key; add one (e.g. primary_key: [reading_id]) or use --bigquery_write_method=storage_write", spec.Name)
		}
	case bigqueryio.WriteStorageWrite, bigqueryio.WriteInsertAll:
	default:
		return nil, usagef("--bigquery_write_method=%q: use upsert, storage_write or insert_all", bq.WriteMethod)
	}
	return bq, nil
}

// parseBatch reads the flags of a batch (--source=files) into p.
func parseBatch(f *flags, given map[string]bool, r runner, p *plan) error {
	p.batch.MergeStored = f.mergeStored
	if f.input == "" {
		return usagef("--input is required with --source=files: give a file glob such as 'testdata/*.jsonl'")
	}
	for _, name := range streamFlags {
		if given[name] {
			return usagef("--%s applies to --source=pubsub only", name)
		}
	}
	p.batch.Input = f.input
	if localPath(f.input) {
		if !r.workersSeeDisk() {
			return r.remoteDiskError("--input", f.input)
		}
		// The workers may run in another working directory.
		abs, err := filepath.Abs(f.input)
		if err != nil {
			return usagef("--input=%s: %w", f.input, err)
		}
		p.batch.Input = abs
	}
	p.listInput = localPath(f.input) || r.local()
	return nil
}

// parseStream reads the flags of a stream (--source=pubsub) into cfg and p.
func parseStream(f *flags, r runner, cfg *pipelines.Config, p *plan) error {
	if f.input != "" {
		return usagef("--input applies to --source=files only; a stream reads --subscription")
	}
	if f.subscription == "" {
		return usagef("--subscription is required with --source=pubsub: give projects/P/subscriptions/S")
	}
	sub, err := targets.ParseSubscription(f.subscription)
	if err != nil {
		return usagef("--subscription: %w", err)
	}
	p.stream.Source = pubsubio.Config{Subscription: sub, TimestampAttribute: f.timestampAttr, IDAttribute: f.idAttr,
		Dataflow: r.dataflow(), AckDeadline: f.ackDeadline}
	if f.earlyFiring <= 0 || f.lateFiring <= 0 || f.allowedLateness < 0 {
		return usagef("--early_firing and --late_firing must be positive, --allowed_lateness not negative")
	}
	if f.ackDeadline != 0 && (f.ackDeadline < 10*time.Second || f.ackDeadline > 600*time.Second) {
		return usagef("--pubsub_ack_deadline=%v: use 10s..600s", f.ackDeadline)
	}
	if f.silencesTopic != "" {
		if !silences.RaisesSilences(cfg.Spec.Spec) {
			return usagef("--silences_topic: the spec declares no cadence, so the stream raises no silences: add cadence: (or cadence_field:) to the spec, or drop the flag")
		}
		topic, err := targets.ParseTopic(f.silencesTopic)
		if err != nil {
			return usagef("--silences_topic: %w", err)
		}
		cfg.SilencesTopic = &topic
	}
	if silences.RaisesSilences(cfg.Spec.Spec) && cfg.BigQuery == nil && cfg.SilencesTopic == nil && cfg.Replay == nil {
		p.warnings = append(p.warnings, "warning: the spec declares a cadence, but this stream raises no silences: it has nowhere to write them (give --bigquery_dataset for the sensor_silences table, or --silences_topic)")
	}
	p.stream.Windowing = pipelines.Windowing{EarlyFiring: f.earlyFiring, LateFiring: f.lateFiring, AllowedLateness: f.allowedLateness}
	p.stream.MergeStored = f.mergeStored
	if f.allowedLateness == 0 {
		// 0 is a valid lateness (late readings are all too_late); the
		// pipelines' zero means "default", so the smallest positive
		// lateness stands for it.
		p.stream.Windowing.AllowedLateness = time.Millisecond
	}
	if !r.dataflow() {
		// Runners but Dataflow (prism, direct, a job server's) keep
		// windows in their memory: write each reading's own cells before
		// its message is acknowledged, read each window back from
		// Bigtable at its final firing, for what a killed or stopped run
		// held, and keep the hours' state on the workers' disk, not in
		// memory.
		cfg.Local = &pipelines.LocalRunner{WriteOnArrival: true, Recover: true, DiskState: f.localStateOnDisk}
	}
	return nil
}

// replayFilter is the replay the --replay_reason and --replay_sink values
// describe.
func replayFilter(reasons, sinks string) (*pipelines.Replay, error) {
	r := &pipelines.Replay{}
	for _, reason := range splitList(reasons) {
		if !slices.Contains(schemas.Reasons(), reason) {
			return nil, usagef("--replay_reason=%s: %q is no reason; use %s", reasons, reason, strings.Join(schemas.Reasons(), ", "))
		}
		r.Reasons = append(r.Reasons, reason)
	}
	for _, sink := range splitList(sinks) {
		if !slices.Contains(deadletter.Sinks, sink) {
			return nil, usagef("--replay_sink=%s: %q is no sink; use %s", sinks, sink, strings.Join(deadletter.Sinks, ", "))
		}
		r.Sinks = append(r.Sinks, sink)
	}
	return r, nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// beamFlags are the Beam options the launcher reads itself: the runner,
// where and how a job server runs the job, and the Dataflow dry run.
type beamFlags struct {
	runner, endpoint, environmentType string
	dryRun                            bool
}

// addBeamFlags defines on set a stand-in (beamValue) for each flag of
// flag.CommandLine that set lacks: Beam's options, which its packages
// register there.
func addBeamFlags(set *flag.FlagSet) {
	flag.CommandLine.VisitAll(func(g *flag.Flag) {
		if set.Lookup(g.Name) != nil {
			return
		}
		b, ok := g.Value.(interface{ IsBoolFlag() bool })
		set.Var(&beamValue{value: g.DefValue, isBool: ok && b.IsBoolFlag()}, g.Name, g.Usage)
	})
}

// readBeamFlags reads the Beam options the launcher uses from fs's
// stand-ins.
func readBeamFlags(fs *flag.FlagSet) (beamFlags, error) {
	get := func(name string) string {
		if g := fs.Lookup(name); g != nil {
			return g.Value.String()
		}
		return ""
	}
	b := beamFlags{runner: get("runner"), endpoint: get("endpoint"), environmentType: get("environment_type")}
	if v := get("dry_run"); v != "" {
		var err error
		if b.dryRun, err = strconv.ParseBool(v); err != nil {
			return b, usagef("--dry_run=%s: give true or false", v)
		}
	}
	return b, nil
}

// beamValue stands in for a Beam flag on parse's flag set: it keeps the
// value given as text, and leaves Beam's variable alone.
type beamValue struct {
	value  string
	isBool bool
}

func (v *beamValue) String() string {
	if v == nil {
		return ""
	}
	return v.value
}

func (v *beamValue) Set(s string) error {
	if v.isBool {
		if _, err := strconv.ParseBool(s); err != nil {
			return err
		}
	}
	v.value = s
	return nil
}

func (v *beamValue) IsBoolFlag() bool { return v.isBool }
