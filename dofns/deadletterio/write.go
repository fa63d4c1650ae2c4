package deadletterio

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs"   // gs:// dead-letter prefixes
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local" // local dead-letter folders
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sensorpipe/sensorpipe/dofns/bigqueryio"
	"github.com/sensorpipe/sensorpipe/internal/dofnreg"
	"github.com/sensorpipe/sensorpipe/internal/ledger"
	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

func init() {
	dofnreg.DoFn(&writeFn{}, register.Function2x1[context.Context, deadletter.DeadLetter, error])
	dofnreg.DoFn(&reportingWriteFn{}, register.Function3x1[context.Context, deadletter.DeadLetter, func(int64), error])
	register.Emitter1[int64]()
	register.Function1x0(discardReport)
}

// writeFn writes dead letters to Target, parsed once by the
// launcher (targets.ParseDeadLetterTarget):
//
//   - a local folder or gs:// prefix: JSON Lines, one file per bundle;
//   - bigquery:[PROJECT:]DATASET.TABLE: rows inserted with
//     tabledata.insertAll at the end of each bundle, into a table created
//     when missing (see Schema);
//   - pubsub:projects/P/topics/T: one message per dead letter, its JSON with
//     the attribute reason, every publish awaited at the end of the bundle.
//
// It needs no GroupByKey and emits nothing, so it works the same on bounded
// and unbounded input, in any window and pane. A write is retried under
// the retry policy (internal/retry); one that still fails fails the
// bundle: the runner retries it, so no dead letter is lost (a retried
// BigQuery insert is deduplicated best-effort by its insertId; a retried
// Pub/Sub bundle may publish some letters twice). Each dead letter made
// durable is counted in the run's ledger by sink and reason.
type writeFn struct {
	Target targets.DeadLetterTarget
	// Retry is the retry policy's settings (zero: a 2-minute deadline).
	Retry retry.Settings

	sink  deadLetterSink
	count map[ledger.Key]int64
	ctrs  ledger.Recorder
}

// deadLetterSink is one kind of dead-letter store.
type deadLetterSink interface {
	// add takes one dead letter and its JSON encoding.
	add(ctx context.Context, d deadletter.DeadLetter, line []byte) error
	// flush makes everything added durable, or fails.
	flush(ctx context.Context) error
	// reset drops whatever was added since the last flush.
	reset()
	close() error
}

// Setup opens the store's client.
func (f *writeFn) Setup(ctx context.Context) (err error) {
	f.sink, err = openDeadLetterSink(ctx, f.Target)
	return err
}

// StartBundle drops anything left by a failed bundle.
func (f *writeFn) StartBundle(context.Context) {
	if f.sink != nil {
		f.sink.reset()
	}
	clear(f.count)
}

// ProcessElement hands one dead letter to the store, its payload cut
// to its first schemas.TooLargePrefix bytes when the store cannot hold it
// whole (Limits).
func (f *writeFn) ProcessElement(ctx context.Context, d deadletter.DeadLetter) error {
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode dead letter: %w", err)
	}
	if max, why := maxLine(f.Target.Kind); max > 0 && len(b) > max {
		d = d.CutPayload(schemas.TooLargePrefix, why)
		if b, err = json.Marshal(d); err != nil {
			return fmt.Errorf("encode dead letter: %w", err)
		}
	}
	if err := f.sink.add(ctx, d, b); err != nil {
		return err
	}
	if f.count == nil {
		f.count = map[ledger.Key]int64{}
	}
	f.count[ledger.DeadLetterKey(d.Sink, d.Reason)]++
	return nil
}

// FinishBundle makes the bundle's dead letters durable. A failure fails the
// bundle, so the runner retries it and no dead letter is lost.
func (f *writeFn) FinishBundle(ctx context.Context) error {
	// Register the ledger's dead-letter counters with the first bundle,
	// before the first dead letter (see ledger.Recorder.Register).
	f.ctrs.Register(ctx, ledger.DeadLetterKey(deadletter.SinkParse, schemas.ErrMalformed.Error()))
	if len(f.count) == 0 {
		return nil
	}
	if err := retry.Do(ctx, f.Retry.Policy(), f.sink.flush); err != nil {
		return fmt.Errorf("dead letter %s: %w", f.Target, err)
	}
	for k, n := range f.count {
		f.ctrs.Inc(ctx, k, n)
	}
	clear(f.count)
	return f.ctrs.Commit(ctx)
}

