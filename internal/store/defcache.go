package store

import (
	"sync"

	"github.com/hopper-ci/hopper/internal/queue"
)

// definitionCache keeps decoded task definitions by taskId, each with the
// exact stored text it was decoded from. It holds at most max entries and,
// when full, drops an arbitrary half (map order): simple, and the working
// set of a busy queue (tasks being created, claimed and resolved) refills
// it at once.
type definitionCache struct {
	max int

	mu      sync.Mutex
	entries map[string]cachedDefinition
}

type cachedDefinition struct {
	raw  string
	task queue.Task
}

func (c *definitionCache) get(taskID, raw string) (queue.Task, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[taskID]
	if !ok || e.raw != raw {
		return queue.Task{}, false
	}
	return e.task, true
}

func (c *definitionCache) put(taskID, raw string, task queue.Task) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = make(map[string]cachedDefinition)
	}
	if len(c.entries) >= c.max {
		n := 0
		for k := range c.entries {
			delete(c.entries, k)
			if n++; n >= c.max/2 {
				break
			}
		}
	}
	c.entries[taskID] = cachedDefinition{raw: raw, task: task}
}
