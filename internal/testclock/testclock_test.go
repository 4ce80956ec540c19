package testclock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/testclock"
)

var (
	_ queue.Clock = (*testclock.Clock)(nil)
	_ queue.Clock = (*testclock.Shifted)(nil)
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
