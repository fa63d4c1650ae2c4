package hours

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
)

// TestEnvelopeSinks shows the sink an envelope replays as: its own, or
// for an empty one the stage its reason names; and which the run's sinks
// refuse, naming the sink.
func TestEnvelopeSinks(t *testing.T) {
	tests := []struct {
		line, want string
	}{
		{`{"payload":"p","reason":"bad_timestamp"}`, deadletter.SinkParse},
		{`{"payload":"p","reason":"too_large","sink":""}`, deadletter.SinkParse},
		{`{"payload":"p","reason":"too_late"}`, deadletter.SinkWindow},
		{`{"payload":"p","reason":"write_failed","sink":"bigquery"}`, deadletter.SinkBigQuery},
	}
	for _, tt := range tests {
		d, err := deadletter.ParseEnvelope([]byte(tt.line))
		if err != nil || d.Sink != tt.want {
			t.Errorf("ParseEnvelope(%s): sink %q, err %v; want sink %q", tt.line, d.Sink, err, tt.want)
		}
	}
	_, err := deadletter.ParseEnvelope([]byte(`{"payload":"p","reason":"write_failed","sink":"nosuchsink"}`))
	if !errors.Is(err, schemas.ErrMalformed) || !strings.Contains(err.Error(), `"nosuchsink"`) {
		t.Errorf("unknown sink: %v; want malformed naming it", err)
	}
	run := []string{deadletter.SinkParse, deadletter.SinkWindow, deadletter.SinkBigtable}
	if err := deadletter.CheckSinkOfRun(deadletter.DeadLetter{Sink: deadletter.SinkBigtable}, run); err != nil {
		t.Errorf("bigtable in a Bigtable run: %v", err)
	}
	err = deadletter.CheckSinkOfRun(deadletter.DeadLetter{Sink: deadletter.SinkBigQueryRollups}, run)
	if !errors.Is(err, schemas.ErrMalformed) || !strings.Contains(err.Error(), `"bigquery_rollups"`) {
		t.Errorf("bigquery_rollups in a Bigtable run: %v; want malformed naming it", err)
	}
	if err := deadletter.CheckSinkOfRun(deadletter.DeadLetter{Sink: deadletter.SinkBigQuery}, nil); err != nil {
		t.Errorf("no run sinks given: %v; want any taken", err)
	}
}

