package store

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
)

func TestDefinitionCache(t *testing.T) {
	t.Parallel()
	c := definitionCache{max: 4}
	_, ok := c.get("a", `{"x":1}`)
	require.False(t, ok)
	c.put("a", `{"x":1}`, queue.Task{SchedulerID: "one"})
	got, ok := c.get("a", `{"x":1}`)
	require.True(t, ok)
	require.Equal(t, "one", got.SchedulerID)
	// A different stored text (a task re-created under the same id after
	// expiry) is never answered from the cache.
	_, ok = c.get("a", `{"x":2}`)
	require.False(t, ok)
	for i := range 10 {
		c.put(fmt.Sprint(i), "{}", queue.Task{})
		require.LessOrEqual(t, len(c.entries), 4)
	}
}

func TestDefinitionCacheRuns(t *testing.T) {
	t.Parallel()
	c := definitionCache{max: 4}
	runs := []queue.Run{{RunID: 0, State: queue.StatePending}}
	c.putRuns("a", "r1", runs)
	_, ok := c.getRuns("a", "r1")
	require.False(t, ok, "runs are kept only for tasks whose definition is cached")

	c.put("a", "{}", queue.Task{})
	c.putRuns("a", "r1", runs)
	runs[0].State = queue.StateRunning // the caller's slice is not the cache's
	got, ok := c.getRuns("a", "r1")
	require.True(t, ok)
	require.Equal(t, queue.StatePending, got[0].State)
	got[0].State = queue.StateFailed // nor is the one handed out
	again, _ := c.getRuns("a", "r1")
	require.Equal(t, queue.StatePending, again[0].State)

	_, ok = c.getRuns("a", "r2")
	require.False(t, ok, "other stored runs (written by another process) are decoded")
	c.put("a", "{}", queue.Task{SchedulerID: "x"}) // the definition refreshed keeps the runs
	_, ok = c.getRuns("a", "r1")
	require.True(t, ok)
}
