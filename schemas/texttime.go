package schemas

import (
	"strings"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas/timestamps"
)

// validateTextTime checks a field's layout, timezone and column.
func (s *Spec) validateTextTime(where string, f *FieldSpec) error {
	if (f.Layout != "" || f.Timezone != "") && f.Type != TypeTimestamp {
		return s.Errorf(where+".layout", "layout and timezone apply to timestamp fields; field %s is %s", f.Name, f.Type)
	}
	if f.Timezone != "" {
		if _, err := timestamps.Zone(f.Timezone); err != nil {
			return s.Errorf(where+".timezone", "%q is not an IANA time zone (e.g. Europe/Berlin, America/New_York, UTC)", f.Timezone)
		}
	}
	if f.Layout != "" {
		ref := time.Date(2026, 3, 1, 10, 15, 30, 250e6, time.UTC)
		back, err := time.Parse(f.Layout, ref.Format(f.Layout))
		if err != nil || back.Year() != 2026 || back.Month() != 3 || back.Day() != 1 || back.Hour() != 10 || back.Minute() != 15 {
			return s.Errorf(where+".layout", "%q is not a Go time layout of a date and a time (write the reference time Mon Jan 2 15:04:05 2006 as the data does, e.g. 2006-01-02 15:04:05)", f.Layout)
		}
	}
	if strings.HasPrefix(f.Column, ".") || strings.HasSuffix(f.Column, ".") || strings.Contains(f.Column, "..") {
		return s.Errorf(where+".column", "%q is not a column name or a dotted path of one (e.g. device.id)", f.Column)
	}
	return nil
}
