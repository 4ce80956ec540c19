package testclock

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// WaitFor is the tests' wait on a condition, in place of a time.Sleep
// that hopes something has happened: it calls cond until it reports true
// and fails t, naming what it waited for, if timeout passes first. cond
// runs in the calling goroutine, so it may use require. The timeout only
// stops a test that would otherwise hang, never measures speed: make it
// generous, a passing test does not wait for it.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := Poll(context.Background(), timeout, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Poll is WaitFor for code without a testing.TB (a TestMain, a harness
// that returns errors): it returns nil once cond holds, or an error when
// timeout passes or ctx ends first. The first look is immediate; later
// ones back off from a millisecond to a tenth of a second, so a condition
// met at once costs nothing and a long wait costs few looks.
func Poll(ctx context.Context, timeout time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	gap := time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		if cond() {
			return nil
		}
		timer.Reset(gap)
		select {
		case <-ctx.Done():
			// One last look: the condition may have become true while the
			// timer ran.
			if cond() {
				return nil
			}
			return fmt.Errorf("still not so after %s: %w", timeout, context.Cause(ctx))
		case <-timer.C:
		}
		gap = min(2*gap, 100*time.Millisecond)
	}
}
