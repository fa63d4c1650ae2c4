package main

import (
	"flag"
	"time"

	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/dofns/bigtableio"
	"github.com/sensorpipe/sensorpipe/dofns/pubsubio"
	"github.com/sensorpipe/sensorpipe/internal/cli"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/pipelines"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

// flags are the launcher's own flags, as given: parse turns them into a
// pipelines.Config and a plan. Beam's options (--runner, --endpoint,
// --environment_type, --job_name, --project, --region, --dry_run, ...) are
// Beam's flags, registered by its packages on flag.CommandLine; parse
// reads them as beamFlags.
type flags struct {
	source         string
	input          string
	spec           string
	btProject      string
	btInstance     string
	btAppProfile   string
	btMaxMuts      int64
	btMaxBytes     int64
	btLatency      time.Duration
	btTable        string
	deadLetter     string
	createTables   bool
	timeout        time.Duration
	btTimeout      time.Duration
	retryDeadline  time.Duration
	summaryJSON    string
	attemptTimeout time.Duration
	maxLineBytes   int
	maxUnzipped    int64
	btBatchCells   int
	bqReqBytes     int
	bqBufBytes     int
	bqProject      string
	bqDataset      string
	bqTable        string
	bqMethod       string
	printRows      int
	logLevel       string
	localPartMB    float64
	progressIval   time.Duration
	dryRunOut      string
	format         string
	replayReason   string
	replaySink     string
	replayPayload  string
	allowRejected  bool
	mergeStored    bool
	bqSkipStored   bool

	// Stored-data sources (--source=bigtable or bigquery).
	fromSpec     string
	fromTable    string
	fromInstance string
	fromProject  string
	fromTime     string
	toTime       string

	// Stream flags (--source=pubsub).
	localStateOnDisk bool
	subscription     string
	timestampAttr    string
	idAttr           string
	earlyFiring      time.Duration
	lateFiring       time.Duration
	allowedLateness  time.Duration
	ackDeadline      time.Duration
	silencesTopic    string
	debugAddr        string
}

// register defines the launcher's flags on fs, each bound to a field of f.
func (f *flags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.source, "source", "files", "Where readings come from: files (a batch over --input), pubsub (a stream from --subscription), bigtable (a batch over the readings stored in --from_table under --from_spec, rewritten under --spec: a rekey; see docs/guide/rekey.md), or bigquery (a batch over the readings of a BigQuery table the spec wrote, --from_table, read with the Storage Read API: it rebuilds the Bigtable tables).")
	fs.StringVar(&f.input, "input", "", "With --source=files: a file glob, local or gs://; .gz files are decompressed. Example: 'testdata/*.jsonl'. A local glob is made absolute, and refused on a runner whose workers cannot see this machine's disk (Dataflow, DOCKER, a remote job server's).")
	fs.StringVar(&f.spec, "spec", schemas.DefaultSpecName(), cli.SpecUsage)
	fs.StringVar(&f.btProject, "bigtable_project", "", "Bigtable project id (required; with BIGTABLE_EMULATOR_HOST set it defaults to local-project, the project make run writes).")
	fs.StringVar(&f.btInstance, "bigtable_instance", "", "Bigtable instance id (required; with BIGTABLE_EMULATOR_HOST set it defaults to local-instance).")
	fs.StringVar(&f.btAppProfile, "bigtable_app_profile", "", "Bigtable app profile the writes use (default: the instance's default profile). Give backfills a single-cluster profile of their own so they do not slow serving reads.")
	fs.Int64Var(&f.btMaxMuts, "bigtable_max_outstanding_mutations", bigtableio.DefaultFlow.MaxMutations, "Flow control: the most Bigtable mutations (cells written or deleted) in flight per worker process; further writes wait (0: no cap).")
	fs.Int64Var(&f.btMaxBytes, "bigtable_max_outstanding_bytes", bigtableio.DefaultFlow.MaxBytes, "Flow control: the most Bigtable request bytes in flight per worker process; further writes wait (0: no cap).")
	fs.DurationVar(&f.btLatency, "bigtable_target_latency", 0, "Flow control: a MutateRows latency to steer toward; the per-worker mutation cap then adapts between 1% and 100% of --bigtable_max_outstanding_mutations as Bigtable slows or recovers (0: off). RESOURCE_EXHAUSTED always cuts the cap and pauses writes.")
	fs.StringVar(&f.btTable, "bigtable_table", "", "Bigtable table for the spec's first table (default: the name the spec gives it).")
	fs.StringVar(&f.deadLetter, "dead_letter", "", "Where rejected records go, each with its payload and reason (required): "+targets.DeadLetterTargetForms+".")
	fs.BoolVar(&f.createTables, "create_tables", true, "Create missing Bigtable tables and column families (with the spec's GC policies) before running.")
	fs.DurationVar(&f.timeout, "startup_timeout", 30*time.Second, "How long the start-up checks (Bigtable tables, BigQuery tables, the dead-letter target, the subscription) may take in all; transient errors are retried within it.")
	fs.DurationVar(&f.btTimeout, "bigtable_timeout", 0, "Deprecated: use --startup_timeout.")
	fs.DurationVar(&f.retryDeadline, "write_retry_deadline", retry.DefaultDeadline, "How long a write to Bigtable, BigQuery or the dead letter is retried while its store fails transiently (UNAVAILABLE, timeouts, quota). Past it, the records go to the dead letter as write_failed and the run exits 3.")
	fs.StringVar(&f.summaryJSON, "summary_json", "", "Also write the run's ledger (the summary's figures) as JSON to this file.")
	fs.DurationVar(&f.attemptTimeout, "write_attempt_timeout", retry.DefaultAttemptTimeout, "The longest one write call (an ApplyBulk batch, an AppendRows or insertAll request) may wait for its answer before it is abandoned and retried, within --write_retry_deadline. Each attempt's own timeout comes from the latency of the calls that answered: 4x their p99, at least 1s (5s until 16 have answered), doubled for each retry of the call, at most this.")
	fs.IntVar(&f.maxLineBytes, "max_line_bytes", schemas.DefaultMaxLineBytes, "Longest reading, in bytes: an input line, or one reading of a Pub/Sub message (an NDJSON line, a JSON array's element, a protobuf batch's element; a message itself may be as large as Pub/Sub takes, 10 MB). Default 1 MiB, a tenth of a Bigtable cell's limit. A longer line goes to the dead letter as too_large with its first 1 KiB, and is never held whole in memory, but keeps its offset, length and sha256 in its file, so that a replay (--format=deadletter) with a larger --max_line_bytes reads it back; a longer reading of a message goes whole, and the message's other readings land.")
	fs.Int64Var(&f.maxUnzipped, "max_decompressed_message_bytes", codec.DefaultMaxDecompressedBytes, "Largest size a gzip Pub/Sub message (one starting with gzip's magic bytes, or with the attribute content-encoding: gzip) may decompress to, in bytes (default 64 MiB), against zip bombs; a larger one, or a corrupt one, goes to the dead letter whole (too_large, malformed).")
	fs.IntVar(&f.btBatchCells, "bigtable_batch_cells", bigtableio.DefaultBatchCells, "Cells per Bigtable ApplyBulk batch (the client sends a batch as MutateRows requests of at most 100,000 mutations); up to 4 batches are in flight per bundle, and in a batch at most 4 batches' cells per worker process, whatever the bundles it runs side by side.")
	fs.IntVar(&f.bqReqBytes, "bigquery_request_bytes", bigqueryio.DefaultBQRequestBytes, "Bytes of rows per BigQuery AppendRows or insertAll request (BigQuery's limit is 10 MB).")
	fs.IntVar(&f.bqBufBytes, "bigquery_buffer_bytes", bigqueryio.DefaultBQBufferedBytes, "Memory each BigQuery Storage Write writer (one per worker thread) gives to rows BigQuery has not yet acknowledged: their encodings and the records kept for their dead letters. AppendRows requests are cut smaller to fit 8 in flight; a stream's hour closing sends all of the hour's readings at once.")
	fs.StringVar(&f.bqProject, "bigquery_project", "", "BigQuery project (default: --bigtable_project when given; with BIGQUERY_EMULATOR_HOST set, local-project).")
	fs.StringVar(&f.bqDataset, "bigquery_dataset", "", "BigQuery dataset; empty turns the BigQuery sink off.")
	fs.StringVar(&f.bqTable, "bigquery_table", "", "BigQuery table (default: the one the spec's bigquery section names).")
	fs.StringVar(&f.bqMethod, "bigquery_write_method", bigqueryio.DefaultWriteMethod, "upsert: Storage Write API default stream with change data capture (_CHANGE_TYPE=UPSERT on the spec's primary key): one row per reading, the newest winning; storage_write: the same stream without CDC (at least once); insert_all: tabledata.insertAll with insertId = reading_id (best-effort dedup).")
	fs.IntVar(&f.printRows, "print_rows", 0, "After a local batch run, print this many rows of the first table.")
	fs.StringVar(&f.logLevel, "log_level", "warn", "Runner and SDK log level: debug, info, warn or error.")
	fs.Float64Var(&f.localPartMB, "local_part_mb", 64, "A local batch (prism, direct) whose input is larger than this many MB runs as parts of about this size, one job after another, so that its memory is bounded by a part rather than by the input (prism holds every reading of a job until the job's input is read). The input is scanned once first. Parts are cut between hours where no hour read before has a reading after (input in rough event-time order splits at almost every hour); a part still larger (an hour larger than this, or shuffled input, whose hours overlap throughout) splits into shares of its identities, each reading the part's bytes and keeping the readings of its identities. Every identity's hour is built in one part, so the result is the one job's. CSV, Parquet and Avro files are cut at row groups, blocks and line starts, weighed as the JSON their rows are read as, and the parts that one hour spans three or more of are read in shares of their identities; --source=bigtable, unless its rows hold whole hours of the spec's identities (then one job: they are built as read, with no grouping), into key ranges of half this size (each holds whole rows) at the table's sample row keys and, between them, at row keys read without their values; --source=bigquery into ranges of whole hours of event time. 0: always one job. Dataflow runs one job.")
	fs.DurationVar(&f.progressIval, "progress_interval", 5*time.Second, "How often a local run prints progress (0 turns it off).")
	fs.StringVar(&f.dryRunOut, "dry_run_out", "", "With --runner=dataflow --dry_run: write the full Dataflow job (JSON, with its Beam pipeline graph under \"beamPipeline\") to this file; stdout gets a short summary.")
	fs.StringVar(&f.format, "format", "json", "Payload format of the input lines or messages: json, or proto (the protobuf message the spec declares in its proto: section; see codec.FormatNames); deadletter replays dead letters: each line or message is a dead-letter record whose payload is read as --replay_payload_format (see docs/guide/replay.md). With --source=files also csv, parquet or avro: rows whose columns the spec's fields take their values from (see docs/guide/batch.md). Without --format, the --input glob's extension (.csv, .csv.gz, .parquet, .avro) picks the format, else the extension of the files it matches, all of one format; anything else is read as json.")
	fs.StringVar(&f.replayReason, "replay_reason", "", "With --format=deadletter: replay only the dead letters with these reasons, comma-separated (e.g. write_failed); empty: every reason.")
	fs.StringVar(&f.replaySink, "replay_sink", "", "With --format=deadletter: replay only the dead letters of these sinks, comma-separated (parse, window, bigtable, bigquery, bigquery_rollups); empty: every sink. A write's dead letter (bigtable, bigquery, bigquery_rollups) is written to that sink only.")
	fs.StringVar(&f.replayPayload, "replay_payload_format", "json", "With --format=deadletter: the format of the dead letters' payloads (json or proto).")
	fs.BoolVar(&f.allowRejected, "allow_all_rejected", false, "A batch that read records and rejected every one exits 0 rather than 1 (e.g. a replay of dead letters known to fail again). Without it such a run fails with its top reasons and their likely cause: a wrong --format, a wrong --spec, or the unit of the timestamps.")
	fs.BoolVar(&f.bqSkipStored, "bigquery_skip_stored", true, "A batch with --merge_stored and BigQuery keeps, per sensor-hour, a mark of the rows each BigQuery table acknowledged, in the Bigtable table <first table>_bqmarks (created with --create_tables; without the table no marks are kept), and sends a stored hour only the rows the marks say its table lacks: nothing when the hour is unchanged. false sends every row of each hour again: after a BigQuery table was emptied or re-created.")
	fs.BoolVar(&f.mergeStored, "merge_stored", true, "A batch reads each sensor-hour it writes back from Bigtable and builds it with the readings earlier runs stored there, so that batches that split an hour, in any order, or a batch after a stream, leave what one batch over all the readings leaves; a stream does the same at each hour's on-time and late firings, so that streams sharing a subscription, or a drain-and-replace update, leave what one batch leaves. false builds each hour from the run's own readings only (a backfill into empty tables skips one read per sensor-hour).")

	// Stored-data flags (--source=bigtable or bigquery).
	fs.StringVar(&f.fromSpec, "from_spec", "", "With --source=bigtable: the spec the stored table was written under, a built-in name or a YAML file (default: --spec). Its readings are read back from their cells (a spec whose table does not store every field, such as heroic_metrics, is refused) and must have the fields of --spec.")
	fs.StringVar(&f.fromTable, "from_table", "", "With --source=bigtable or bigquery: the table to read the readings from. With bigtable: a table of --from_spec (default: its first table). With bigquery: [PROJECT:]DATASET.TABLE (required), the project defaulting to --from_project, then --bigquery_project; each column maps back to its field through the spec's bigquery.columns, $reading_id and $ingested_at are not fields, and imputed values (the spec's imputation flag column) are dropped and imputed again.")
	fs.StringVar(&f.fromInstance, "from_instance", "", "With --source=bigtable: the Bigtable instance of --from_table (default: --bigtable_instance).")
	fs.StringVar(&f.fromProject, "from_project", "", "With --source=bigtable or bigquery: the project of --from_table. With bigtable: the project of its instance (default: --bigtable_project). With bigquery: the project when --from_table names none (default: --bigquery_project).")
	fs.StringVar(&f.fromTime, "from_time", "", "With --source=bigtable or bigquery: read only the readings whose event time is at or after this RFC 3339 time (e.g. 2026-03-01T00:00:00Z); with bigquery it is a row restriction on the table's event-time (partitioning) column. Empty: no bound.")
	fs.StringVar(&f.toTime, "to_time", "", "With --source=bigtable or bigquery: read only the readings whose event time is before this RFC 3339 time. Empty: no bound.")

	// Stream flags (--source=pubsub).
	fs.BoolVar(&f.localStateOnDisk, "local_state_on_disk", true, "With --source=pubsub on any runner but Dataflow: keep each sensor-hour's state (its readings, held for the hour's final firings and then for --allowed_lateness, a day by default) in files in the run's temp folder instead of memory, about 32 bytes a vitals reading, so that the stream's memory does not grow with its readings. The files go when their hour expires, and with the run (on a job server, with the worker process). false keeps the state in memory. Ignored on Dataflow, whose state is not in the workers' memory.")
	fs.StringVar(&f.subscription, "subscription", "", "With --source=pubsub: the subscription, projects/P/subscriptions/S (required). PUBSUB_EMULATOR_HOST is honoured on prism and direct.")
	fs.StringVar(&f.timestampAttr, "timestamp_attribute", "", "With --source=pubsub: the message attribute holding the time a message was sent (epoch ms or RFC 3339). Locally it sets the watermark (empty: the publish time); on both runners each reading keeps its payload's event time, and a missing, unparseable or disagreeing attribute (the spec's timestamp_attribute_tolerance) is counted in the ledger.")
	fs.StringVar(&f.idAttr, "id_attribute", "", "With --source=pubsub: a message attribute with a unique record id, for deduplicating redeliveries.")
	fs.DurationVar(&f.earlyFiring, "early_firing", pipelines.DefaultEarlyFiring, "With --source=pubsub: how often an open hour fires early (processing time).")
	fs.DurationVar(&f.lateFiring, "late_firing", pipelines.DefaultLateFiring, "With --source=pubsub: how long after a late reading its hour fires again.")
	fs.DurationVar(&f.allowedLateness, "allowed_lateness", pipelines.DefaultAllowedLateness, "With --source=pubsub: how long after its end an hour still takes late readings; later ones go to the dead letter as too_late.")
	fs.DurationVar(&f.ackDeadline, "pubsub_ack_deadline", 0, "With --source=pubsub on any runner but Dataflow: the lease kept on messages until their bundle commits (10s..600s; 0: "+pubsubio.DefaultAckDeadline.String()+"). After a crash, unacknowledged messages return this long after.")
	fs.StringVar(&f.silencesTopic, "silences_topic", "", "With --source=pubsub and a spec that declares a cadence: also publish each silence and resumed record to this topic, projects/P/topics/T, as JSON with the attributes silence_id (the same for a record raised again: dedupe on it) and kind. The records go to the BigQuery table sensor_silences too when --bigquery_dataset is set.")

	// debugAddr serves Go's profiles (heap, CPU, goroutines) while the job
	// runs: prism and the SDK harness run in the launcher's process
	// locally, so a heap profile shows the runner's buffers and the DoFns'
	// state together. /debug/vars (expvar) gives the runtime's memory
	// figures as JSON.
	fs.StringVar(&f.debugAddr, "debug_addr", "", "Debug: serve net/http/pprof (/debug/pprof/) and the Go runtime's memory figures (/debug/vars) on this address (e.g. 127.0.0.1:6060) while the job runs; empty: off.")
}

// streamFlags are the flags that only apply to --source=pubsub.
var streamFlags = []string{"subscription", "timestamp_attribute", "id_attribute", "early_firing", "late_firing", "allowed_lateness", "pubsub_ack_deadline", "local_state_on_disk", "silences_topic"}

// storedFlags are the flags that only apply to a source of stored data
// (--source=bigtable or bigquery).
var storedFlags = []string{"from_spec", "from_table", "from_instance", "from_project", "from_time", "to_time"}

// bigtableOnlyFlags are the stored-data flags that only apply to
// --source=bigtable.
var bigtableOnlyFlags = []string{"from_spec", "from_instance"}