func TestParseEnvelope(t *testing.T) {
	tests := []struct {
		name, line string
		wantErr    bool
		payload    string
	}{
		{"a parse dead letter", `{"payload":"{\"a\":1}","reason":"malformed","sink":"parse","error":"x","source":"f","time":"t","line":3}`, false, `{"a":1}`},
		{"unknown fields are ignored", `{"payload":"p","reason":"write_failed","sink":"bigtable","later":{"x":1}}`, false, "p"},
		{"exact bytes", `{"payload":"?","payload_base64":"/w==","reason":"malformed","sink":"parse"}`, false, "\xff"},
		{"not JSON", `not json`, true, ""},
		{"truncated", `{"payload": 42`, true, ""},
		{"wrong type", `{"payload": 42, "reason":"malformed","sink":"parse"}`, true, ""},
		{"no reason", `{"payload":"p","sink":"parse"}`, true, ""},
		{"no sink, a reason that needs none", `{"payload":"p","reason":"malformed"}`, false, "p"},
		{"no sink, bad_timestamp", `{"payload":"p","reason":"bad_timestamp"}`, false, "p"},
		{"no sink, write_failed", `{"payload":"p","reason":"write_failed"}`, true, ""},
		{"a sink that names no sink", `{"payload":"p","reason":"write_failed","sink":"nosuchsink"}`, true, ""},
		{"bad base64", `{"payload":"p","payload_base64":"!!","reason":"malformed","sink":"parse"}`, true, ""},
		{"rollup with a bad hour", `{"payload":"p","reason":"write_failed","sink":"bigquery_rollups","identity":{"sensor_id":"a"},"window_start":"noon"}`, true, ""},
		{"an array", `[]`, true, ""},
		{"null", `null`, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := deadletter.ParseEnvelope([]byte(tt.line))
			if tt.wantErr {
				if !errors.Is(err, schemas.ErrMalformed) {
					t.Errorf("err %v; want one wrapping ErrMalformed", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := d.PayloadBytes(); string(b) != tt.payload {
				t.Errorf("payload %q; want %q", b, tt.payload)
			}
		})
	}
}

func FuzzParseEnvelope(f *testing.F) {
	f.Add([]byte(`{"payload":"p","reason":"malformed","sink":"parse","identity":{"a":"b"},"window_start":"2026-01-01T00:00:00Z"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := deadletter.ParseEnvelope(b)
		if err == nil {
			_ = deadletter.ReplaySource(d)
		}
	})
}

// TestDeadLetterProvenance: a dead letter's place and history come from
// its record's source.
func TestDeadLetterProvenance(t *testing.T) {
	spec, _ := firingsSpec(t)
	now := time.Unix(0, 0)
	first := deadletter.NewDeadLetter(deadletter.SinkParse, "x", deadletter.LineSource("/in/a.jsonl", 7, 120), schemas.ErrBadTimestamp, now)
	offset := deadletter.NewDeadLetter(deadletter.SinkParse, "x", deadletter.LineSource("/in/big.jsonl", 0, 99), schemas.ErrMalformed, now)
	again := deadletter.NewDeadLetter(deadletter.SinkParse, "x", deadletter.ReplaySource(first), schemas.ErrOutOfRange, now)
	twice := deadletter.NewDeadLetter(deadletter.SinkParse, "x", deadletter.ReplaySource(again), schemas.ErrMalformed, now)
	ru := Rollup{Identity: []schemas.Value{{Kind: schemas.KindString, Str: "d-3"}}, StartMs: firingsHour.UnixMilli(), EndMs: firingsHour.Add(time.Hour).UnixMilli()}
	rollup := deadletter.NewDeadLetter(deadletter.SinkBigQueryRollups, "r", RollupSource(spec, &ru), schemas.ErrWriteFailed, now)
	tests := []struct {
		name string
		got  deadletter.DeadLetter
		want string
	}{
		{"a line", first, "/in/a.jsonl 7 0 [] "},
		{"an offset", offset, "/in/big.jsonl 0 99 [] "},
		{"replayed and failed again", again, "/in/a.jsonl 7 0 [bad_timestamp/parse] "},
		{"replayed twice", twice, "/in/a.jsonl 7 0 [bad_timestamp/parse out_of_range/parse] "},
		{"a rollup", rollup, "rollup 0 0 [] d-3@2026-03-01T10:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var prev []string
			for _, p := range tt.got.Previous {
				prev = append(prev, p.Reason+"/"+p.Sink)
			}
			got := tt.got.Source + " " + itoa(tt.got.Line) + " " + itoa(tt.got.Offset) + " [" + strings.Join(prev, " ") + "] "
			if tt.got.WindowStart != "" {
				got += tt.got.Identity["sensor_id"] + "@" + tt.got.WindowStart
			}
			if got != tt.want {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
	// A rollup's dead letter replays as the probe of its sensor-hour.
	key, r, err := deadletter.RebuildProbe(spec, rollup)
	if err != nil || key != "d-3" || r.EventMs != ru.StartMs || !deadletter.IsRebuild(&r) || deadletter.ReplaySinks(&r) != deadletter.SinkSetBigQueryRollups {
		t.Errorf("probe %q %d %v %v", key, r.EventMs, err, deadletter.ReplaySinks(&r))
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestReplaySinksAndFilter(t *testing.T) {
	rec := func(sink, reason string) *schemas.Record {
		return &schemas.Record{Source: deadletter.ReplaySource(deadletter.DeadLetter{Sink: sink, Reason: reason})}
	}
	tests := []struct {
		name string
		r    *schemas.Record
		want deadletter.SinkSet
	}{
		{"not a replay", &schemas.Record{Source: "/in/a.jsonl"}, deadletter.AllSinks},
		{"a parse dead letter", rec(deadletter.SinkParse, "malformed"), deadletter.AllSinks},
		{"bigtable's write failure", rec(deadletter.SinkBigtable, "write_failed"), deadletter.SinkSetBigtable},
		{"bigquery's", rec(deadletter.SinkBigQuery, "write_failed"), deadletter.SinkSetBigQuery},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := deadletter.ReplaySinks(tt.r); got != tt.want {
				t.Errorf("got %b; want %b", got, tt.want)
			}
		})
	}
	f := deadletter.ReplayFilter{Reasons: []string{"write_failed"}, Sinks: []string{deadletter.SinkBigQuery}}
	if !f.Takes(deadletter.DeadLetter{Reason: "write_failed", Sink: deadletter.SinkBigQuery}) || f.Takes(deadletter.DeadLetter{Reason: "write_failed", Sink: deadletter.SinkBigtable}) ||
		f.Takes(deadletter.DeadLetter{Reason: "malformed", Sink: deadletter.SinkBigQuery}) || !(deadletter.ReplayFilter{}).Takes(deadletter.DeadLetter{Reason: "x", Sink: "y"}) {
		t.Error("the filter takes the wrong dead letters")
	}
}

// TestTooLargeDeadLetterNamesItsRecord shows that a too_large record named
// by its length writes its offset even when 0, and that a replay that
// leaves it too_large keeps its place and hash, while one that fails for
// another reason does not.
func TestTooLargeDeadLetterNamesItsRecord(t *testing.T) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	d := deadletter.NewDeadLetter(deadletter.SinkParse, "x", deadletter.LineSource("/in/a.jsonl", 1, 0), schemas.TooLargeInFile(5000, 1024), now)
	d.Offset, d.Length, d.SHA256 = 0, 5000, "ab"
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"offset":0`) || !strings.Contains(string(b), `"length":5000`) {
		t.Errorf("too_large dead letter %s: want offset 0 and length 5000", b)
	}
	if b, _ := json.Marshal(deadletter.NewDeadLetter(deadletter.SinkParse, "x", "/in/a.jsonl", schemas.ErrMalformed, now)); strings.Contains(string(b), `"offset"`) {
		t.Errorf("dead letter without a place %s: want no offset", b)
	}
	var back deadletter.DeadLetter
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	still := deadletter.NewDeadLetter(deadletter.SinkParse, "x", deadletter.ReplaySource(d), schemas.TooLargeInFile(5000, 2048), now)
	if still.Length != 5000 || still.SHA256 != "ab" || still.Line != 1 || still.Source != "/in/a.jsonl" {
		t.Errorf("still too large: %+v; want its place and hash kept", still)
	}
	other := deadletter.NewDeadLetter(deadletter.SinkParse, "x", deadletter.ReplaySource(d), schemas.ErrMalformed, now)
	if other.Length != 0 || other.SHA256 != "" {
		t.Errorf("read back, then malformed: %+v; want no length or hash (its payload is whole)", other)
	}
}
