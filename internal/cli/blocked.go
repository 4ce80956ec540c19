package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// depNode is what the blocked rule needs to know of one task.
type depNode struct {
	ID, Name, State string
	// Requires is the task's `requires` ("" means all-completed).
	Requires string
	Deps     []string
}

// maxDepLookups bounds the statuses one command fetches to explain why
// tasks wait, however many dependencies they name.
const maxDepLookups = 100

// blockedBy finds the unscheduled tasks of nodes that can never run: a
// task that needs all its dependencies completed (requires all-completed,
// the default) and has a dependency that failed or ended in exception, or
// one that is itself blocked, waits until its deadline and then resolves
// exception, unless that dependency is rerun and completes. A task with
// requires all-resolved is never blocked: a blocked dependency resolves at
// its deadline, and then it runs. The answer maps each blocked task to the
// dependency that blocks it; unknown dependencies block nothing.
func blockedBy(nodes map[string]depNode) map[string]string {
	blocked := map[string]string{}
	for changed := true; changed; {
		changed = false
		for id, n := range nodes {
			if _, done := blocked[id]; done || n.State != tcclient.StateUnscheduled || n.Requires == "all-resolved" {
				continue
			}
			for _, d := range n.Deps {
				dep, ok := nodes[d]
				if d == id || !ok {
					continue
				}
				_, depBlocked := blocked[d]
				if dep.State == tcclient.StateFailed || dep.State == tcclient.StateException || depBlocked {
					blocked[id] = d
					changed = true
					break
				}
			}
		}
	}
	return blocked
}

// blockReason says in a few words why dep blocks its dependents.
func blockReason(nodes map[string]depNode, blocked map[string]string, dep string) string {
	n := nodes[dep]
	label := dep
	if n.Name != "" && n.Name != dep {
		label = dep + " (" + truncate(n.Name, 40) + ")"
	}
	if by, ok := blocked[dep]; ok {
		return label + ", which is blocked by " + by
	}
	return label + ", which " + n.State
}

// lookUpDeps adds to nodes the dependencies (and, for unscheduled ones,
// their dependencies) of the unscheduled tasks already in nodes, fetching
// at most maxDepLookups tasks; a dependency that cannot be read is left
// out, and so blocks nothing.
func (a *app) lookUpDeps(ctx context.Context, nodes map[string]depNode, cache map[string]depNode) {
	fetched := 0
	for changed := true; changed && fetched < maxDepLookups; {
		changed = false
		var want []string
		for _, n := range nodes {
			if n.State != tcclient.StateUnscheduled || n.Requires == "all-resolved" {
				continue
			}
			for _, d := range n.Deps {
				if _, ok := nodes[d]; !ok {
					want = append(want, d)
				}
			}
		}
		for _, d := range want {
			if _, ok := nodes[d]; ok {
				continue
			}
			if c, ok := cache[d]; ok {
				nodes[d] = c
				changed = true
				continue
			}
			if fetched >= maxDepLookups {
				break
			}
			fetched++
			st, err := a.client.Status(ctx, d)
			if err != nil {
				continue
			}
			n := depNode{ID: d, State: st.State}
			if def, err := a.client.Task(ctx, d); err == nil {
				n.Name, n.Requires, n.Deps = def.Metadata.Name, def.Requires, def.Dependencies
			}
			nodes[d] = n
			if isResolved(n.State) && cache != nil {
				cache[d] = n // a resolved task's state changes only by a rerun
			}
			changed = true
		}
	}
}

// printBlocked tells, under a task's status, that it will not run and why.
func (a *app) printBlocked(ctx context.Context, w io.Writer, st *tcclient.TaskStatus, def *tcclient.TaskDefinition) error {
	if st.State != tcclient.StateUnscheduled || def == nil {
		return nil
	}
	nodes := map[string]depNode{st.TaskID: {ID: st.TaskID, Name: def.Metadata.Name, State: st.State, Requires: def.Requires, Deps: def.Dependencies}}
	a.lookUpDeps(ctx, nodes, nil)
	blocked := blockedBy(nodes)
	by, ok := blocked[st.TaskID]
	if !ok {
		return nil
	}
	_, err := fmt.Fprintf(w, "\nBlocked by %s: this task needs all its dependencies completed, so it will not run unless that task is rerun and completes; otherwise it resolves exception at its deadline (%s).\n",
		blockReason(nodes, blocked, by), st.Deadline.String())
	return err
}