// Teardown closes the store's client.
func (f *writeFn) Teardown() error {
	if f.sink == nil {
		return nil
	}
	err := f.sink.close()
	f.sink = nil
	return err
}

// The largest dead letter (its JSON encoding) each kind of target holds
// whole. A Pub/Sub message holds 10 MB, its attributes included
// (https://cloud.google.com/pubsub/quotas#resource_limits). An insertAll
// request holds 10 MB, and the dead-letter writer sends up to 500 rows a
// request (https://cloud.google.com/bigquery/quotas#streaming_inserts).
const (
	maxPubSubLine   = 9_500_000
	maxBigQueryLine = 16 << 10
)

// maxLine is the largest dead letter a target of kind holds whole (0: no
// limit), and why.
func maxLine(kind targets.DeadLetterKind) (int, string) {
	switch kind {
	case targets.DeadLetterPubSub:
		return maxPubSubLine, "a dead-letter topic's message holds 10 MB"
	case targets.DeadLetterBigQuery:
		return maxBigQueryLine, "a dead-letter table's row holds 16 KiB, 500 rows to an insertAll request of 10 MB"
	}
	return 0, ""
}

// Limits says in one line what target cannot hold, for the launcher to
// warn of at start, or "" for a folder or gs:// prefix, which holds every
// dead letter whole.
func Limits(target targets.DeadLetterTarget) string {
	max, why := maxLine(target.Kind)
	if max == 0 {
		return ""
	}
	return fmt.Sprintf("--dead_letter=%s keeps a dead letter whole only up to %d bytes of JSON (%s); a larger one, such as a whole Pub/Sub message that could not be read or a too-large reading, keeps its payload's first %d bytes there: use a folder or gs:// prefix to keep them whole",
		target, max, why, schemas.TooLargePrefix)
}

func openDeadLetterSink(ctx context.Context, t targets.DeadLetterTarget) (deadLetterSink, error) {
	switch t.Kind {
	case targets.DeadLetterBigQuery:
		return openBigQueryDeadLetters(ctx, t)
	case targets.DeadLetterPubSub:
		return openPubSubDeadLetters(ctx, t)
	}
	return &fileDeadLetters{dir: t.Path, run: t.Run}, nil
}

// fileDeadLetters writes JSON Lines, one file per bundle, under a local
// folder or gs:// prefix.
type fileDeadLetters struct {
	dir, run string
	buf      bytes.Buffer
}

func (s *fileDeadLetters) add(_ context.Context, _ deadletter.DeadLetter, line []byte) error {
	s.buf.Write(line)
	s.buf.WriteByte('\n')
	return nil
}

func (s *fileDeadLetters) reset() { s.buf.Reset() }

func (s *fileDeadLetters) close() error { return nil }

func (s *fileDeadLetters) flush(ctx context.Context) error {
	name, err := fileName(s.dir)
	if err != nil {
		return err
	}
	if s.run != "" {
		name = strings.Replace(name, "/deadletter-", "/deadletter-"+s.run+"-", 1)
	}
	fs, err := filesystem.New(ctx, name)
	if err != nil {
		return fmt.Errorf("dead letter %s: %w", name, err)
	}
	defer fs.Close()
	w, err := fs.OpenWrite(ctx, name)
	if err != nil {
		return fmt.Errorf("dead letter %s: %w", name, err)
	}
	if _, err := w.Write(s.buf.Bytes()); err != nil {
		w.Close()
		return fmt.Errorf("dead letter %s: %w", name, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("dead letter %s: %w", name, err)
	}
	s.buf.Reset()
	return nil
}

// FileName returns a new, unique file name under dir.
func fileName(dir string) (string, error) {
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("dead letter name: %w", err)
	}
	return fmt.Sprintf("%s/deadletter-%s-%s.jsonl", strings.TrimRight(dir, "/"),
		time.Now().UTC().Format("20060102T150405.000"), hex.EncodeToString(r[:])), nil
}

