package ledger

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// batch is the counters of a balanced batch: 10 records, 7 distinct
// readings, 1 duplicate, 2 rejected; Bigtable wrote 6 and dead-lettered 1;
// BigQuery wrote 7; one rollup row.
func batch() Counters {
	r, rr := hours.OriginReading, hours.OriginRollup
	return Counters{
		InputRecords:  10,
		InputRejected: 2,
		Readings:      7,
		Duplicates:    1,
		SinkKey(deadletter.SinkBigtable, "t", r, Routed):                    7,
		SinkKey(deadletter.SinkBigtable, "t", r, Written):                   6,
		SinkKey(deadletter.SinkBigtable, "t", r, Failed):                    1,
		RowsKey(deadletter.SinkBigtable, "t"):                               2,
		SinkKey(deadletter.SinkBigQuery, "q", r, Routed):                    7,
		SinkKey(deadletter.SinkBigQuery, "q", r, Written):                   7,
		SinkKey(deadletter.SinkBigQueryRollups, "h", rr, Routed):            1,
		SinkKey(deadletter.SinkBigQueryRollups, "h", rr, Written):           1,
		DeadLetterKey(deadletter.SinkParse, "malformed"):                    2,
		DeadLetterKey(deadletter.SinkBigtable, "write_failed"):              1,
		SinkKey(deadletter.SinkBigtable, "t", hours.OriginRewrite, Written): 0,
	}
}

func with(c Counters, k Key, n int64) Counters {
	out := Counters{}
	for key, v := range c {
		out[key] = v
	}
	out[k] = n
	return out
}

func TestLedgerBalances(t *testing.T) {
	r := hours.OriginReading
	for _, tc := range []struct {
		name    string
		c       Counters
		stream  bool
		problem string // "" when it must balance
	}{
		{"a balanced batch", batch(), false, ""},
		{"a reading lost before the grouping", with(batch(), InputRecords, 11), false, "records read 11 != distinct readings 7 + merged duplicates 1 + rejected 2 (off by 1)"},
		{"a write neither acknowledged nor dead-lettered", with(batch(), SinkKey(deadletter.SinkBigtable, "t", r, Written), 5), false,
			"bigtable t: readings routed 7 != written 5 + dead-lettered 1 (off by 1)"},
		{"a table routed fewer readings than were built", with(with(batch(), SinkKey(deadletter.SinkBigQuery, "q", r, Routed), 6), SinkKey(deadletter.SinkBigQuery, "q", r, Written), 6), false,
			"bigquery q: routed 6 readings of 7 distinct valid readings (off by 1)"},
		{"a dead letter the store did not take", with(batch(), DeadLetterKey(deadletter.SinkBigtable, "write_failed"), 0), false,
			"dead letters of bigtable: 1 made, 0 stored (off by 1)"},
		{"a rollup row lost", with(batch(), SinkKey(deadletter.SinkBigQueryRollups, "h", hours.OriginRollup, Written), 0), false,
			"bigquery_rollups h: rollup rows routed 1 != written 0 + dead-lettered 0 (off by 1)"},
		{"a re-run that left readings unchanged", with(with(with(batch(), SinkKey(deadletter.SinkBigQuery, "q", r, Routed), 3), SinkKey(deadletter.SinkBigQuery, "q", r, Written), 3),
			SinkKey(deadletter.SinkBigQuery, "q", r, Unchanged), 4), false, ""},
		{"a re-run that lost a reading it did not leave unchanged", with(with(with(batch(), SinkKey(deadletter.SinkBigQuery, "q", r, Routed), 3), SinkKey(deadletter.SinkBigQuery, "q", r, Written), 3),
			SinkKey(deadletter.SinkBigQuery, "q", r, Unchanged), 3), false, "bigquery q: routed 3 readings and left 3 unchanged, of 7 distinct valid readings (off by 1)"},
		{"a stream with readings in open windows", with(batch(), InputRecords, 15), true, ""},
		{"a stream counting a reading twice", with(batch(), InputRecords, 9), true, "records read 9 < distinct readings 7 + merged duplicates 1 + rejected 2: readings counted twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := FromCounters(tc.c, tc.stream)
			if tc.problem == "" {
				if !l.Balanced {
					t.Fatalf("not balanced: %v", l.Problems)
				}
				return
			}
			if l.Balanced || !strings.Contains(strings.Join(l.Problems, "\n"), tc.problem) {
				t.Fatalf("problems %q; want %q", l.Problems, tc.problem)
			}
		})
	}
}

