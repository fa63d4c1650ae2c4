// Package sensorclock hands out event times for generated readings that
// never repeat a sensor's millisecond: the pipeline merges two readings of
// one sensor in the same millisecond as duplicates of one reading, so a
// generator that sent them would look as if it lost data. Used by the
// publisher (launch/publish) and the streaming benchmark.
package sensorclock

import "time"

// Clock is a per-sensor event-time clock. Its zero value is ready to use;
// it is not safe for concurrent use.
type Clock struct{ last map[int]int64 }

// Next returns t in epoch milliseconds, moved to one millisecond after the
// sensor's previous event time when it would not be later than it.
func (c *Clock) Next(sensor int, t time.Time) int64 {
	if c.last == nil {
		c.last = map[int]int64{}
	}
	ms := t.UnixMilli()
	if l, ok := c.last[sensor]; ok && ms <= l {
		ms = l + 1
	}
	c.last[sensor] = ms
	return ms
}