// Schema is the schema of a BigQuery dead-letter table: the
// fields of deadletter.DeadLetter, partitioned by day on time.
func schema() bigquery.Schema {
	return bigquery.Schema{
		{Name: "payload", Type: bigquery.StringFieldType, Description: "The rejected input, as read (invalid UTF-8 replaced: see payload_base64)."},
		{Name: "reason", Type: bigquery.StringFieldType, Description: "Why: malformed, missing_field, invalid_field, bad_timestamp, out_of_range, write_failed, too_late or internal."},
		{Name: "sink", Type: bigquery.StringFieldType, Description: "Which stage could not take it: parse, window, bigtable, bigquery or bigquery_rollups."},
		{Name: "error", Type: bigquery.StringFieldType, Description: "The error, in words."},
		{Name: "source", Type: bigquery.StringFieldType, Description: "The file or subscription the input came from."},
		{Name: "time", Type: bigquery.TimestampFieldType, Description: "When the record was dead-lettered (UTC)."},
		{Name: "payload_base64", Type: bigquery.BytesFieldType, Description: "The payload's exact bytes, when it is not valid UTF-8."},
	}
}

// bigQueryDeadLetters inserts rows with tabledata.insertAll (the insertAll
// writer the BigQuery sink's insert_all method uses).
type bigQueryDeadLetters struct {
	client *bigquery.Client
	table  *bigquery.Table
	name   string
	w      bigqueryio.InsertAll
	rows   []bigquery.ValueSaver
}

