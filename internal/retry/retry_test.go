package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/retry"
)

var (
	errFlaky = errors.New("flaky")
	errFinal = errors.New("final")
	errEnded = errors.New("ended")
)

func TestDo(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, tc := range []struct {
		name     string
		policy   retry.Policy
		results  []error // what call n returns; past the end, errFlaky
		wakeFail int     // the wait (from 1) that ends early; 0: none
		calls    int
		waits    []time.Duration
		err      error // errors.Is of the result
		msg      string
	}{
		{name: "first call succeeds", policy: retry.Policy{Attempts: 3, Delay: retry.Doubling(ms, 0)},
			results: []error{nil}, calls: 1},
		{name: "succeeds on the third", policy: retry.Policy{Attempts: 5, Delay: retry.Doubling(200*ms, 0)},
			results: []error{errFlaky, errFlaky, nil}, calls: 3, waits: []time.Duration{200 * ms, 400 * ms}},
		{name: "attempts run out: no wait after the last", policy: retry.Policy{Attempts: 3, Delay: retry.Doubling(500*ms, 0)},
			calls: 3, waits: []time.Duration{500 * ms, 1000 * ms}, err: errFlaky, msg: "flaky"},
		{name: "one attempt", policy: retry.Policy{Attempts: 1, Delay: retry.Doubling(ms, 0)},
			calls: 1, err: errFlaky},
		{name: "stop ends at once and is unwrapped", policy: retry.Policy{Attempts: 5, Delay: retry.Doubling(ms, 0)},
			results: []error{errFlaky, retry.Stop(errFinal)}, calls: 2, waits: []time.Duration{ms}, err: errFinal, msg: "final"},
		{name: "unbounded until success, capped delay", policy: retry.Policy{Delay: retry.Doubling(100*ms, 500*ms)},
			results: []error{errFlaky, errFlaky, errFlaky, errFlaky, errFlaky, nil}, calls: 6,
			waits: []time.Duration{100 * ms, 200 * ms, 400 * ms, 500 * ms, 500 * ms}},
		{name: "linear delay", policy: retry.Policy{Attempts: 4, Delay: func(n int) time.Duration { return time.Duration(n+1) * 300 * ms }},
			calls: 4, waits: []time.Duration{300 * ms, 600 * ms, 900 * ms}, err: errFlaky},
		{name: "no delay", policy: retry.Policy{Attempts: 3}, calls: 3, waits: []time.Duration{0, 0}, err: errFlaky},
		{name: "wait cut short", policy: retry.Policy{Attempts: 5, Delay: retry.Doubling(ms, 0)},
			wakeFail: 2, calls: 2, waits: []time.Duration{ms, 2 * ms}, err: errEnded, msg: "ended (while retrying after: flaky)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var waits []time.Duration
			p := tc.policy
			p.Sleep = func(_ context.Context, d time.Duration) error {
				waits = append(waits, d)
				if len(waits) == tc.wakeFail {
					return errEnded
				}
				return nil
			}
			calls := 0
			err := retry.Do(context.Background(), p, func(n int) error {
				require.Equal(t, calls, n, "calls are numbered from 0")
				calls++
				if n < len(tc.results) {
					return tc.results[n]
				}
				return errFlaky
			})
			require.Equal(t, tc.calls, calls)
			require.Equal(t, tc.waits, waits)
			if tc.err == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.err)
			if tc.msg != "" {
				require.EqualError(t, err, tc.msg)
			}
		})
	}
}

func TestInterruptedBy(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := retry.Do(ctx, retry.Policy{Attempts: 3, Delay: retry.Doubling(time.Hour, 0)}, func(int) error { return errFlaky })
	var ie *retry.InterruptedError
	require.ErrorAs(t, err, &ie)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, errFlaky, ie.Last)
}

func TestDoubling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		first, most time.Duration
		n           int
		want        time.Duration
	}{
		{time.Second, 0, 0, time.Second},
		{time.Second, 0, 3, 8 * time.Second},
		{time.Second, 10 * time.Second, 3, 8 * time.Second},
		{time.Second, 10 * time.Second, 4, 10 * time.Second},
		{time.Second, 10 * time.Second, 1000, 10 * time.Second},
		{time.Second, 0, 1000, 0}, // only checked not to overflow
	} {
		got := retry.Doubling(tc.first, tc.most)(tc.n)
		require.Positive(t, got, "%v %v %d", tc.first, tc.most, tc.n)
		if tc.n < 100 {
			require.Equal(t, tc.want, got, "%v %v %d", tc.first, tc.most, tc.n)
		}
	}
}

func TestSleep(t *testing.T) {
	t.Parallel()
	require.NoError(t, retry.Sleep(context.Background(), 0))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, retry.Sleep(ctx, time.Hour), context.Canceled)
}
