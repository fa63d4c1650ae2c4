package coverage

import (
	"time"

	"github.com/sensorpipe/sensorpipe/schemas"
)

// Coverage column names of a rollup, in Bigtable (qualifiers of the rollup
// family) and BigQuery (columns of the rollup table). A spec with a
// cadence has them; one without has neither the cells nor the columns.
const (
	RollupExpected    = "expected"
	RollupCoverage    = "coverage"
	RollupGaps        = "gaps"
	RollupLongestGapS = "longest_gap_s"
)

// Coverage is how complete one identity's hour is against its cadence.
// The definitions, for the hour [start, end), the cadence c, the distinct
// event times t1 < … < tn of the hour's readings (after deduplication)
// and the sensor's first-seen time F (its earliest reading known, at most
// t1):
//
//   - The hour is the sensor's first when F ≥ start.
//   - Expected is (end − start) / c, or (end − t1) / c in the sensor's
//     first hour, unrounded.
//   - Coverage is n / Expected, capped at 1.
//   - The intervals are t(i+1) − t(i) for each pair of consecutive
//     readings, end − tn (the hour's end edge), and t1 − start (its start
//     edge) unless it is the sensor's first hour, when the sensor was not
//     reporting yet at the start. Gaps counts the intervals longer than
//     2 × c; LongestGapS is the longest of those in seconds, 0 when there
//     is none.
type Coverage struct {
	Expected    float64
	Coverage    float64
	Gaps        int64
	LongestGapS float64
}

// ComputeCoverage computes the coverage of an hour [startMs, endMs) whose
// readings have the event times ms, in ascending order and distinct, for
// a cadence and the sensor's first-seen time firstSeenMs (0 or later than
// ms[0]: the hour's first reading). ok is false without a reading or a
// positive cadence.
func ComputeCoverage(ms []int64, startMs, endMs int64, cadence time.Duration, firstSeenMs int64) (Coverage, bool) {
	c := cadence.Milliseconds()
	if len(ms) == 0 || c <= 0 || endMs <= startMs {
		return Coverage{}, false
	}
	first, last := ms[0], ms[len(ms)-1]
	if firstSeenMs <= 0 || firstSeenMs > first {
		firstSeenMs = first
	}
	firstHour := firstSeenMs >= startMs
	span := endMs - startMs
	if firstHour {
		span = endMs - first
	}
	var cov Coverage
	cov.Expected = float64(span) / float64(c)
	if cov.Expected > 0 {
		cov.Coverage = min(1, float64(len(ms))/cov.Expected)
	} else {
		cov.Coverage = 1
	}
	var longest int64
	gap := func(d int64) {
		if d > 2*c {
			cov.Gaps++
			longest = max(longest, d)
		}
	}
	if !firstHour {
		gap(first - startMs)
	}
	for i := 1; i < len(ms); i++ {
		gap(ms[i] - ms[i-1])
	}
	gap(endMs - last)
	cov.LongestGapS = float64(longest) / 1000
	return cov, true
}

// HourCadence is the cadence that applies to an identity's hour whose
// readings are recs (in event-time order): the spec's cadence, or with
// cadence_field the interval of the hour's latest reading that carries a
// positive one. ok is false when none applies.
func HourCadence(s *schemas.Spec, recs []schemas.Record) (time.Duration, bool) {
	if d := s.CadenceDuration(); d > 0 {
		return d, true
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if d, ok := ReadingCadence(s, &recs[i]); ok {
			return d, true
		}
	}
	return 0, false
}

// HourCoverage is the coverage of the prepared readings recs (deduplicated,
// in event-time order, as group.Prepare returns them) of one identity's hour
// [startMs, endMs), given the sensor's first-seen time (see Coverage; 0
// when no earlier reading is known). It is nil when the spec declares no
// cadence or none applies to the hour.
func HourCoverage(s *schemas.Spec, recs []schemas.Record, startMs, endMs, firstSeenMs int64) *Coverage {
	if !s.HasCadence() || len(recs) == 0 {
		return nil
	}
	d, ok := HourCadence(s, recs)
	if !ok {
		return nil
	}
	ms := make([]int64, 0, len(recs))
	for i := range recs {
		if n := len(ms); n == 0 || recs[i].EventMs != ms[n-1] {
			ms = append(ms, recs[i].EventMs)
		}
	}
	cov, ok := ComputeCoverage(ms, startMs, endMs, d, firstSeenMs)
	if !ok {
		return nil
	}
	return &cov
}
