package deadletterio

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

// keptLines is a dead-letter store that keeps what it is given.
type keptLines struct{ lines [][]byte }

func (k *keptLines) add(_ context.Context, _ deadletter.DeadLetter, line []byte) error {
	k.lines = append(k.lines, line)
	return nil
}
func (k *keptLines) flush(context.Context) error { return nil }
func (k *keptLines) reset()                      {}
func (k *keptLines) close() error                { return nil }

// TestDeadLettersFitTheirTarget: a folder takes a whole 9 MB message; a
// topic and a table take a dead letter whole up to their limit, and cut a
// larger one's payload to its first bytes, saying so in its error; the
// launcher's warning names what each cannot hold.
func TestDeadLettersFitTheirTarget(t *testing.T) {
	small := strings.Repeat("s", 10<<10)
	text := strings.Repeat("t", 9<<20)
	binary := string(bytes.Repeat([]byte{0xff, 'x'}, 4<<20))
	tests := []struct {
		target  targets.DeadLetterTarget
		payload string
		whole   bool
	}{
		{targets.DeadLetterTarget{Kind: targets.DeadLetterFiles, Path: "/dl"}, text, true},
		{targets.DeadLetterTarget{Kind: targets.DeadLetterFiles, Path: "/dl"}, binary, true},
		{targets.DeadLetterTarget{Kind: targets.DeadLetterPubSub, Topic: "projects/p/topics/dead"}, text, true},
		{targets.DeadLetterTarget{Kind: targets.DeadLetterPubSub, Topic: "projects/p/topics/dead"}, binary, false},
		{targets.DeadLetterTarget{Kind: targets.DeadLetterBigQuery, Dataset: "d", Table: "t"}, small, true},
		{targets.DeadLetterTarget{Kind: targets.DeadLetterBigQuery, Dataset: "d", Table: "t"}, text, false},
	}
	for _, tt := range tests {
		name := tt.target.String() + "/" + map[bool]string{true: "whole", false: "cut"}[tt.whole]
		t.Run(name, func(t *testing.T) {
			store := &keptLines{}
			f := &writeFn{Target: tt.target, sink: store}
			d := deadletter.NewDeadLetter(deadletter.SinkParse, tt.payload, "projects/p/subscriptions/s", schemas.ErrMalformed, time.Now())
			if err := f.ProcessElement(context.Background(), d); err != nil {
				t.Fatal(err)
			}
			var got deadletter.DeadLetter
			if err := json.Unmarshal(store.lines[0], &got); err != nil {
				t.Fatal(err)
			}
			b, err := got.PayloadBytes()
			if err != nil {
				t.Fatal(err)
			}
			if max, _ := maxLine(tt.target.Kind); max > 0 && len(store.lines[0]) > max {
				t.Errorf("a dead letter of %d bytes; the target holds %d", len(store.lines[0]), max)
			}
			if tt.whole {
				if string(b) != tt.payload || got.Error != d.Error {
					t.Errorf("payload of %d bytes (error %q); want the whole %d", len(b), got.Error, len(tt.payload))
				}
				return
			}
			if string(b) != tt.payload[:schemas.TooLargePrefix] || !strings.Contains(got.Error, "the payload kept is its first 1024 of") {
				t.Errorf("payload of %d bytes, error %q; want its first %d and the error saying so", len(b), got.Error, schemas.TooLargePrefix)
			}
			if w := Limits(tt.target); !strings.Contains(w, "folder or gs://") {
				t.Errorf("Limits(%s) = %q; want it to say where whole dead letters go", tt.target, w)
			}
		})
	}
	if w := Limits(targets.DeadLetterTarget{Kind: targets.DeadLetterFiles, Path: "gs://b/dl"}); w != "" {
		t.Errorf("a gs:// prefix holds every dead letter whole; Limits says %q", w)
	}
}
