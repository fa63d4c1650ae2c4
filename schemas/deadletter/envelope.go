package deadletter

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sensorpipe/sensorpipe/schemas"
)

// Sinks a dead letter names: the stage that could not take its record.
const (
	// SinkParse is reading and validation: the record never became a
	// reading.
	SinkParse = "parse"
	// SinkWindow is the stream's windowing: the reading came after its
	// hour closed (too_late).
	SinkWindow = "window"
	// SinkBigtable, SinkBigQuery and SinkBigQueryRollups are the writes:
	// a reading (or a rollup row) one store did not take. The others may
	// hold it: a reading BigQuery rejects keeps its Bigtable cells.
	SinkBigtable        = "bigtable"
	SinkBigQuery        = "bigquery"
	SinkBigQueryRollups = "bigquery_rollups"
	// SinkSilences is a stream's silence records (the silences table,
	// and the silences topic): a record neither took. It is no reading,
	// and a replay does not take it.
	SinkSilences = "silences"
)

// Sinks lists the sinks in ledger order.
var Sinks = []string{SinkParse, SinkWindow, SinkBigtable, SinkBigQuery, SinkBigQueryRollups}

// DeadLetter is one record that could not be written, with why and where.
// It is written as one JSON object per line.
type DeadLetter struct {
	// Payload is the record as read. One that is not valid UTF-8 (which
	// JSON and BigQuery STRING cannot hold) is shown here by its first
	// TooLargePrefix bytes, invalid bytes replaced, and PayloadBase64 holds
	// it whole and exactly.
	Payload       string `json:"payload"`
	PayloadBase64 string `json:"payload_base64,omitempty"`
	Reason        string `json:"reason"`
	// Sink is the stage that rejected it (SinkParse, SinkBigtable, ...).
	Sink   string `json:"sink"`
	Error  string `json:"error"`
	Source string `json:"source"`
	Time   string `json:"time"`
	// Line is the record's line in its source file, counted from 1, when
	// known; Offset is the byte offset where the line starts, given when
	// the line's number is not known (a block of a large file read on its
	// own).
	Line   int64 `json:"line,omitempty"`
	Offset int64 `json:"offset,omitempty"`
	// Row is the record's place in a Parquet file (its row group and row)
	// or an Avro file (its block and record), counted from 0.
	Row string `json:"row,omitempty"`
	// Length and SHA256 name a too_large record of a file exactly: its
	// bytes from Offset (given then with Line, 0 included), Length of
	// them, line end excluded, and their SHA-256 in hex. A replay with a
	// larger --max_line_bytes reads it back from the file, and knows
	// whether the file changed since.
	Length int64  `json:"length,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Identity (identity field name to its text), WindowStart and
	// WindowEnd (RFC 3339, UTC) name the sensor-hour of a rollup's dead
	// letter, so that a replay rebuilds it.
	Identity    map[string]string `json:"identity,omitempty"`
	WindowStart string            `json:"window_start,omitempty"`
	WindowEnd   string            `json:"window_end,omitempty"`
	// Previous are the failures of the record before this one, oldest
	// first, when it was replayed from the dead letter and failed again.
	Previous []PriorFailure `json:"previous,omitempty"`
}

// MarshalJSON writes d as its fields say, with offset given even when 0
// for a record named by its length (a too_large record at the start of
// its file).
func (d DeadLetter) MarshalJSON() ([]byte, error) {
	type fields DeadLetter
	if d.Length == 0 || d.Offset != 0 {
		return json.Marshal(fields(d))
	}
	return json.Marshal(struct {
		fields
		Offset int64 `json:"offset"`
	}{fields(d), 0})
}

// PriorFailure is an earlier failure of a replayed dead letter.
type PriorFailure struct {
	Reason string `json:"reason"`
	Sink   string `json:"sink"`
	Error  string `json:"error"`
	Time   string `json:"time"`
}

// NewDeadLetter builds the dead letter of payload (read from source) that
// sink could not take because of err, stamped with now (UTC).
func NewDeadLetter(sink, payload, source string, err error, now time.Time) DeadLetter {
	d := DeadLetter{
		Payload: payload,
		Reason:  schemas.Reason(err),
		Sink:    sink,
		Error:   strings.ToValidUTF8(err.Error(), "\uFFFD"),
		Source:  source,
		Time:    now.UTC().Format(time.RFC3339Nano),
	}
	d.provenance(source)
	if !utf8.ValidString(payload) {
		d.Payload = strings.ToValidUTF8(schemas.Prefix(payload), "\uFFFD")
		d.PayloadBase64 = base64.StdEncoding.EncodeToString([]byte(payload))
	}
	return d
}

// CutPayload returns d with its payload cut to its first keep bytes (a
// valid UTF-8 payload at a character's start), its error saying so and
// why; d is returned as it is when its payload is no longer.
func (d DeadLetter) CutPayload(keep int, why string) DeadLetter {
	b, err := d.PayloadBytes()
	if err != nil {
		b = []byte(d.Payload)
	}
	if len(b) <= keep {
		return d
	}
	cut := b[:keep]
	if utf8.Valid(b) {
		for len(cut) > 0 && !utf8.Valid(cut) {
			cut = cut[:len(cut)-1]
		}
	}
	d.Error = fmt.Sprintf("%s; the payload kept is its first %d of %d bytes (%s)", d.Error, len(cut), len(b), why)
	d.Payload, d.PayloadBase64 = string(cut), ""
	if !utf8.Valid(cut) {
		d.Payload = strings.ToValidUTF8(string(cut), "\uFFFD")
		d.PayloadBase64 = base64.StdEncoding.EncodeToString(cut)
	}
	return d
}

// PayloadBytes is the payload exactly as read.
func (d DeadLetter) PayloadBytes() ([]byte, error) {
	if d.PayloadBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(d.PayloadBase64)
		if err != nil {
			return nil, fmt.Errorf("dead letter payload_base64: %w", err)
		}
		return b, nil
	}
	return []byte(d.Payload), nil
}
