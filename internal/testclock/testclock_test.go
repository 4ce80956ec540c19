package testclock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/clock"
	"github.com/hopper-ci/hopper/internal/testclock"
)

var (
	_ clock.Clock = (*testclock.Clock)(nil)
	_ clock.Clock = (*testclock.Shifted)(nil)
)

func TestClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c := testclock.New(start)
	require.Equal(t, start, c.Now())
	require.Equal(t, start.Add(time.Minute), c.Advance(time.Minute))
	require.Equal(t, start.Add(time.Minute), c.Now())
	c.Advance(-2 * time.Minute)
	require.Equal(t, start.Add(-time.Minute), c.Now())
	c.Set(start)
	require.Equal(t, start, c.Now())
	require.True(t, (&testclock.Clock{}).Now().IsZero())
}

func TestShifted(t *testing.T) {
	t.Parallel()
	var c testclock.Shifted
	require.WithinDuration(t, time.Now(), c.Now(), time.Minute)
	require.Equal(t, time.UTC, c.Now().Location())
	c.Advance(time.Hour)
	require.WithinDuration(t, time.Now().Add(time.Hour), c.Now(), time.Minute)
}

func TestClockConcurrent(t *testing.T) {
	t.Parallel()
	c := testclock.New(time.Unix(0, 0))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				c.Advance(time.Millisecond)
				_ = c.Now()
			}
		}()
	}
	wg.Wait()
	require.Equal(t, time.Unix(0, 0).Add(800*time.Millisecond), c.Now())
}

func TestPoll(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		holdsAt int // the look at which cond first holds; 0: never
		wantErr bool
	}{
		{"at once", 1, false},
		{"after a few looks", 5, false},
		{"never", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			looks := 0
			err := testclock.Poll(context.Background(), 200*time.Millisecond, func() bool {
				looks++
				return tt.holdsAt > 0 && looks >= tt.holdsAt
			})
			if tt.wantErr {
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.Greater(t, looks, 1, "looked more than once before giving up")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.holdsAt, looks, "stops looking once the condition holds")
		})
	}
}

func TestPollEndsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := testclock.Poll(ctx, time.Hour, func() bool { return false })
	require.ErrorIs(t, err, context.Canceled)
}

// TestWaitFor: a condition that comes true from another goroutine ends
// the wait; cond runs in the test's goroutine, so it may use require.
func TestWaitFor(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	ready := false
	go func() {
		mu.Lock()
		defer mu.Unlock()
		ready = true
	}()
	testclock.WaitFor(t, time.Minute, "the flag", func() bool {
		mu.Lock()
		defer mu.Unlock()
		require.NotNil(t, &ready)
		return ready
	})
}
