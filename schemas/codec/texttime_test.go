package codec

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/timestamps"
)

func TestParseTimestampTakesTheSpaceSeparatedForm(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // RFC 3339 in UTC, or "" for an error
	}{
		{"2026-03-01 10:00:01Z", "2026-03-01T10:00:01Z"},
		{"2026-03-01 12:00:01.5+02:00", "2026-03-01T10:00:01.5Z"},
		{"2026-03-01T10:00:01Z", "2026-03-01T10:00:01Z"},
		{"2026-03-01T10:00:00", ""}, // no offset: ambiguous without a layout
		{"2026-03-01 10:00:00", ""},
	} {
		t.Run(tc.in, func(t *testing.T) {
			ms, err := timestamps.ParseTimestamp(tc.in)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("got %d, want an error", ms)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := time.UnixMilli(ms).UTC().Format(time.RFC3339Nano); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestParseLayoutAcrossDaylightSavingChanges(t *testing.T) {
	const layout = "2006-01-02 15:04:05"
	for _, tc := range []struct {
		name, in, zone string
		want, err      string
	}{
		{"utc by default", "2026-03-01 10:00:00", "", "2026-03-01T10:00:00Z", ""},
		{"winter in Berlin", "2026-03-01 11:00:00", "Europe/Berlin", "2026-03-01T10:00:00Z", ""},
		{"summer in Berlin", "2026-03-29 03:30:00", "Europe/Berlin", "2026-03-29T01:30:00Z", ""},
		{"skipped hour", "2026-03-29 02:30:00", "Europe/Berlin", "", "does not exist in Europe/Berlin"},
		{"repeated hour", "2026-10-25 02:30:00", "Europe/Berlin", "", "ambiguous in Europe/Berlin"},
		{"after the repeat", "2026-10-25 03:30:00", "Europe/Berlin", "2026-10-25T02:30:00Z", ""},
		{"RFC 3339 too", "2026-10-25T02:30:00+01:00", "Europe/Berlin", "2026-10-25T01:30:00Z", ""},
		{"neither", "25/10/2026", "Europe/Berlin", "", "neither in the field's layout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := timestamps.ParseLayout(tc.in, layout, tc.zone)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %d, %v; want an error with %q", ms, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := time.UnixMilli(ms).UTC().Format(time.RFC3339Nano); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestLayoutFieldsParseThroughTheSpec(t *testing.T) {
	spec := yamlSpec(t, `
name: local
event_time: ts
identity: [id]
fields:
  - {name: id, type: string, required: true}
  - {name: ts, type: timestamp, required: true, layout: "2006-01-02 15:04:05", timezone: Europe/Berlin}
  - {name: v, type: float}
bigtable:
  tables:
    - name: t
      row_key: "{id}#{ts|hour}"
      families: [{name: m, columns: [{qualifier: v, value: v}]}]
`)
	p := NewParser(spec)
	recs, err := p.ParseString(nil, `{"id":"a","ts":"2026-03-01 11:00:00","v":1}`, "f")
	if err != nil || len(recs) != 1 || recs[0].EventMs != time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixMilli() {
		t.Fatalf("got %v, %v", recs, err)
	}
	_, err = p.ParseString(nil, `{"id":"a","ts":"2026-10-25 02:30:00","v":1}`, "f")
	if !errors.Is(err, schemas.ErrBadTimestamp) || !strings.Contains(err.Error(), "ambiguous") {
		t.Fatalf("got %v, want an ambiguous bad_timestamp", err)
	}
}

func TestLayoutAndTimezoneAreChecked(t *testing.T) {
	for _, tc := range []struct{ field, want string }{
		{`{name: ts, type: timestamp, required: true, timezone: Mars/Olympus}`, "not an IANA time zone"},
		{`{name: ts, type: timestamp, required: true, layout: "yesterday"}`, "not a Go time layout"},
		{`{name: ts, type: string, required: true, layout: "2006-01-02 15:04:05"}`, "apply to timestamp fields"},
	} {
		_, err := schemas.ParseSpec("x.yaml", []byte(`
name: local
event_time: ts
identity: [ts]
fields:
  - `+tc.field+`
bigtable:
  tables:
    - name: t
      row_key: "{ts|hour}"
      families: [{name: m}]
`))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.field, err, tc.want)
		}
	}
}

// yamlSpec parses a spec written in the test.
func yamlSpec(t testing.TB, doc string) *schemas.Spec {
	t.Helper()
	s, err := schemas.ParseSpec("test.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
