package timestamps

import (
	"fmt"
	"strings"
	"sync"
	"time"

	// The IANA zone database, so that a field's timezone resolves the same
	// on every worker, whatever the worker's image has installed.
	_ "time/tzdata"
)

// zones caches the locations fields name (time.LoadLocation parses the
// zone's rules on each call).
var zones sync.Map // string -> *time.Location

// Zone is the IANA zone name resolves to ("" and "UTC": UTC).
func Zone(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location), nil
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	zones.Store(name, l)
	return l, nil
}

// layoutHasZone reports whether a Go time layout reads an offset or a
// zone abbreviation itself.
func layoutHasZone(layout string) bool {
	return strings.Contains(layout, "Z07") || strings.Contains(layout, "-07") || strings.Contains(layout, "MST")
}

// WallTime is the instant the wall-clock time w (its fields read as UTC)
// shows in loc. A time that a daylight-saving change skips, or shows twice,
// is an error that says so.
func WallTime(w time.Time, loc *time.Location) (time.Time, error) {
	if loc == time.UTC {
		return w, nil
	}
	wall := w.Unix()
	// The offsets in force a day either side: a zone changes its offset
	// at most once in two days, so these are the offsets the wall time
	// may be read with.
	var found []time.Time
	for _, probe := range []int64{wall - 86400, wall + 86400} {
		_, off := time.Unix(probe, 0).In(loc).Zone()
		at := time.Unix(wall-int64(off), int64(w.Nanosecond())).In(loc)
		if _, o := at.Zone(); o != off {
			continue
		}
		if len(found) == 0 || !found[0].Equal(at) {
			found = append(found, at)
		}
	}
	shown := w.Format("2006-01-02 15:04:05")
	switch len(found) {
	case 0:
		return time.Time{}, fmt.Errorf("%s does not exist in %s: the clocks skip it at a daylight-saving change", shown, loc)
	case 2:
		a, b := found[0].Format("-07:00"), found[1].Format("-07:00")
		return time.Time{}, fmt.Errorf("%s is ambiguous in %s: a daylight-saving change shows it twice (at %s and %s); write the offset", shown, loc, a, b)
	}
	return found[0], nil
}

// ParseLayout reads text written in a Go time layout as epoch
// milliseconds (truncated toward the past): in zone (IANA, "" for UTC)
// unless the layout reads an offset. Text in RFC 3339 (with its offset)
// is read too. A wall time a daylight-saving change skips or repeats is an
// error that says so.
func ParseLayout(text, layout, zone string) (int64, error) {
	loc, err := Zone(zone)
	if err != nil {
		return 0, err
	}
	if layoutHasZone(layout) {
		t, err := time.ParseInLocation(layout, text, loc)
		if err != nil {
			return rfc3339Fallback(text, layout, zone)
		}
		return t.UnixMilli(), nil
	}
	w, err := time.Parse(layout, text)
	if err != nil {
		return rfc3339Fallback(text, layout, zone)
	}
	t, err := WallTime(w, loc)
	if err != nil {
		return 0, err
	}
	return floorDiv(t.UnixNano(), 1e6), nil
}

// rfc3339Fallback reads text that is not in a field's layout as RFC 3339,
// or says it is neither.
func rfc3339Fallback(text, layout, zone string) (int64, error) {
	if ms, err := ParseTimestamp(text); err == nil {
		return ms, nil
	}
	if zone == "" {
		zone = "UTC"
	}
	return 0, fmt.Errorf("%q is neither in the field's layout %q (read in %s) nor RFC 3339", text, layout, zone)
}
