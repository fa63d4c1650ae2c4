// Package digest sums the readings and rollup cells of a sensor-hour,
// read in any order and from any row layout, to one value: two tables of
// one dataset hold the same readings when their sensor-hours' digests are
// equal.
package digest

import (
	"crypto/sha256"
	"encoding/binary"
	"sort"
	"strings"
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/group"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// HourMs is the length of a sensor-hour: the hourly windows of the row
// keys and rollups.
const HourMs = int64(time.Hour / time.Millisecond)

// SensorHour names one identity's UTC hour: what keys compare compares.
type SensorHour struct {
	Identity string // the spec's IdentityKey
	StartMs  int64
}

// String renders the sensor-hour as its identity fields (comma-separated)
// and the hour's start, RFC 3339.
func (h SensorHour) String() string {
	return strings.ReplaceAll(h.Identity, "\x1f", ",") + " " + time.UnixMilli(h.StartMs).UTC().Format(time.RFC3339)
}

// HourOf is the sensor-hour of a reading of spec s.
func HourOf(s *schemas.Spec, r *schemas.Record) SensorHour {
	return SensorHour{Identity: group.IdentityKey(s, r), StartMs: hours.WindowStart(r.EventMs, time.Hour)}
}

// ObservedFields are what two layouts of a dataset must agree on for a
// reading, as "name=value" texts sorted by name: every field with an
// observed value (an imputed value, flagged so, is none; the imputed flags
// are not fields). The event time is the record's EventMs.
func ObservedFields(s *schemas.Spec, r *schemas.Record) []string {
	imputed := map[int]bool{}
	for i, im := range s.Impute {
		if f := len(s.Fields) + i; f < len(r.Values) && r.Values[f].Bool {
			imputed[s.FieldIndex(im.Field)] = true
		}
	}
	var out []string
	for i, f := range s.Fields {
		if i >= len(r.Values) || imputed[i] || r.Values[i].Kind == schemas.KindNull {
			continue
		}
		out = append(out, f.Name+"="+string(schemas.AppendText(nil, r.Values[i])))
	}
	sort.Strings(out)
	return out
}

// Digest is an order-free digest of a set of readings or rollup cells:
// their count and the sum of their hashes, so that the readings of one
// sensor-hour, read in any order and from any number of rows, add up to
// one value.
type Digest struct {
	N      int64
	Hi, Lo uint64
}

// Add adds one item, given as its text.
func (d *Digest) Add(text string) {
	sum := sha256.Sum256([]byte(text))
	d.N++
	d.Hi += binary.BigEndian.Uint64(sum[:8])
	d.Lo += binary.BigEndian.Uint64(sum[8:16])
}

// Plus is d and e together.
func (d Digest) Plus(e Digest) Digest {
	return Digest{N: d.N + e.N, Hi: d.Hi + e.Hi, Lo: d.Lo + e.Lo}
}

// ReadingText is a reading's text for a Digest: its event time and
// ObservedFields.
func ReadingText(s *schemas.Spec, r *schemas.Record) string {
	return FieldsText(r.EventMs, ObservedFields(s, r))
}

// FieldsText is ReadingText of a reading at eventMs whose ObservedFields
// are fields.
func FieldsText(eventMs int64, fields []string) string {
	return time.UnixMilli(eventMs).UTC().Format(time.RFC3339Nano) + " " + strings.Join(fields, " ")
}

// HourSummary is what keys compare keeps of one sensor-hour of a table:
// the digests of its readings and of its rollup cells.
type HourSummary struct {
	Readings Digest
	Rollup   Digest
}

// RollupText is a rollup cell's text for a Digest: its qualifier and
// value.
func RollupText(c hours.Cell) string { return c.Qualifier + "=" + string(c.Value) }
