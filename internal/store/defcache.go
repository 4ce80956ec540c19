package store

import (
	"slices"
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
	// runsRaw and runs are the task's runs as last written by this
	// process: the next transition usually reads exactly those back.
	runsRaw string
	runs    []queue.Run
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
	e := c.entries[taskID]
	e.raw, e.task = raw, task
	c.entries[taskID] = e
}

// getRuns returns a copy of the runs cached for the task if raw is the
// exact text they were encoded as.
func (c *definitionCache) getRuns(taskID, raw string) ([]queue.Run, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[taskID]
	if !ok || e.runs == nil || e.runsRaw != raw {
		return nil, false
	}
	// A copy: transitions change the runs of the state they are given
	// (Run holds no pointer the state machine writes through).
	return slices.Clone(e.runs), true
}

// putRuns records the runs just encoded as raw for a task whose definition
// is cached (a task not cached is not worth an entry).
func (c *definitionCache) putRuns(taskID, raw string, runs []queue.Run) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[taskID]
	if !ok {
		return
	}
	e.runsRaw, e.runs = raw, slices.Clone(runs)
	c.entries[taskID] = e
}
