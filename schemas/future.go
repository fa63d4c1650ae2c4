package schemas

import (
	"time"
)

// DefaultMaxFuture is how far ahead of the wall clock a stream accepts an
// event time when the spec sets no max_future: a device clock a little
// fast, or a gateway that stamps readings as it batches them, stays
// within it; a clock set a day or a year ahead does not.
const DefaultMaxFuture = time.Hour

// FutureLimit is the spec's max_future. Call it on a validated spec.
func FutureLimit(s *Spec) time.Duration {
	if d, err := time.ParseDuration(s.MaxFuture); err == nil && d > 0 {
		return d
	}
	return DefaultMaxFuture
}

// CheckFuture rejects, as out_of_range, an event time more than maxFuture
// ahead of nowMs, the wall clock when the reading arrived (both epoch
// milliseconds); field names the event-time field. The reason says by how
// much the device's clock is ahead.
func CheckFuture(field string, eventMs, nowMs int64, maxFuture time.Duration) error {
	ahead := time.Duration(eventMs-nowMs) * time.Millisecond
	if ahead <= maxFuture {
		return nil
	}
	return Reject(ErrOutOfRange, "%s %s is %v ahead of the wall clock at arrival (%s), more than the spec's max_future %v: the device's clock is ahead; set it right, or raise max_future",
		field, time.UnixMilli(eventMs).UTC().Format(time.RFC3339Nano), ahead.Round(time.Second),
		time.UnixMilli(nowMs).UTC().Format(time.RFC3339), maxFuture)
}
