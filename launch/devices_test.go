package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
)

// siteSpec writes the vitals spec with a field site filled from the
// message attribute site, stored in Bigtable (meta:site) and BigQuery.
func siteSpec(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../schemas/specs/vitals.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, r := range [][2]string{
		{"  - {name: battery_level, type: float, required: true, min: 0, max: 100}\n", "  - {name: battery_level, type: float, required: true, min: 0, max: 100}\n  - {name: site, type: string, attribute: site}\n"},
		{"            - {qualifier: battery_level, value: battery_level}\n", "            - {qualifier: battery_level, value: battery_level}\n            - {qualifier: site, value: site}\n"},
		{"    - {name: battery_level, type: FLOAT64, value: battery_level}\n", "    - {name: battery_level, type: FLOAT64, value: battery_level}\n    - {name: site, type: STRING, value: site}\n"},
	} {
		if !strings.Contains(s, r[0]) {
			t.Fatalf("vitals.yaml has no %q", r[0])
		}
		s = strings.Replace(s, r[0], r[1], 1)
	}
	path := filepath.Join(t.TempDir(), "vitals_site.yaml")
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// withoutSite drops the meta:site cells of a table dump.
func withoutSite(cells []string) []string {
	var out []string
	for _, c := range cells {
		if !strings.Contains(c, "meta:site@") {
			out = append(out, c)
		}
	}
	return out
}

// TestDeviceTimesAndSpecsBeforeTheJob: numbers that are no time in the
// declared unit are dead-lettered with the hint and land in neither store;
// a payload key the spec does not read is counted; a column that cannot
// hold its field's type is refused before the job starts.
func TestDeviceTimesAndSpecsBeforeTheJob(t *testing.T) {
	t.Parallel()
	bt := emulators.StartBigtable(t) // skips under -short
	bq := bqemu.StartServerForTest(t)
	env := bqEnv(bt, bq)

	t.Run("epoch seconds, 0 and 86400: bad_timestamp with the hint, in neither store", func(t *testing.T) {
		h := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
		in := t.TempDir()
		lines := []string{
			line("ok-1", h.UnixMilli(), 70),
			strings.Replace(line("ok-2", h.Add(time.Minute).UnixMilli(), 71), "{", `{"firmware_version":"2.1",`, 1),
			line("sec", h.Unix(), 72),
			line("zero", 0, 73),
			line("day", 86400, 74),
		}
		if err := os.WriteFile(filepath.Join(in, "a.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		dl := t.TempDir()
		sum := filepath.Join(t.TempDir(), "summary.json")
		r := runLauncher(t, env, "--source=files", "--input="+in+"/*", "--bigtable_project=p", "--bigtable_instance=i",
			"--bigtable_table=units", "--bigquery_dataset=units", "--dead_letter="+dl, "--summary_json="+sum)
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		hints := map[string]string{}
		for _, d := range deadLetters(t, dl) {
			if d["reason"] != "bad_timestamp" {
				t.Errorf("dead letter %v; want reason bad_timestamp", d)
			}
			hints[strings.SplitN(strings.SplitN(d["payload"], `"sensor_id":"`, 2)[1], `"`, 2)[0]] = d["error"]
		}
		for sensor, want := range map[string]string{"sec": "set `unit: s` on field timestamp", "zero": "check the device's clock", "day": "check the device's clock"} {
			if !strings.Contains(hints[sensor], want) || !strings.Contains(hints[sensor], "BigQuery") {
				t.Errorf("dead letter of %s says %q; want the limit (BigQuery's window) and %q", sensor, hints[sensor], want)
			}
		}
		for _, c := range dump(t, bt, "units") {
			if !strings.HasPrefix(c, "ok-") {
				t.Errorf("Bigtable has %s", c)
			}
		}
		got := bqReadings(t, bq, "units")
		if len(got) != 2 {
			t.Errorf("BigQuery has %d readings; want the 2 good ones: %v", len(got), got)
		}
		for _, v := range got {
			if !strings.HasPrefix(v, "ok-") {
				t.Errorf("BigQuery has %s", v)
			}
		}
		l := readSummary(t, sum)
		if l.FieldsNotInSpec["firmware_version"] != 1 || !l.Balanced {
			t.Errorf("ledger: fields not in the spec %v (want firmware_version 1), balanced %v", l.FieldsNotInSpec, l.Balanced)
		}
		if !strings.Contains(r.stdout, "fields not in the spec:  firmware_version 1") {
			t.Errorf("summary does not count the undeclared field:\n%s", r.stdout)
		}

		// A spec that no longer writes battery_level: one warning line.
		spec := filepath.Join(t.TempDir(), "v.yaml")
		old := "    - {name: battery_level, type: FLOAT64, value: battery_level}\n"
		if b := string(mustRead(t, "../schemas/specs/vitals.yaml")); !strings.Contains(b, old) {
			t.Fatalf("vitals.yaml has no %q", old)
		} else if err := os.WriteFile(spec, []byte(strings.Replace(b, old, "", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		r = runLauncher(t, env, "--spec="+spec, "--source=files", "--input="+in+"/*", "--bigtable_project=p", "--bigtable_instance=i",
			"--bigtable_table=units", "--bigquery_dataset=units", "--dead_letter="+t.TempDir())
		if r.code != 0 {
			t.Fatalf("rerun without battery_level: exit %d\n%s", r.code, r.stderr)
		}
		if n := strings.Count(r.stderr, "has column battery_level, which the spec no longer writes: rows this run writes or rewrites will have it NULL"); n != 1 {
			t.Errorf("%d warnings about battery_level; want one line:\n%s", n, r.stderr)
		}
	})

	t.Run("a float field into an INT64 column is refused before the job", func(t *testing.T) {
		b, err := os.ReadFile("../schemas/specs/vitals.yaml")
		if err != nil {
			t.Fatal(err)
		}
		spec := filepath.Join(t.TempDir(), "v.yaml")
		s := strings.Replace(string(b), "{name: heart_rate, type: FLOAT64, value: heart_rate}", "{name: heart_rate, type: INT64, value: heart_rate}", 1)
		if err := os.WriteFile(spec, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runLauncher(t, env, "--spec="+spec, "--source=files", "--input="+writeInput(t)+"/*", "--bigtable_project=p", "--bigtable_instance=i",
			"--bigtable_table=refused", "--bigquery_dataset=refused", "--dead_letter="+t.TempDir())
		if r.code != 2 {
			t.Fatalf("exit %d; want 2 (usage)\n%s", r.code, r.stderr)
		}
		for _, w := range []string{"bigquery.columns[2].type", "column heart_rate is INT64", "is a float", "FLOAT64"} {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("stderr does not say %q:\n%s", w, r.stderr)
			}
		}
		if n := len(dump(t, bt, "refused")); n != 0 {
			t.Errorf("the refused run wrote %d cells", n)
		}
	})
}

// TestStreamOfBatchedMessages: the same readings sent as NDJSON messages
// of 10 and JSON arrays, with the attribute site mapped to a field, land as
// the batch of them does, and as they do one reading a message; so do they
// as protobuf batches. The
// timestamp attribute's disagreements, absence and garbage are counted.
func TestStreamOfBatchedMessages(t *testing.T) {
	t.Parallel()
	bt := emulators.StartBigtable(t) // skips under -short
	ps := sharedPubSub.HostPort(t)
	bq := bqemu.StartServerForTest(t)
	env := append(bqEnv(bt, bq), "PUBSUB_EMULATOR_HOST="+ps)
	spec := siteSpec(t)

	h := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	ms := func(d time.Duration) int64 { return h.Add(d).UnixMilli() }
	type reading struct {
		payload string
		ms      int64
		good    bool
	}
	var rs []reading
	add := func(p string, at int64, good bool) { rs = append(rs, reading{p, at, good}) }
	add(`not json`, 0, false)
	add(line("p-5", ms(0), 999), ms(0), false) // out_of_range
	add(line("p-6", h.Unix(), 70), 0, false)   // epoch seconds: bad_timestamp
	add(line("p-1", ms(0), nil), ms(0), true)  // imputed
	add(line("p-1", ms(30*time.Minute+500*time.Millisecond), 70), ms(30*time.Minute+500*time.Millisecond), true)
	add(line("p-1", ms(time.Hour-time.Millisecond), nil), ms(time.Hour-time.Millisecond), true)
	add(line("p-1", ms(30*time.Minute+500*time.Millisecond), 70), ms(30*time.Minute+500*time.Millisecond), true) // duplicate
	add(strings.Replace(line("p-2", ms(time.Hour), nil), "{", `{"firmware_version":"2.1",`, 1), ms(time.Hour), true)
	for i := 0; i < 22; i++ {
		d := time.Hour + 40*time.Minute + time.Duration(i)*time.Second
		var hr any = 60 + i
		if i%3 == 0 {
			hr = nil
		}
		p := line("p-4", ms(d), hr)
		if i == 5 {
			p = strings.Replace(p, "{", `{"firmware_version":"2.2",`, 1)
		}
		add(p, ms(d), true)
	}

	// The batch of the same lines.
	in := t.TempDir()
	var all []string
	for _, r := range rs {
		all = append(all, r.payload)
	}
	if err := os.WriteFile(filepath.Join(in, "a.jsonl"), []byte(strings.Join(all, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	batchDL := t.TempDir()
	r := runLauncher(t, env, "--spec="+spec, "--source=files", "--input="+in+"/*", "--bigtable_project=p", "--bigtable_instance=i",
		"--bigtable_table=batch_site", "--bigquery_dataset=batch_site", "--dead_letter="+batchDL)
	if r.code != 0 {
		t.Fatalf("batch: exit %d\n%s", r.code, r.stderr)
	}
	want := strings.Join(withoutSite(dump(t, bt, "batch_site")), "\n")
	wantBQ := bqReadings(t, bq, "batch_site")
	wantDL := reasons(t, batchDL)
	if len(wantBQ) != 26 || fmt.Sprint(wantDL) != fmt.Sprint(map[string]int{"bad_timestamp": 1, "malformed": 1, "out_of_range": 1}) {
		t.Fatalf("batch: %d BigQuery readings (want 26), dead letters %v", len(wantBQ), wantDL)
	}

	// Messages: two NDJSON messages of 10 lines (the bad ones among them),
	// then JSON arrays of 5. event_ts is a message's earliest reading.
	const tolerance = 10 * time.Minute
	var msgs []*pubsub.Message
	var groups [][]reading
	disagree := 0
	cut := func(from, to int, array bool) {
		g := rs[from:min(to, len(rs))]
		var parts []string
		first := int64(-1)
		for _, r := range g {
			parts = append(parts, r.payload)
			if r.good && (first < 0 || r.ms < first) {
				first = r.ms
			}
		}
		for _, r := range g {
			if r.good && time.Duration(r.ms-first)*time.Millisecond > tolerance {
				disagree++
			}
		}
		data := strings.Join(parts, "\n")
		if array {
			data = "[" + strings.Join(parts, ",") + "]"
		}
		msgs = append(msgs, &pubsub.Message{Data: []byte(data), Attributes: map[string]string{"event_ts": strconv.FormatInt(first, 10), "site": "ward-3"}})
		groups = append(groups, g)
	}
	cut(0, 10, false)
	cut(10, 20, false)
	for i := 20; i < len(rs); i += 5 {
		cut(i, i+5, true)
	}

	f := newPubSub(t, ps, "batched")
	publishRaw(t, f, msgs...)
	dl := t.TempDir()
	sum := filepath.Join(t.TempDir(), "summary.json")
	job := startStream(t, env, streamArgs(f.sub, "stream_site", dl, "--spec="+spec, "--allowed_lateness=6h", "--bigquery_dataset=stream_site", "--summary_json="+sum)...)
	eventually(t, 120*time.Second, job, func() (bool, string) {
		got := strings.Join(withoutSite(dump(t, bt, "stream_site")), "\n")
		return got == want, fmt.Sprintf("stream table (without meta:site) equal to the batch table\n got:\n%s\nwant:\n%s", got, want)
	})
	eventually(t, 60*time.Second, job, func() (bool, string) {
		got := bqReadings(t, bq, "stream_site")
		return fmt.Sprint(got) == fmt.Sprint(wantBQ), fmt.Sprintf("stream BigQuery rows equal to the batch's\n got: %v\nwant: %v", got, wantBQ)
	})
	eventually(t, 30*time.Second, job, func() (bool, string) {
		got := reasons(t, dl)
		return fmt.Sprint(got) == fmt.Sprint(wantDL), fmt.Sprintf("dead letters by reason %v; want the batch's %v", got, wantDL)
	})
	// The table as the batched messages left it, site cells included.
	batched := strings.Join(dump(t, bt, "stream_site"), "\n")
	// The attribute site landed in both stores, for every reading.
	sites := 0
	for _, c := range dump(t, bt, "stream_site") {
		if strings.Contains(c, "meta:site@") {
			if !strings.HasSuffix(c, "=ward-3") {
				t.Errorf("site cell %s; want ward-3", c)
			}
			sites++
		}
	}
	if sites != 26 {
		t.Errorf("%d meta:site cells in Bigtable; want one per distinct reading (26)", sites)
	}
	bqSites, _ := bqLatest(t, bq, "stream_site", "readings", "ingested_at",
		func(row map[string]bigquery.Value) string { id, _ := row["reading_id"].(string); return id },
		func(row map[string]bigquery.Value) string { return fmt.Sprint(row["site"]) })
	for id, s := range bqSites {
		if s != "ward-3" {
			t.Errorf("BigQuery reading %s has site %q; want ward-3", id, s)
		}
	}
	if len(bqSites) != 26 {
		t.Errorf("BigQuery has %d readings with a site; want 26", len(bqSites))
	}

	// The timestamp attribute: 90 minutes off, missing, unparseable.
	cur := time.Now().Add(-90 * time.Minute)
	publishRaw(t, f,
		&pubsub.Message{Data: []byte(line("t-off", cur.UnixMilli(), 70)), Attributes: map[string]string{"event_ts": strconv.FormatInt(cur.Add(90*time.Minute).UnixMilli(), 10)}},
		&pubsub.Message{Data: []byte(line("t-missing", cur.UnixMilli()+1, 70)), Attributes: map[string]string{"site": "ward-3"}},
		&pubsub.Message{Data: []byte(line("t-garbage", cur.UnixMilli()+2, 70)), Attributes: map[string]string{"event_ts": "yesterday"}})
	eventually(t, 60*time.Second, job, func() (bool, string) {
		n := 0
		for _, c := range dump(t, bt, "stream_site") {
			if strings.HasPrefix(c, "t-") && strings.Contains(c, "vitals:heart_rate@") {
				n++
			}
		}
		return n == 3, fmt.Sprintf("%d of the 3 attribute-test readings in Bigtable", n)
	})
	if code := job.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM: exit %d\n%s", code, job.stderr.String())
	}
	l := readSummary(t, sum)
	if l.Messages != int64(len(msgs)+3) {
		t.Errorf("ledger: %d messages; want %d", l.Messages, len(msgs)+3)
	}
	if l.Read != int64(len(rs)+3) {
		t.Errorf("ledger: %d records read; want %d (one a reading)", l.Read, len(rs)+3)
	}
	ta := l.TimestampAttribute
	if ta == nil || ta.Missing != 1 || ta.Unparseable != 1 || ta.Disagrees != int64(disagree+1) {
		t.Errorf("ledger: timestamp attribute %+v; want missing 1, unparseable 1, disagrees %d", ta, disagree+1)
	}
	if l.FieldsNotInSpec["firmware_version"] != 2 {
		t.Errorf("ledger: fields not in the spec %v; want firmware_version 2", l.FieldsNotInSpec)
	}
	if !l.Balanced {
		t.Errorf("ledger does not balance: %v", l.Problems)
	}
	// Logged once a worker, with its first example (one of the batched
	// messages').
	if n := strings.Count(job.stderr.String(), "from the reading's event time"); n < 1 || disagree == 0 {
		t.Errorf("the disagreement is logged %d times (want once a worker, with its example; %d batched readings disagree):\n%s", n, disagree, job.stderr.String())
	}

	t.Run("the same readings one a message land as the batched messages did", func(t *testing.T) {
		t.Parallel()
		var single []*pubsub.Message
		for _, r := range rs {
			at := r.ms
			if !r.good {
				at = time.Now().UnixMilli()
			}
			single = append(single, &pubsub.Message{Data: []byte(r.payload), Attributes: map[string]string{"event_ts": strconv.FormatInt(at, 10), "site": "ward-3"}})
		}
		sf := newPubSub(t, ps, "single")
		publishRaw(t, sf, single...)
		sdl := t.TempDir()
		job := startStream(t, env, streamArgs(sf.sub, "stream_single", sdl, "--spec="+spec, "--allowed_lateness=6h", "--bigquery_dataset=stream_single")...)
		eventually(t, 120*time.Second, job, func() (bool, string) {
			got := strings.Join(dump(t, bt, "stream_single"), "\n")
			return got == batched, fmt.Sprintf("one-a-message table equal to the batched messages' (site cells included)\n got:\n%s\nwant:\n%s", got, batched)
		})
		eventually(t, 60*time.Second, job, func() (bool, string) {
			got := bqReadings(t, bq, "stream_single")
			return fmt.Sprint(got) == fmt.Sprint(wantBQ), fmt.Sprintf("one-a-message BigQuery rows equal to the batch's\n got: %v\nwant: %v", got, wantBQ)
		})
		eventually(t, 30*time.Second, job, func() (bool, string) {
			got := reasons(t, sdl)
			return fmt.Sprint(got) == fmt.Sprint(wantDL), fmt.Sprintf("dead letters by reason %v; want %v", got, wantDL)
		})
		if code := job.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("SIGTERM: exit %d\n%s", code, job.stderr.String())
		}
	})

	t.Run("a proto stream of batched messages lands like the JSON one", func(t *testing.T) {
		t.Parallel()
		s, err := schemas.ParseSpec(spec, mustRead(t, spec))
		if err != nil {
			t.Fatal(err)
		}
		pc, err := codec.NewProtoCodec(s)
		if err != nil {
			t.Fatal(err)
		}
		var good []reading
		for _, r := range rs {
			if r.good {
				good = append(good, r)
			}
		}
		var pmsgs []*pubsub.Message
		for i := 0; i < len(good); i += 10 {
			var data []byte
			for _, r := range good[i:min(i+10, len(good))] {
				b, err := pc.AppendProto(nil, []byte(r.payload))
				if err != nil {
					t.Fatal(err)
				}
				data = protowire.AppendTag(data, protowire.Number(s.Proto.Batch.Number), protowire.BytesType)
				data = protowire.AppendBytes(data, b)
			}
			pmsgs = append(pmsgs, &pubsub.Message{Data: data, Attributes: map[string]string{"event_ts": strconv.FormatInt(good[i].ms, 10), "site": "ward-3"}})
		}
		pf := newPubSub(t, ps, "batched_proto")
		publishRaw(t, pf, pmsgs...)
		pdl := t.TempDir()
		job := startStream(t, env, streamArgs(pf.sub, "stream_proto", pdl, "--spec="+spec, "--format=proto", "--allowed_lateness=6h", "--bigquery_dataset=stream_proto")...)
		eventually(t, 120*time.Second, job, func() (bool, string) {
			got := strings.Join(withoutSite(dump(t, bt, "stream_proto")), "\n")
			return got == want, fmt.Sprintf("proto stream table equal to the batch table\n got:\n%s\nwant:\n%s", got, want)
		})
		eventually(t, 60*time.Second, job, func() (bool, string) {
			got := bqReadings(t, bq, "stream_proto")
			return fmt.Sprint(got) == fmt.Sprint(wantBQ), fmt.Sprintf("proto stream BigQuery rows equal to the batch's\n got: %v\nwant: %v", got, wantBQ)
		})
		if code := job.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("SIGTERM: exit %d\n%s", code, job.stderr.String())
		}
		if got := reasons(t, pdl); len(got) != 0 {
			t.Errorf("proto stream dead letters %v; want none", got)
		}
	})
}

// publishRaw publishes messages as they are and waits for each to be
// acknowledged by the emulator.
func publishRaw(t *testing.T, f *pubsubFixture, msgs ...*pubsub.Message) {
	t.Helper()
	ctx := context.Background()
	var results []*pubsub.PublishResult
	for _, m := range msgs {
		results = append(results, f.pub.Publish(ctx, m))
	}
	for _, r := range results {
		if _, err := r.Get(ctx); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
