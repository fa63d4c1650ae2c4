package silences

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/internal/spectest"
)

func TestSilenceAfter(t *testing.T) {
	tests := []struct {
		name                        string
		cadence, field, silentAfter string
		want                        time.Duration
		ok, raises                  bool
	}{
		{"no cadence: no silences", "", "", "", 0, false, false},
		{"three cadences by default", "20m", "", "", time.Hour, true, true},
		{"silent_after wins", "20m", "", "45m", 45 * time.Minute, true, true},
		{"a cadence field raises them per reading", "", "heart_rate", "", 0, false, true},
		{"a cadence field the spec lacks raises nothing", "", "no_such_field", "", 0, false, false},
		{"a bad duration is none", "soon", "", "", 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := spectest.Must(t, "vitals")
			s.Cadence, s.CadenceField, s.SilentAfter = tt.cadence, tt.field, tt.silentAfter
			got, ok := SilenceAfter(s)
			if got != tt.want || ok != tt.ok {
				t.Errorf("SilenceAfter = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
			if r := RaisesSilences(s); r != tt.raises {
				t.Errorf("RaisesSilences = %v; want %v", r, tt.raises)
			}
		})
	}
}

// TestSilenceTrack: each gap longer than silent_after gives one silence
// and one resumed record, whether the timer raised the silence or the
// reading after the gap came first, however the readings are batched and
// however often they come.
func TestSilenceTrack(t *testing.T) {
	const after = 60 // ms
	id := []schemas.Value{{Kind: schemas.KindString, Str: "s-1"}}
	type step struct {
		times  []int64 // a batch; nil: the timer at DueMs
		expire bool
	}
	tests := []struct {
		name  string
		steps []step
		want  []string // kind@last_seen>resumed_at
	}{
		{"no gap", []step{{times: []int64{0, 50, 100}}}, nil},
		{"a gap of exactly silent_after is none", []step{{times: []int64{0, 60}}}, nil},
		{"a gap within one batch", []step{{times: []int64{0, 50, 200, 240}}}, []string{"silence@50", "resumed@50>200"}},
		{"a gap across batches", []step{{times: []int64{0, 50}}, {times: []int64{200}}}, []string{"silence@50", "resumed@50>200"}},
		{"the timer first, then the reading", []step{{times: []int64{0, 50}}, {expire: true}, {times: []int64{200}}},
			[]string{"silence@50", "resumed@50>200"}},
		{"the timer twice raises once", []step{{times: []int64{0, 50}}, {expire: true}, {expire: true}}, []string{"silence@50"}},
		{"every batch three times", []step{{times: []int64{0, 50}}, {times: []int64{0, 50}}, {expire: true}, {times: []int64{0, 50}},
			{times: []int64{200, 210}}, {times: []int64{200, 210}}, {times: []int64{200, 210}}}, []string{"silence@50", "resumed@50>200"}},
		{"late readings change nothing", []step{{times: []int64{0, 50}}, {times: []int64{10, 20}}}, nil},
		{"two gaps", []step{{times: []int64{0, 100, 120, 300}}}, []string{"silence@0", "resumed@0>100", "silence@120", "resumed@120>300"}},
		{"a late reading after the timer ends the silence", []step{{times: []int64{0}}, {expire: true}, {times: []int64{30}}},
			[]string{"silence@0", "resumed@0>30"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tr SilenceTrack
			var got []string
			for _, st := range tt.steps {
				var out []Silence
				if st.expire {
					due, ok := tr.DueMs()
					if !ok {
						due = tr.LastMs + after + 1 // a repeated timer
					}
					if x, ok := tr.Expire(due, 7); ok {
						out = append(out, x)
					}
				} else {
					out = tr.Observe(id, st.times, nil, after, 7)
				}
				for _, x := range out {
					s := x.Kind + "@" + strconv.FormatInt(x.LastSeenMs, 10)
					if x.Kind == SilenceResumed {
						s += ">" + strconv.FormatInt(x.ResumedAtMs, 10)
					}
					if x.SilentSinceMs != x.LastSeenMs+after || x.DetectedAtMs != 7 {
						t.Errorf("%+v: silent_since or detected_at wrong", x)
					}
					got = append(got, s)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}

func TestSilenceTrackStaleTimer(t *testing.T) {
	var tr SilenceTrack
	tr.Observe(nil, []int64{0}, nil, 60, 1)
	stale, _ := tr.DueMs()
	tr.Observe(nil, []int64{40}, nil, 60, 1)
	if _, ok := tr.Expire(stale, 2); ok {
		t.Errorf("a timer set before a newer reading raised a silence")
	}
	due, _ := tr.DueMs()
	if x, ok := tr.Expire(due, 2); !ok || x.LastSeenMs != 40 || x.SilentSinceMs != 100 {
		t.Errorf("Expire at due = %+v, %v; want the silence after 40", x, ok)
	}
}

func TestSilenceCodecs(t *testing.T) {
	id := []schemas.Value{{Kind: schemas.KindString, Str: "s-1"}, {Kind: schemas.KindInt, Int: 7}}
	for _, b := range []SilenceBatch{
		{Identity: id, TimesMs: []int64{1_700_000_000_000, 1_700_000_020_000}},
		{Identity: id, TimesMs: []int64{5}, AfterMs: []int64{60_000}},
		{Identity: id, TimesMs: []int64{}},
		{Identity: id, TimesMs: []int64{9}, History: true},
		{Identity: id, TimesMs: []int64{9, 70}, AfterMs: []int64{60, 60}, History: true, Stored: []Silence{
			{Kind: SilenceRaised, Identity: id, LastSeenMs: 9, SilentSinceMs: 69},
			{Kind: SilenceResumed, Identity: id, LastSeenMs: 9, SilentSinceMs: 69, ResumedAtMs: 70}}},
		{Identity: id, TimesMs: []int64{}, History: true, Stored: []Silence{
			{Kind: SilenceRaised, Identity: id, LastSeenMs: -5, SilentSinceMs: 55}}},
	} {
		got, err := DecodeSilenceBatch(AppendSilenceBatch(nil, b))
		if err != nil || !reflect.DeepEqual(got, b) {
			t.Errorf("batch %+v came back %+v, %v", b, got, err)
		}
	}
	for _, tr := range []SilenceTrack{{}, {Known: true, Open: true, Identity: id, LastMs: 1_700_000_000_000, AfterMs: 3_600_000, FirstMs: 1_699_000_000_000}} {
		got, err := DecodeSilenceTrack(AppendSilenceTrack(nil, tr))
		if tr.Identity == nil {
			tr.Identity = []schemas.Value{}
		}
		if err != nil || !reflect.DeepEqual(got, tr) {
			t.Errorf("track %+v came back %+v, %v", tr, got, err)
		}
	}
	if _, err := DecodeSilenceTrack([]byte{9}); err == nil {
		t.Errorf("bad flags decoded")
	}
}

// TestSilenceRecords: the id is the gap's (identity, silent_since, kind),
// whatever was detected when; the row follows the table's columns.
func TestSilenceRecords(t *testing.T) {
	s := spectest.Must(t, "vitals")
	s.Cadence = "20m"
	x := Silence{Kind: SilenceRaised, Identity: []schemas.Value{{Kind: schemas.KindString, Str: "s-1"}}, LastSeenMs: 1_000, SilentSinceMs: 3_601_000, DetectedAtMs: 5}
	y := x
	y.DetectedAtMs = 99
	if SilenceID(s, x) != SilenceID(s, y) {
		t.Errorf("the id depends on detected_at")
	}
	r := x
	r.Kind, r.ResumedAtMs = SilenceResumed, 4_000_000
	if SilenceID(s, x) == SilenceID(s, r) {
		t.Errorf("a gap's silence and resumed records share an id")
	}
	bq := SilencesBigQuery(s)
	row := SilenceBQRow(s, r)
	if len(row.Values) != len(bq.Columns) {
		t.Fatalf("row has %d values for %d columns", len(row.Values), len(bq.Columns))
	}
	if bq.Table != SilencesTable || !reflect.DeepEqual(bq.PrimaryKey, []string{SilenceColID}) || bq.Columns[0].Name != "sensor_id" {
		t.Errorf("table %+v", bq)
	}
	want := `{"sensor_id":"s-1","silence_id":"` + SilenceID(s, r) + `","kind":"resumed","last_seen":"1970-01-01T00:00:01.000Z",` +
		`"silent_since":"1970-01-01T01:00:01.000Z","detected_at":"1970-01-01T00:00:00.005Z","resumed_at":"1970-01-01T01:06:40.000Z"}`
	if got := string(SilenceJSON(s, r)); got != want {
		t.Errorf("SilenceJSON =\n%s\nwant\n%s", got, want)
	}
}

// TestSilenceTrackPrepend: a restarted stream's read-back history, whether
// it comes before or after the new readings, gives the gaps one track over
// all the readings gives.
func TestSilenceTrackPrepend(t *testing.T) {
	const after = 60
	all := []int64{0, 50, 200, 210, 400, 420}
	want := func() []Silence {
		var tr SilenceTrack
		return tr.Observe(nil, all, nil, after, 1)
	}()
	for split := 1; split < len(all); split++ {
		var tr SilenceTrack
		got := tr.Observe(nil, all[split:], nil, after, 1)
		got = append(got, tr.Prepend(nil, all[:split], nil, after, 1)...)
		if len(got) != len(want) {
			t.Errorf("history before %d: %d records; want %d", all[split], len(got), len(want))
			continue
		}
		seen := map[string]bool{}
		for _, x := range got {
			seen[x.Kind+strconv.FormatInt(x.LastSeenMs, 10)+"/"+strconv.FormatInt(x.ResumedAtMs, 10)] = true
		}
		for _, x := range want {
			if !seen[x.Kind+strconv.FormatInt(x.LastSeenMs, 10)+"/"+strconv.FormatInt(x.ResumedAtMs, 10)] {
				t.Errorf("history before %d: no %+v", all[split], x)
			}
		}
		// The history in the first place is Observe.
		var fresh SilenceTrack
		if got := fresh.Prepend(nil, all, nil, after, 1); len(got) != len(want) {
			t.Errorf("Prepend on a fresh track: %d records; want %d", len(got), len(want))
		}
	}
}

// TestSilenceTrackPrependNewer: history newer than a redelivered reading
// the restarted track saw first is the sensor's newest, so the track
// times the silence after the history's last reading, not the older one.
func TestSilenceTrackPrependNewer(t *testing.T) {
	var tr SilenceTrack
	tr.Observe(nil, []int64{50}, nil, 60, 1)
	got := tr.Prepend(nil, []int64{0, 50, 100, 150}, nil, 60, 1)
	if len(got) != 0 {
		t.Errorf("records %+v; want none (no gap over 60)", got)
	}
	if due, ok := tr.DueMs(); !ok || due != 211 {
		t.Errorf("due %d, %v; want 211 (after the reading at 150)", due, ok)
	}
}

// TestSilenceTrackRestore: after a restart, the records the run before
// wrote are not raised again; a silence it wrote without its resumed
// record gets one at the sensor's next reading, whether that reading was
// read back, came live before the history, or comes later; a gap the
// watermark raised though the readings' gap is no longer than
// silent_after included.
func TestSilenceTrackRestore(t *testing.T) {
	const after = 60
	silence := func(last int64) Silence {
		return Silence{Kind: SilenceRaised, LastSeenMs: last, SilentSinceMs: last + after}
	}
	resumed := func(last, at int64) Silence {
		return Silence{Kind: SilenceResumed, LastSeenMs: last, SilentSinceMs: last + after, ResumedAtMs: at}
	}
	render := func(xs []Silence) []string {
		out := []string{}
		for _, x := range xs {
			out = append(out, x.Kind+" "+strconv.FormatInt(x.LastSeenMs, 10)+" "+strconv.FormatInt(x.ResumedAtMs, 10))
		}
		return out
	}
	tests := []struct {
		name      string
		live      []int64 // readings the restarted track saw before the history
		history   []int64
		stored    []Silence
		later     []int64 // readings after the history
		want      []string
		wantOpen  bool
		wantTimer bool
	}{
		{"a silence the watermark raised, no reading since: open, no timer, resumed at the next reading",
			nil, []int64{0, 10}, []Silence{silence(10)}, []int64{40},
			[]string{"resumed 10 40"}, false, true},
		{"a silence written, the next reading read back: its resumed record",
			nil, []int64{0, 10, 40}, []Silence{silence(10)}, nil,
			[]string{"resumed 10 40"}, false, true},
		{"a silence written, the next reading came live first: its resumed record",
			[]int64{40}, []int64{0, 10}, []Silence{silence(10)}, nil,
			[]string{"resumed 10 40"}, false, true},
		{"a gap written whole is not raised again",
			nil, []int64{0, 100}, []Silence{silence(0), resumed(0, 100)}, nil,
			[]string{}, false, true},
		{"a gap whose silence was written gets only its resumed record",
			nil, []int64{0, 100}, []Silence{silence(0)}, nil,
			[]string{"resumed 0 100"}, false, true},
		{"a silence with no reading read back: the sensor is known silent",
			nil, nil, []Silence{silence(-500)}, []int64{20},
			[]string{"resumed -500 20"}, false, true},
		{"nothing stored: what the readings show",
			nil, []int64{0, 100}, nil, nil,
			[]string{"silence 0 0", "resumed 0 100"}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tr SilenceTrack
			got := tr.Observe(nil, tt.live, nil, after, 1)
			out := tr.Prepend(nil, tt.history, nil, after, 1)
			got = append(got, tr.Restore(nil, tt.history, tt.stored, out, 1)...)
			if len(tt.later) == 0 {
				if _, ok := tr.DueMs(); ok != tt.wantTimer || tr.Open != tt.wantOpen {
					t.Errorf("timer %v, open %v; want %v, %v", ok, tr.Open, tt.wantTimer, tt.wantOpen)
				}
			} else {
				if _, ok := tr.DueMs(); ok || !tr.Open {
					t.Errorf("before the later readings: timer %v, open %v; want no timer, open", ok, tr.Open)
				}
				got = append(got, tr.Observe(nil, tt.later, nil, after, 1)...)
			}
			if g := render(got); !reflect.DeepEqual(g, tt.want) {
				t.Errorf("records %q; want %q", g, tt.want)
			}
		})
	}
}
