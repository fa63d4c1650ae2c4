package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/internal/testrig/emulators"
	"github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu"
)

// TestStreamDeviceClockFarAhead: a stream with both stores takes 100
// readings, then one from a device whose clock is 3 days ahead (payload
// and event_ts attribute both), then 100 more from other sensors and one
// of now. The reading ahead is an out_of_range dead letter, counted for
// its sensor. The local reader's watermark stays behind the wall clock:
// the 200 readings (in the hour before this one, which has closed) all
// land in Bigtable and BigQuery, final (their hours' firings write
// BigQuery and the rollups), and the reading of now stays in its open
// hour, provisional, rather than fire at once.
func TestStreamDeviceClockFarAhead(t *testing.T) {
	t.Parallel()
	bt := emulators.StartBigtable(t) // skips under -short
	ps := sharedPubSub.HostPort(t)
	bq := bqemu.StartServerForTest(t)
	env := append(bqEnv(bt, bq), "PUBSUB_EMULATOR_HOST="+ps)
	f := newPubSub(t, ps, "clockahead")

	start := time.Now().UTC()
	prev := start.Truncate(time.Hour).Add(-time.Hour)
	// group is 10 sensors' 10 readings each, a minute apart, from offset
	// into the hour before this one.
	group := func(prefix string, offset time.Duration) []streamMsg {
		var msgs []streamMsg
		for s := 0; s < 10; s++ {
			for i := 0; i < 10; i++ {
				ts := prev.Add(offset + time.Duration(i)*time.Minute + time.Duration(s)*time.Second).UnixMilli()
				msgs = append(msgs, msg(line(fmt.Sprintf("%s-%d", prefix, s), ts, 60+i), ts))
			}
		}
		return msgs
	}
	before, after := group("before", 0), group("after", 20*time.Minute)
	sensorsIn := func(got map[string]string, prefix string) int {
		n := 0
		for _, v := range got {
			if strings.HasPrefix(v, prefix) {
				n++
			}
		}
		return n
	}

	dl := t.TempDir()
	summary := filepath.Join(t.TempDir(), "summary.json")
	job := startStream(t, env, streamArgs(f.sub, "ahead_vitals", dl, "--bigquery_dataset=ahead", "--summary_json="+summary)...)

	f.publish(t, before...)
	eventually(t, 90*time.Second, job, func() (bool, string) {
		n := sensorsIn(bqReadings(t, bq, "ahead"), "before-")
		return n == len(before), fmt.Sprintf("%d of the first %d readings in BigQuery", n, len(before))
	})

	ahead := time.Now().Add(72 * time.Hour).UnixMilli()
	f.publish(t, msg(line("fast-1", ahead, 70), ahead))
	eventually(t, 60*time.Second, job, func() (bool, string) {
		for _, d := range deadLetters(t, dl) {
			if strings.Contains(d["payload"], `"fast-1"`) {
				ok := d["reason"] == "out_of_range" && strings.Contains(d["error"], "ahead of the wall clock") && strings.Contains(d["error"], "max_future 1h0m0s")
				return ok, fmt.Sprintf("the reading ahead dead-lettered as %s: %s; want out_of_range, the clock ahead", d["reason"], d["error"])
			}
		}
		return false, "the reading 3 days ahead dead-lettered"
	})

	now := time.Now().UnixMilli()
	f.publish(t, append(after, msg(line("now-1", now, 75), now))...)
	eventually(t, 90*time.Second, job, func() (bool, string) {
		got := bqReadings(t, bq, "ahead")
		nb, na := sensorsIn(got, "before-"), sensorsIn(got, "after-")
		return nb == len(before) && na == len(after), fmt.Sprintf("BigQuery holds %d of %d readings before the reading ahead, %d of %d after", nb, len(before), na, len(after))
	})
	eventually(t, 60*time.Second, job, func() (bool, string) {
		hourly := bqHourly(t, bq, "ahead")
		full := 0
		for k, v := range hourly {
			if (strings.HasPrefix(k, "before-") || strings.HasPrefix(k, "after-")) && strings.HasPrefix(v, "count=10 ") {
				full++
			}
		}
		return full == 20, fmt.Sprintf("%d of 20 sensor-hours with a final rollup of 10 readings: %v", full, hourly)
	})
	eventually(t, 60*time.Second, job, func() (bool, string) {
		cells := dump(t, bt, "ahead_vitals")
		n, fast, cur := 0, 0, 0
		for _, c := range cells {
			switch {
			case !strings.Contains(c, " vitals:body_temperature@"):
			case strings.HasPrefix(c, "before-"), strings.HasPrefix(c, "after-"):
				n++
			case strings.HasPrefix(c, "fast-"):
				fast++
			case strings.HasPrefix(c, "now-1#"):
				cur++
			}
		}
		return n == 200 && fast == 0 && cur == 1, fmt.Sprintf("Bigtable holds %d of 200 readings, %d of the reading ahead (want 0), %d of the reading of now (want 1)", n, fast, cur)
	})
	// Its hour has not ended (unless the test crossed the hour): no final
	// firing, so not in BigQuery. A watermark past the wall clock would
	// have fired it.
	sameHour := time.Now().UTC().Truncate(time.Hour).Equal(time.UnixMilli(now).UTC().Truncate(time.Hour))
	if sameHour && sensorsIn(bqReadings(t, bq, "ahead"), "now-1") > 0 {
		t.Errorf("the reading of now is in BigQuery: its hour fired before it ended")
	}

	if code := job.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM: exit %d; want 0\nstderr:\n%s", code, job.stderr.String())
	}
	l := readSummary(t, summary)
	wantOpen := int64(1)
	if !sameHour || !time.Now().UTC().Truncate(time.Hour).Equal(time.UnixMilli(now).UTC().Truncate(time.Hour)) {
		wantOpen = l.Unfired // the hour of now ended during the test
	}
	if !l.Balanced || l.Read != 202 || l.Readings != 200 || l.Rejected != 1 || l.Unfired != wantOpen {
		t.Errorf("ledger: balanced %v, read %d, final %d, rejected %d, in open hours %d; want balanced, 202, 200, 1, %d\nproblems: %v",
			l.Balanced, l.Read, l.Readings, l.Rejected, l.Unfired, wantOpen, l.Problems)
	}
	if l.ClockAhead["fast-1"] != 1 || len(l.ClockAhead) != 1 {
		t.Errorf("clock ahead per sensor %v; want fast-1: 1", l.ClockAhead)
	}
	if got := l.DeadLetters["parse"]["out_of_range"]; got != 1 {
		t.Errorf("out_of_range dead letters %d; want 1 (%v)", got, l.DeadLetters)
	}
}
