package bench

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// ReadingMutations calls emit with one Bigtable mutation per reading of
// rm (its Origins: the cells each reading sets), each with rm's row key,
// as a plain writer without Beam sends them: one ApplyBulk entry per
// reading. It stops at emit's first error and returns it.
func ReadingMutations(rm hours.RowMutation, emit func(key string, m *bigtable.Mutation) error) error {
	next := 0
	for _, o := range rm.Origins {
		m := bigtable.NewMutation()
		for _, c := range rm.Cells[next : next+o.Cells] {
			m.Set(c.Family, c.Qualifier, bigtable.Timestamp(c.TsMicros), c.Value)
		}
		next += o.Cells
		if err := emit(rm.RowKey, m); err != nil {
			return err
		}
	}
	return nil
}

// ApplyBulk writes keys and muts in one ApplyBulk call and returns its
// error or the first entry's.
func ApplyBulk(ctx context.Context, tbl *bigtable.Table, keys []string, muts []*bigtable.Mutation) error {
	errs, err := tbl.ApplyBulk(ctx, keys, muts)
	if err != nil {
		return fmt.Errorf("apply bulk: %w", err)
	}
	for _, e := range errs {
		if e != nil {
			return fmt.Errorf("apply bulk entry: %w", e)
		}
	}
	return nil
}

// SelfCPU is the user+system CPU this process has used, in seconds.
func SelfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
