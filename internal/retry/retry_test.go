package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"syscall"
	"testing"
	"time"

	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"unavailable", status.Error(codes.Unavailable, "connection refused"), true},
		{"wrapped unavailable", fmt.Errorf("apply bulk: %w", status.Error(codes.Unavailable, "x")), true},
		{"deadline exceeded status", status.Error(codes.DeadlineExceeded, "x"), true},
		{"resource exhausted", status.Error(codes.ResourceExhausted, "quota"), true},
		{"aborted", status.Error(codes.Aborted, "x"), true},
		{"internal: a broken stream", status.Error(codes.Internal, "stream terminated by RST_STREAM with error code: INTERNAL_ERROR"), true},
		{"internal: a bad request (the Bigtable emulator's answer)", status.Error(codes.Internal, `unknown family "nope"`), false},
		{"unknown transport failure", status.Error(codes.Unknown, "transport is closing"), true},
		{"invalid argument", status.Error(codes.InvalidArgument, "bad row"), false},
		{"not found", status.Error(codes.NotFound, "no table"), false},
		{"permission denied", status.Error(codes.PermissionDenied, "x"), false},
		{"failed precondition", status.Error(codes.FailedPrecondition, "x"), false},
		{"attempt timeout", fmt.Errorf("read: %w", context.DeadlineExceeded), true},
		{"cancelled run", context.Canceled, false},
		{"http 503", &googleapi.Error{Code: 503}, true},
		{"http 429", &googleapi.Error{Code: 429}, true},
		{"http 400", &googleapi.Error{Code: 400}, false},
		{"http 404", &googleapi.Error{Code: 404}, false},
		{"connection dropped", io.ErrUnexpectedEOF, true},
		{"connection refused", &url.Error{Op: "Post", URL: "http://x", Err: syscall.ECONNREFUSED}, true},
		{"plain error", errors.New("row too large"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Retryable(tc.err); got != tc.want {
				t.Errorf("Retryable(%v) = %v; want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestDoRetriesTransientErrorsUntilSuccess(t *testing.T) {
	calls := 0
	err := Do(context.Background(), Policy{Initial: time.Millisecond, Deadline: time.Minute}, func(context.Context) error {
		calls++
		if calls < 3 {
			return status.Error(codes.Unavailable, "down")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Do = %v after %d calls; want nil after 3", err, calls)
	}
}

func TestDoStopsAtAPermanentError(t *testing.T) {
	calls := 0
	perm := status.Error(codes.InvalidArgument, "bad")
	err := Do(context.Background(), Policy{Initial: time.Millisecond}, func(context.Context) error {
		calls++
		return perm
	})
	if !errors.Is(err, perm) || errors.Is(err, ErrExhausted) || calls != 1 {
		t.Fatalf("Do = %v after %d calls; want the permanent error after 1", err, calls)
	}
}

func TestDoGivesUpAtTheDeadline(t *testing.T) {
	down := status.Error(codes.Unavailable, "down")
	calls := 0
	err := Do(context.Background(), Policy{Initial: time.Millisecond, Max: 5 * time.Millisecond, Deadline: 50 * time.Millisecond}, func(context.Context) error {
		calls++
		return down
	})
	if !errors.Is(err, ErrExhausted) || !errors.Is(err, down) {
		t.Fatalf("Do = %v; want ErrExhausted wrapping the last error", err)
	}
	if calls < 2 {
		t.Errorf("%d calls; want several within the deadline", calls)
	}
}

func TestAttemptTimeoutEndsAnAttemptThatNeverAnswers(t *testing.T) {
	calls := 0
	err := Do(context.Background(), Policy{Initial: time.Millisecond, Deadline: time.Minute, AttemptTimeout: 20 * time.Millisecond}, func(ctx context.Context) error {
		calls++
		if calls == 1 {
			<-ctx.Done() // the answer never comes
			return ctx.Err()
		}
		return nil
	})
	if err != nil || calls != 2 {
		t.Fatalf("Do = %v after %d calls; want the second attempt to succeed", err, calls)
	}
}

func TestDoReturnsWhenTheRunIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := Do(ctx, Policy{Initial: time.Millisecond, Deadline: time.Hour}, func(context.Context) error {
		calls++
		cancel()
		return status.Error(codes.Unavailable, "down")
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Fatalf("Do = %v after %d calls; want context.Canceled after 1", err, calls)
	}
}

func TestBreakerGivesOneAttemptWhileTheStoreIsDown(t *testing.T) {
	var br Breaker
	down := status.Error(codes.Unavailable, "down")
	p := Policy{Initial: time.Millisecond, Max: time.Millisecond, Deadline: 30 * time.Millisecond}
	calls := 0
	err := Do(context.Background(), br.Policy(p), func(context.Context) error { calls++; return down })
	br.Record(err)
	if !br.Open() || calls < 2 {
		t.Fatalf("after a whole deadline (%d calls): open = %v; want open", calls, br.Open())
	}
	calls = 0
	err = Do(context.Background(), br.Policy(p), func(context.Context) error { calls++; return down })
	if calls != 1 || !errors.Is(err, ErrExhausted) {
		t.Fatalf("while open: %d calls, %v; want 1 call and ErrExhausted", calls, err)
	}
	br.Record(Do(context.Background(), br.Policy(p), func(context.Context) error { return nil }))
	if br.Open() {
		t.Fatal("a success did not close the breaker")
	}
}
