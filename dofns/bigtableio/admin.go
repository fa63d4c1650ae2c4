// Bigtable's set-up. This file prepares Bigtable before a run: it checks that Bigtable
// can be reached and creates the spec's tables, families and GC policies
// when they are missing. Every admin call is retried on transient errors
// under the run's retry policy (internal/retry), within the start-up
// timeout.

package bigtableio

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/coverage"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
)

// errUnreachable means Bigtable did not answer.
var errUnreachable = errors.New("bigtable unreachable")

// EnsureTables checks every table of spec. Missing tables and families are
// created when create is true, and reported as errors otherwise. Each call
// is retried on transient errors until timeout.
func EnsureTables(ctx context.Context, project, instance string, spec *schemas.Spec, create bool, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ac, err := bigtable.NewAdminClient(ctx, project, instance)
	if err != nil {
		return fmt.Errorf("bigtable admin client: %w (for a local emulator set BIGTABLE_EMULATOR_HOST=host:port; for Cloud Bigtable run gcloud auth application-default login)", err)
	}
	defer ac.Close()
	for i, t := range spec.Bigtable.Tables {
		if i == 0 && spec.Rollup != nil && spec.Rollup.Family != "" && !hasFamily(t, spec.Rollup.Family) {
			// The hourly rollups live in the first table's rows, in a
			// family of their own (no GC rule: one version per firing
			// time, rewritten in place).
			t.Families = append(append([]schemas.FamilySpec(nil), t.Families...), schemas.FamilySpec{Name: spec.Rollup.Family})
		}
		if err := ensureTable(ctx, ac, t, create, timeout); err != nil {
			return err
		}
	}
	if t, ok := coverage.InventoryTable(spec); ok {
		return ensureTable(ctx, ac, t, create, timeout)
	}
	return nil
}

// EnsureMarksTable checks the table of spec's BigQuery marks
// (hours.MarksTable, one family hours.MarksFamily), creating what is
// missing when create is true. ok is false when it is missing and create
// false: a batch then keeps no marks, and sends every BigQuery row of a
// stored hour again.
func EnsureMarksTable(ctx context.Context, project, instance string, spec *schemas.Spec, create bool, timeout time.Duration) (ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ac, err := bigtable.NewAdminClient(ctx, project, instance)
	if err != nil {
		return false, fmt.Errorf("bigtable admin client: %w", err)
	}
	defer ac.Close()
	t := schemas.TableSpec{Name: hours.MarksTable(spec), Families: []schemas.FamilySpec{{Name: hours.MarksFamily}}}
	err = ensureTable(ctx, ac, t, create, timeout)
	if _, missing := errors.AsType[*missingError](err); missing {
		return false, nil
	}
	return err == nil, err
}

// missingError is ensureTable's error for a table or family that is
// missing and may not be created.
type missingError struct{ msg string }

func (e *missingError) Error() string { return e.msg }

func hasFamily(t schemas.TableSpec, name string) bool {
	for _, f := range t.Families {
		if f.Name == name {
			return true
		}
	}
	return false
}

// Where names the Bigtable the client reaches, for messages.
func Where() string {
	if h := os.Getenv("BIGTABLE_EMULATOR_HOST"); h != "" {
		return "the emulator at " + h
	}
	return "Cloud Bigtable"
}

func ensureTable(ctx context.Context, ac *bigtable.AdminClient, t schemas.TableSpec, create bool, timeout time.Duration) error {
	// Each call retried on transient errors; ctx bounds them all.
	call := func(fn func(context.Context) error) error {
		return retry.Do(ctx, retry.Policy{Deadline: timeout, AttemptTimeout: timeout}, fn)
	}
	var info *bigtable.TableInfo
	err := call(func(ctx context.Context) (err error) {
		info, err = ac.TableInfo(ctx, t.Name)
		return err
	})
	switch {
	case status.Code(err) == codes.NotFound:
		if !create {
			return &missingError{fmt.Sprintf("bigtable table %q does not exist: create it (cbt createtable %s) or run with --create_tables=true", t.Name, t.Name)}
		}
		err := call(func(ctx context.Context) error {
			if err := ac.CreateTable(ctx, t.Name); status.Code(err) != codes.AlreadyExists {
				return err
			}
			return nil
		})
		if err != nil {
			return unreachable(fmt.Sprintf("create table %s", t.Name), timeout, err)
		}
		info = &bigtable.TableInfo{}
	case err != nil:
		return unreachable("bigtable table "+t.Name, timeout, err)
	}
	have := map[string]bool{}
	for _, f := range info.FamilyInfos {
		have[f.Name] = true
	}
	for _, fam := range t.Families {
		if have[fam.Name] {
			continue
		}
		if !create {
			return &missingError{fmt.Sprintf("bigtable table %q has no column family %q: create it (cbt createfamily %s %s) or run with --create_tables=true", t.Name, fam.Name, t.Name, fam.Name)}
		}
		err := call(func(ctx context.Context) error {
			if err := ac.CreateColumnFamily(ctx, t.Name, fam.Name); status.Code(err) != codes.AlreadyExists {
				return err
			}
			return nil
		})
		if err != nil {
			return unreachable(fmt.Sprintf("create family %s:%s", t.Name, fam.Name), timeout, err)
		}
		if p := gCPolicy(fam.GC); p != nil {
			if err := call(func(ctx context.Context) error { return ac.SetGCPolicy(ctx, t.Name, fam.Name, p) }); err != nil {
				return unreachable(fmt.Sprintf("gc policy %s:%s", t.Name, fam.Name), timeout, err)
			}
		}
	}
	return nil
}

// unreachable words a failed admin call: errUnreachable when Bigtable did
// not answer (the retries ran out, or the start-up timeout passed).
func unreachable(what string, timeout time.Duration, err error) error {
	if errors.Is(err, retry.ErrExhausted) || errors.Is(err, context.DeadlineExceeded) || retry.Retryable(err) {
		return fmt.Errorf("%w: %s: no answer from %s within %v (--startup_timeout): %w", errUnreachable, what, Where(), timeout, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// gCPolicy converts a spec GC policy; nil means keep everything.
func gCPolicy(gc *schemas.GCSpec) bigtable.GCPolicy {
	if gc == nil {
		return nil
	}
	var ps []bigtable.GCPolicy
	if gc.MaxVersions > 0 {
		ps = append(ps, bigtable.MaxVersionsPolicy(gc.MaxVersions))
	}
	if gc.MaxAge != "" {
		if d, err := time.ParseDuration(gc.MaxAge); err == nil && d > 0 {
			ps = append(ps, bigtable.MaxAgePolicy(d))
		}
	}
	switch len(ps) {
	case 0:
		return nil
	case 1:
		return ps[0]
	}
	return bigtable.UnionPolicy(ps...)
}