// openBigQueryDeadLetters opens a client (BIGQUERY_EMULATOR_HOST is
// honoured) and creates the table when it is missing.
func openBigQueryDeadLetters(ctx context.Context, t targets.DeadLetterTarget) (*bigQueryDeadLetters, error) {
	project := t.Project
	if project == "" {
		project = bigquery.DetectProjectID
	}
	c, err := bigquery.NewClient(ctx, project, bigqueryio.ClientOptions()...)
	if err != nil {
		return nil, fmt.Errorf("dead letter %s: bigquery client (name the project: bigquery:PROJECT:%s.%s): %w", t, t.Dataset, t.Table, err)
	}
	s := &bigQueryDeadLetters{client: c, table: c.Dataset(t.Dataset).Table(t.Table), name: c.Project() + ":" + t.Dataset + "." + t.Table}
	s.w = bigqueryio.NewInsertAll(s.table, s.name, bigqueryio.DefaultInsertAllRows)
	if err := s.ensureTable(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return s, nil
}

func (s *bigQueryDeadLetters) add(_ context.Context, d deadletter.DeadLetter, line []byte) error {
	s.rows = append(s.rows, deadLetterRow{d: d, insertID: deadLetterID(line)})
	return nil
}

func (s *bigQueryDeadLetters) reset() { s.rows = s.rows[:0] }

func (s *bigQueryDeadLetters) close() error { return s.client.Close() }

// flush inserts the rows, one attempt each (writeFn retries the
// whole flush under the retry policy). A row BigQuery rejects fails the
// flush, and so the bundle: a dead letter has nowhere else to go.
func (s *bigQueryDeadLetters) flush(ctx context.Context) error {
	var errs []error
	err := s.w.Put(ctx, s.rows, retry.Policy{MaxAttempts: 1}.Start(), func([]int) {}, func(i int, err error) {
		errs = append(errs, fmt.Errorf("row %d: %w", i, err))
	})
	if err == nil && len(errs) > 0 {
		err = fmt.Errorf("%d of %d rows not inserted: %w", len(errs), len(s.rows), errors.Join(errs...))
	}
	if err != nil {
		return fmt.Errorf("dead letter table %s: %w", s.name, err)
	}
	s.rows = s.rows[:0]
	return nil
}

// deadLetterID is the insertId of a dead letter: a retried bundle inserts
// the same letters with the same ids, which BigQuery deduplicates
// best-effort.
func deadLetterID(line []byte) string {
	h := sha256.Sum256(line)
	return hex.EncodeToString(h[:16])
}

// deadLetterRow is one dead letter as a BigQuery row.
type deadLetterRow struct {
	d        deadletter.DeadLetter
	insertID string
}

// Save implements bigquery.ValueSaver.
func (r deadLetterRow) Save() (map[string]bigquery.Value, string, error) {
	t, err := time.Parse(time.RFC3339Nano, r.d.Time)
	if err != nil {
		t = time.Now()
	}
	row := map[string]bigquery.Value{
		"payload": r.d.Payload,
		"reason":  r.d.Reason,
		"sink":    r.d.Sink,
		"error":   r.d.Error,
		"source":  r.d.Source,
		"time":    t.UTC(),
	}
	if b := payloadBytes(r.d); b != nil {
		row["payload_base64"] = b
	}
	return row, r.insertID, nil
}

// pubSubDeadLetters publishes one message per dead letter.
type pubSubDeadLetters struct {
	client  *pubsub.Client
	pub     *pubsub.Publisher
	topic   string
	pending []publish
}

// publish is one message and its publish's outcome.
type publish struct {
	msg *pubsub.Message
	res *pubsub.PublishResult
}

// openPubSubDeadLetters opens a client (PUBSUB_EMULATOR_HOST is honoured)
// and a publisher on the topic.
func openPubSubDeadLetters(ctx context.Context, t targets.DeadLetterTarget) (*pubSubDeadLetters, error) {
	c, err := pubsub.NewClient(ctx, t.TopicProject())
	if err != nil {
		return nil, fmt.Errorf("dead letter %s: pubsub client: %w", t, err)
	}
	return &pubSubDeadLetters{client: c, pub: c.Publisher(t.Topic), topic: t.Topic}, nil
}

func (s *pubSubDeadLetters) add(ctx context.Context, d deadletter.DeadLetter, line []byte) error {
	m := &pubsub.Message{Data: line, Attributes: map[string]string{"reason": d.Reason, "sink": d.Sink}}
	s.pending = append(s.pending, publish{m, s.pub.Publish(ctx, m)})
	return nil
}

// reset forgets the publishes of a failed bundle; its messages may still be
// published, and the retry publishes them again (at least once).
func (s *pubSubDeadLetters) reset() { s.pending = s.pending[:0] }

func (s *pubSubDeadLetters) close() error {
	s.pub.Stop()
	return s.client.Close()
}

// flush waits for every publish. The messages whose publish failed are
// published again, and stay pending for the next flush, which the retry
// policy makes.
func (s *pubSubDeadLetters) flush(ctx context.Context) error {
	var (
		first error
		again []publish
	)
	for _, p := range s.pending {
		if _, err := p.res.Get(ctx); err != nil {
			first = cmp.Or(first, err)
			again = append(again, publish{p.msg, s.pub.Publish(context.WithoutCancel(ctx), p.msg)})
		}
	}
	n := len(s.pending)
	s.pending = again
	if len(again) > 0 {
		return fmt.Errorf("dead letter topic %s: %d of %d publishes failed: %w", s.topic, len(again), n, first)
	}
	return nil
}

// payloadBytes is a BigQuery dead-letter row's payload_base64 value: the
// exact payload when it is not valid UTF-8, else nil.
func payloadBytes(d deadletter.DeadLetter) []byte {
	if d.PayloadBase64 == "" {
		return nil
	}
	b, err := d.PayloadBytes()
	if err != nil {
		return nil
	}
	return b
}

// reportingWriteFn is writeFn with an output: at the end of each bundle
// in which it made dead letters durable, it emits how many. Config.Reporting
// says what the output is for.
type reportingWriteFn struct {
	// writeFn is embedded: its settings serialize as promoted fields, and
	// its Setup and Teardown are the DoFn's.
	writeFn
}

// StartBundle is writeFn's. (Beam Go wants StartBundle to take
// ProcessElement's emitters.)
func (f *reportingWriteFn) StartBundle(ctx context.Context, _ func(int64)) {
	f.writeFn.StartBundle(ctx)
}

// ProcessElement is writeFn's: it emits nothing.
func (f *reportingWriteFn) ProcessElement(ctx context.Context, d deadletter.DeadLetter, _ func(int64)) error {
	return f.writeFn.ProcessElement(ctx, d)
}

// FinishBundle is writeFn's, then emits the count of dead letters it made
// durable, if any.
func (f *reportingWriteFn) FinishBundle(ctx context.Context, emit func(int64)) error {
	var n int64
	for _, c := range f.writeFn.count {
		n += c
	}
	if err := f.writeFn.FinishBundle(ctx); err != nil {
		return err
	}
	if n > 0 {
		emit(n)
	}
	return nil
}

// discardReport drops a reportingWriteFn's count: the ledger has it.
func discardReport(int64) {}