func TestLedgerFigures(t *testing.T) {
	c := with(batch(), SinkKey(deadletter.SinkBigtable, "t", hours.OriginReading, Unavailable), 1)
	c[SinkKey(deadletter.SinkBigtable, "t", hours.OriginProvisional, Written)] = 4
	l := FromCounters(c, false)
	if l.Read != 10 || l.Readings != 7 || l.Duplicates != 1 || l.Rejected != 2 || l.DeadLettered() != 3 {
		t.Errorf("figures %+v", l)
	}
	if len(l.Sinks) != 3 || l.Sinks[0].Sink != "bigtable" || l.Sinks[1].Sink != "bigquery" || l.Sinks[2].Sink != "bigquery_rollups" {
		t.Fatalf("sinks %+v; want bigtable, bigquery, bigquery_rollups", l.Sinks)
	}
	bt := l.Sinks[0]
	if bt.Routed != 7 || bt.Written != 6 || bt.Failed != 1 || bt.Unavailable != 1 || bt.Rows != 2 ||
		len(bt.Other) != 1 || bt.Other[0] != (Count{"provisional written", 4}) {
		t.Errorf("bigtable %+v", bt)
	}
	if u := l.Unavailable(); len(u) != 1 || u[0].Table != "t" {
		t.Errorf("unavailable %+v; want table t", u)
	}
	var text bytes.Buffer
	l.WriteText(&text)
	for _, want := range []string{"records read:            10", "bigtable t: readings routed 7 = written 6 + dead-lettered 1 (1 while the store was unavailable)",
		"dead letters:            3 (parse/malformed 2, bigtable/write_failed 1)", "ledger: balanced"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := l.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Ledger
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Read != 10 || !back.Balanced || len(back.Sinks) != 3 {
		t.Errorf("JSON round trip: %v, %+v", err, back)
	}
}

// TestFamily: a counter's family holds it and every counter a step that
// keeps it may come to keep, so registering the family at the first count
// leaves no counter to be first counted later.
func TestFamily(t *testing.T) {
	sink := SinkKey(deadletter.SinkBigtable, "readings", hours.OriginReading, Routed)
	for _, tc := range []struct {
		name string
		k    Key
		want []Key
	}{
		{"stage", InputRecords, []Key{InputRejected, TooLate, GroupRejected, Readings, Duplicates, Recovered}},
		{"sink", sink, []Key{
			RowsKey(deadletter.SinkBigtable, "readings"),
			SinkKey(deadletter.SinkBigtable, "readings", hours.OriginReading, Unavailable),
			SinkKey(deadletter.SinkBigtable, "readings", hours.OriginRollup, Failed),
			SinkKey(deadletter.SinkBigtable, "readings", hours.OriginRewrite, Written),
		}},
		{"dead letters", DeadLetterKey(deadletter.SinkParse, "malformed"), []Key{
			DeadLetterKey(deadletter.SinkBigtable, "write_failed"),
			DeadLetterKey(deadletter.SinkWindow, "too_late"),
			DeadLetterKey(deadletter.SinkBigQueryRollups, "internal"),
		}},
		{"other", Key{"recover", "windows_found"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fam := map[Key]bool{}
			for _, k := range Family(tc.k) {
				fam[k] = true
			}
			for _, k := range append(tc.want, tc.k) {
				if !fam[k] {
					t.Errorf("Family(%v) lacks %v", tc.k, k)
				}
			}
			if fam[SinkKey(deadletter.SinkBigQuery, "readings", hours.OriginReading, Routed)] && tc.name == "sink" {
				t.Errorf("Family(%v) holds another table's counter", tc.k)
			}
		})
	}
}

// TestZeroCountersAddNothing: the zeros a family registers do not show in
// the ledger.
func TestZeroCountersAddNothing(t *testing.T) {
	c := Counters{}
	for _, k := range append(Family(InputRecords), Family(DeadLetterKey("parse", "malformed"))...) {
		c[k] = 0
	}
	for _, k := range Family(SinkKey(deadletter.SinkBigQuery, "r", hours.OriginReading, Routed)) {
		c[k] = 0
	}
	l := FromCounters(c, false)
	if len(l.Sinks) != 0 || len(l.DeadLetters) != 0 || !l.Balanced {
		t.Errorf("zeros gave sinks %v, dead letters %v, balanced %v, problems %v", l.Sinks, l.DeadLetters, l.Balanced, l.Problems)
	}
}

// TestStreamTextSaysWhatIsProvisional: a stream stopped mid-hour has read
// more than its final readings and written more than it read; its text
// says which readings are final, which are in open hours, and that the
// extra writes are provisional.
func TestStreamTextSaysWhatIsProvisional(t *testing.T) {
	c := with(batch(), InputRecords, 25) // 15 readings still in open hours
	c[SinkKey(deadletter.SinkBigtable, "t", hours.OriginProvisional, Written)] = 30
	l := FromCounters(c, true)
	var text bytes.Buffer
	l.WriteText(&text)
	for _, want := range []string{
		"distinct valid readings: 7 (final: their hour has closed)",
		"in open hours:           15 (read and written provisionally; final when their hour closes)",
		"plus provisional writes (on arrival and early firings, before the hour closed) 30",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if strings.Contains(text.String(), "provisional written") {
		t.Errorf("text uses the counter's name, not words:\n%s", text.String())
	}
}

// TestMessagesAndDrift: a stream's messages, the keys not in the spec and
// the timestamp attribute's problems are shown apart from the readings and
// do not enter the balance.
func TestMessagesAndDrift(t *testing.T) {
	c := batch()
	c[InputMessages] = 4
	c[UnknownFieldKey("firmware_version")] = 30
	c[UnknownFieldKey("rssi")] = 2
	c[TimestampAttributeMissing] = 1
	c[TimestampAttributeDisagrees] = 3
	l := FromCounters(c, false)
	if !l.Balanced || l.Messages != 4 || l.FieldsNotInSpec["firmware_version"] != 30 ||
		l.TimestampAttribute == nil || *l.TimestampAttribute != (AttributeCounts{Missing: 1, Disagrees: 3}) {
		t.Fatalf("ledger %+v", l)
	}
	var text bytes.Buffer
	l.WriteText(&text)
	for _, want := range []string{"messages read:           4 (2.5 records a message)", "fields not in the spec:  firmware_version 30, rssi 2",
		"timestamp attribute:     missing 1, unparseable 0 (messages); off the event time by more than the spec's tolerance 3 (readings)"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if l := FromCounters(batch(), false); l.Messages != 0 || l.FieldsNotInSpec != nil || l.TimestampAttribute != nil {
		t.Errorf("a batch shows stream figures: %+v", l)
	}
}

// TestClockAheadPerSensor: the readings rejected for a clock ahead are
// shown per sensor, apart from the balance (they are among the rejected).
func TestClockAheadPerSensor(t *testing.T) {
	c := batch()
	c[ClockAheadKey("dev-7")] = 3
	c[ClockAheadKey("dev-2")] = 1
	c[ClockAheadKey("dev-9")] = 0
	l := FromCounters(c, true)
	if len(l.ClockAhead) != 2 || l.ClockAhead["dev-7"] != 3 || l.ClockAhead["dev-2"] != 1 {
		t.Fatalf("ClockAhead = %v; want dev-7 3, dev-2 1", l.ClockAhead)
	}
	if b := FromCounters(batch(), true); b.Rejected != l.Rejected || b.Balanced != l.Balanced {
		t.Errorf("the clock-ahead counters moved the balance: rejected %d, balanced %v; want %d, %v", l.Rejected, l.Balanced, b.Rejected, b.Balanced)
	}
	var text bytes.Buffer
	l.WriteText(&text)
	if want := "clock ahead, rejected:   dev-2 1, dev-7 3 ("; !strings.Contains(text.String(), want) {
		t.Errorf("text lacks %q:\n%s", want, text.String())
	}
	if l := FromCounters(batch(), false); l.ClockAhead != nil {
		t.Errorf("a run without clock-ahead counters shows %v", l.ClockAhead)
	}
}

func TestRowsByFormat(t *testing.T) {
	c := Counters{InputRecords: 12, InputRows("csv"): 7, InputRows("parquet"): 5}
	l := FromCounters(c, false)
	if len(l.RowsByFormat) != 2 || l.RowsByFormat["csv"] != 7 || l.RowsByFormat["parquet"] != 5 {
		t.Fatalf("rows by format %v", l.RowsByFormat)
	}
	var b strings.Builder
	l.WriteText(&b)
	if !strings.Contains(b.String(), "    rows read:               csv 7, parquet 5\n") {
		t.Errorf("ledger text lacks the rows by format:\n%s", b.String())
	}
}
