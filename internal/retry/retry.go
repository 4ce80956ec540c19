// Package retry is the one loop that calls an operation again after a
// failure, waiting between calls: the client's API calls and uploads, the
// worker's downloads, image pulls, reclaims, proxied calls and task users,
// the live relay's reconnections, and the store's contended transactions,
// raced object creates and PostgreSQL listener each say only how often,
// how long to wait and which errors are final. It is a leaf every side may use; its
// waits go through an injectable sleep, so tests of a policy do not sleep.
package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Policy says how an operation is tried again.
type Policy struct {
	// Attempts bounds the calls; zero or less: no bound (the loop ends
	// when the operation succeeds, stops or ctx ends).
	Attempts int
	// Delay is the wait after failed call n (counted from 0); nil: none.
	Delay func(n int) time.Duration
	// Sleep waits d, or until ctx ends and then returns a non-nil error;
	// nil: the package's Sleep (a timer).
	Sleep func(ctx context.Context, d time.Duration) error
}

// Do calls f with the call's number (from 0) until it returns nil, returns
// an error wrapped by Stop, or has been called p.Attempts times, and
// returns f's last error (unwrapped from Stop). When a wait between calls
// is cut short it returns an *InterruptedError.
func Do(ctx context.Context, p Policy, f func(n int) error) error {
	sleep := p.Sleep
	if sleep == nil {
		sleep = Sleep
	}
	for n := 0; ; n++ {
		err := f(n)
		var stop *stopError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &stop):
			return stop.err
		case p.Attempts > 0 && n+1 >= p.Attempts:
			return err
		}
		var d time.Duration
		if p.Delay != nil {
			d = p.Delay(n)
		}
		if serr := sleep(ctx, d); serr != nil {
			return &InterruptedError{Err: serr, Last: err}
		}
	}
}

// Stop marks err as final: Do returns it (err itself) without calling
// again. Stop(nil) is nil.
func Stop(err error) error {
	if err == nil {
		return nil
	}
	return &stopError{err: err}
}

type stopError struct{ err error }

func (e *stopError) Error() string { return e.err.Error() }
func (e *stopError) Unwrap() error { return e.err }

// InterruptedError is Do's error when its wait before another call ended
// early: Err is why (ctx's error), Last the failure it was waiting to retry.
type InterruptedError struct{ Err, Last error }

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("%v (while retrying after: %v)", e.Err, e.Last)
}

// Unwrap gives the reason the wait ended, so errors.Is(err,
// context.Canceled) holds for a cancelled wait.
func (e *InterruptedError) Unwrap() error { return e.Err }

// Doubling is a Delay of first after the first failure, doubling after
// each further one up to most (most zero or less: no ceiling).
func Doubling(first, most time.Duration) func(n int) time.Duration {
	return func(n int) time.Duration {
		d := first
		for i := 0; i < n && (most <= 0 || d < most) && d <= math.MaxInt64/2; i++ {
			d *= 2
		}
		if most > 0 {
			d = min(d, most)
		}
		return d
	}
}

// Sleep waits d, or until ctx ends (then it returns ctx's error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
