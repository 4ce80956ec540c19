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
