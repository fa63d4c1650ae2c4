package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
)

// envelopes reads the dead letters of dir as the replay reads them
// (deadletter.ParseEnvelope).
func envelopes(t *testing.T, dir string) []deadletter.DeadLetter {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	var out []deadletter.DeadLetter
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			d, err := deadletter.ParseEnvelope(sc.Bytes())
			if err != nil {
				t.Fatalf("dead letter %s: %v", f, err)
			}
			out = append(out, d)
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("dead letters %s: %v", f, err)
		}
	}
	return out
}

// TestStreamOfLargeAndCompressedMessages: one NDJSON message of 60,000
// readings (about 8 MB), a JSON array of 20,000 (about 2.5 MB) and a
// gzipped NDJSON message of 5,000 land whole; a reading over
// --max_line_bytes is dead-lettered alone and whole, beside readings that
// land; a binary message (with 0x0A bytes in it) is one malformed dead
// letter holding its exact bytes, which a --format=deadletter replay reads
// back byte for byte, and which lands the too-large reading given a larger
// --max_line_bytes.
func TestStreamOfLargeAndCompressedMessages(t *testing.T) {
	t.Parallel()
	cpuHeavy(t)
	bt := emulators.StartBigtable(t) // skips under -short
	ps := sharedPubSub.HostPort(t)
	env := []string{"BIGTABLE_EMULATOR_HOST=" + bt, "PUBSUB_EMULATOR_HOST=" + ps}

	h := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
	// readings are n readings of n/100 sensors named prefix-ward-07-bed-NNN,
	// 100 each, 30 s apart in the hour h.
	readings := func(prefix string, n int) []string {
		out := make([]string, 0, n)
		for s := 0; s < n/100; s++ {
			for i := 0; i < 100; i++ {
				out = append(out, line(fmt.Sprintf("%s-ward-07-bed-%03d", prefix, s), h.Add(time.Duration(i)*30*time.Second).UnixMilli(), 60+i%40))
			}
		}
		return out
	}
	ndjson := []byte(strings.Join(readings("nd", 60000), "\n") + "\n")
	array := []byte("[" + strings.Join(readings("ar", 20000), ",") + "]")
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	if _, err := zw.Write([]byte(strings.Join(readings("gz", 5000), "\n"))); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if len(ndjson) < 7_500_000 || len(ndjson) > codec.MaxPubSubMessageBytes || len(array) < 2<<20 {
		t.Fatalf("messages of %d and %d bytes; want about 8 MB and several MB", len(ndjson), len(array))
	}
	tooLarge := strings.Replace(line("tl-1", h.UnixMilli(), 70), "{", `{"note":"`+strings.Repeat("n", 3<<19)+`",`, 1)
	withTooLarge := []byte(line("tl-0", h.UnixMilli(), 70) + "\n" + tooLarge + "\n" + line("tl-2", h.UnixMilli(), 70) + "\n")
	binary := make([]byte, 4096)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range binary {
		binary[i] = byte(rng.IntN(256))
	}
	binary[10], binary[100] = 0x0a, 0xff // a line break and a byte no UTF-8 has
	const landing = 60000 + 20000 + 5000 + 2

	f := newPubSub(t, ps, "large")
	at := map[string]string{"event_ts": strconv.FormatInt(h.UnixMilli(), 10)}
	var msgs []*pubsub.Message
	for _, data := range [][]byte{ndjson, array, zipped.Bytes(), withTooLarge, binary} {
		msgs = append(msgs, &pubsub.Message{Data: data, Attributes: at})
	}
	publishRaw(t, f, msgs...)

	dl := t.TempDir()
	sum := filepath.Join(t.TempDir(), "summary.json")
	job := startStream(t, env, streamArgs(f.sub, "large", dl, "--summary_json="+sum)...)
	eventually(t, 300*time.Second, job, func() (bool, string) {
		n := landed(dump(t, bt, "large"))
		return n == landing, fmt.Sprintf("%d of %d readings in Bigtable", n, landing)
	})
	eventually(t, 60*time.Second, job, func() (bool, string) {
		got := reasons(t, dl)
		want := map[string]int{"malformed": 1, "too_large": 1}
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("dead letters by reason %v; want %v", got, want)
	})
	if code := job.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM: exit %d\n%s", code, job.stderr.String())
	}
	l := readSummary(t, sum)
	if l.Messages != int64(len(msgs)) || l.Read != landing+2 || !l.Balanced {
		t.Errorf("ledger: %d messages, %d records read, balanced %v (%v); want %d messages, %d records, balanced",
			l.Messages, l.Read, l.Balanced, l.Problems, len(msgs), landing+2)
	}
	for _, d := range envelopes(t, dl) {
		b, err := d.PayloadBytes()
		if err != nil {
			t.Fatal(err)
		}
		switch d.Reason {
		case "malformed":
			if !bytes.Equal(b, binary) || !strings.Contains(d.Error, "not valid UTF-8") {
				t.Errorf("the binary message's dead letter holds %d bytes (equal: %v), error %q; want its exact %d bytes and why",
					len(b), bytes.Equal(b, binary), d.Error, len(binary))
			}
		case "too_large":
			if string(b) != tooLarge {
				t.Errorf("the too-large reading's dead letter holds %d bytes; want the whole reading's %d", len(b), len(tooLarge))
			}
		}
	}

	// The replay: the too-large reading lands with a larger
	// --max_line_bytes; the binary message is dead-lettered again, byte for
	// byte.
	replayDL := t.TempDir()
	r := runLauncher(t, env, "--source=files", "--input="+dl+"/*.jsonl", "--format=deadletter", "--max_line_bytes=4194304",
		"--bigtable_project=p", "--bigtable_instance=i", "--bigtable_table=large_replayed", "--dead_letter="+replayDL)
	if r.code != 0 {
		t.Fatalf("replay: exit %d\n%s", r.code, r.stderr)
	}
	if n := landed(dump(t, bt, "large_replayed")); n != 1 {
		t.Errorf("the replay landed %d readings; want the too-large one", n)
	}
	again := envelopes(t, replayDL)
	if len(again) != 1 {
		t.Fatalf("the replay dead-lettered %d records; want the binary message", len(again))
	}
	if b, err := again[0].PayloadBytes(); err != nil || !bytes.Equal(b, binary) || again[0].Reason != "malformed" {
		t.Errorf("the replayed binary message: %s, %d bytes (equal: %v), %v; want malformed, its exact bytes", again[0].Reason, len(b), bytes.Equal(b, binary), err)
	}
}
