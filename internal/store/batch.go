package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/hopper-ci/hopper/internal/queue"
)

// errNotRun is what a combined call reports if its batch never got to it
// (the batch panicked).
var errNotRun = errors.New("store: the batch holding this call did not run")

// updateCall is one UpdateTask waiting to be run, alone or in a batch.
type updateCall struct {
	ctx context.Context
	p   UpdateTaskParams
	res *Result
	err error
}

// UpdateTask implements Store. Concurrent calls share a transaction when
// the database is busy (see combiner); each call's change is still all or
// nothing, and a call's error leaves its task as it was.
func (db *DB) UpdateTask(ctx context.Context, p UpdateTaskParams) (*Result, error) {
	if db.updates == nil {
		return db.updateTaskAlone(ctx, p)
	}
	call := &updateCall{ctx: ctx, p: p, err: errNotRun}
	db.updates.do(call)
	return call.res, call.err
}

// updateTaskAlone runs one UpdateTask in a transaction of its own.
func (db *DB) updateTaskAlone(ctx context.Context, p UpdateTaskParams) (*Result, error) {
	call := &updateCall{ctx: ctx, p: p}
	var finish func()
	err := db.tx(ctx, func(tx *txn) error {
		var err error
		finish, err = tx.updateBatch(ctx, []*updateCall{call})
		return err
	})
	if err != nil {
		return nil, err
	}
	finish()
	if call.err != nil {
		return nil, call.err
	}
	return call.res, nil
}

// runUpdates runs a batch of UpdateTask calls in one transaction. A call
// for a task already in the batch waits for a batch of its own; if the
// shared transaction fails as a whole (a deadlock, a lost connection), every
// call is re-run alone, so one call's trouble never becomes another's.
func (db *DB) runUpdates(calls []*updateCall) {
	var batch, later []*updateCall
	seen := make(map[string]bool, len(calls))
	for _, c := range calls {
		if seen[c.p.TaskID] {
			later = append(later, c)
			continue
		}
		seen[c.p.TaskID] = true
		batch = append(batch, c)
	}
	if len(batch) == 1 {
		later = append(batch, later...)
	} else {
		// The batch outlives any one caller: the others' changes ride on it.
		ctx := context.WithoutCancel(calls[0].ctx)
		var finish func()
		err := db.tryTx(ctx, func(tx *txn) error {
			var err error
			finish, err = tx.updateBatch(ctx, batch)
			return err
		})
		if err != nil {
			later = append(batch, later...)
		} else {
			finish()
			for _, c := range batch {
				if c.err != nil {
					c.res = nil
				}
			}
		}
	}
	for _, c := range later {
		c.res, c.err = db.updateTaskAlone(c.ctx, c.p)
	}
}

// updateBatch applies each call's transition to its task and queues the
// saves and their consequences; the caller commits, then calls finish to
// complete the calls' results with what was read at the commit.
//
// The common case takes two round trips: the tasks are locked and their
// dependents read together, and when no dependent becomes ready the saves
// and the task-group check go with the COMMIT.
func (t *txn) updateBatch(ctx context.Context, calls []*updateCall) (finish func(), err error) {
	ids := make([]string, len(calls))
	for i, c := range calls {
		ids[i] = c.p.TaskID
	}
	// Locked in one order, so two batches never wait on each other in a
	// cycle.
	slices.Sort(ids)
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	tasks := make(map[string]*queue.TaskState, len(calls))
	t.send(Statement{Query: "SELECT " + taskColumns + " FROM tasks WHERE task_id IN (" + placeholders(len(ids)) + ") ORDER BY task_id" + t.db.dialect.LockRow,
		Args: args, What: fmt.Sprintf("locking %d tasks", len(ids)),
		Rows: func(rows Rows) error {
			loaded, err := t.db.readTasks(rows)
			for _, task := range loaded {
				tasks[task.TaskID] = task
			}
			return err
		}})
	// Read under the locks just taken: a createTask adding an edge to one
	// of these tasks holds a share lock on it until it commits, so every
	// edge is visible here. Whether the edges are satisfied is decided once
	// the transitions are known.
	var edges []dependencyEdge
	t.send(t.dependentsOfStatement(args, &edges))
	if err := t.flush(ctx); err != nil {
		return nil, err
	}

	type saved struct {
		call          *updateCall
		before, after *queue.TaskState
	}
	var changed []saved
	for _, c := range calls {
		c.res, c.err = nil, nil
		task := tasks[c.p.TaskID]
		if task == nil {
			c.err = ErrNotFound
			continue
		}
		before := task.Clone()
		var tr queue.Transition
		if err := c.p.Apply(task, &tr); err != nil {
			// This call fails alone; its task is not saved.
			c.err = err
			continue
		}
		c.res = &Result{Task: task}
		if len(tr.Events) == 0 && runsEqual(before.Runs, task.Runs) && before.RetriesLeft == task.RetriesLeft {
			continue
		}
		c.res.Changes = append(c.res.Changes, Change{Task: task, Events: withStatus(tr.Events, task)})
		changed = append(changed, saved{call: c, before: before, after: task})
	}
	var bulk []*queue.TaskState
	for _, s := range changed {
		if d := derive(s.after); d.pending && !samePendingRun(s.before, s.after) {
			// A new pending run takes the next place in the queue: saved
			// on its own (rare in a batch: a retry after an exception).
			if err := t.saveTask(s.before, s.after); err != nil {
				return nil, err
			}
			continue
		}
		bulk = append(bulk, s.after)
	}
	if err := t.saveMany(bulk); err != nil {
		return nil, err
	}

	// The consequences of resolutions: dependents to schedule, and groups
	// left with no unresolved member (read after the saves, so this batch's
	// resolutions count).
	var resolved []saved
	var groupIDs []string
	for _, s := range changed {
		if queue.BecameResolved(s.before, s.after) {
			resolved = append(resolved, s)
			if g := s.after.Task.TaskGroupID; !slices.Contains(groupIDs, g) {
				groupIDs = append(groupIDs, g)
			}
		}
	}
	if len(resolved) == 0 {
		return func() {}, nil
	}
	groups := map[string]*TaskGroup{}
	t.send(t.batchGroupsResolvedStatement(groupIDs, groups))
	for _, s := range resolved {
		var ready []string
		state := s.after.State()
		for _, e := range edges {
			if e.required == s.after.TaskID && e.dependent != e.required && queue.DependencySatisfied(e.requires, state) {
				ready = append(ready, e.dependent)
			}
		}
		if err := t.resolveDependents(ctx, s.after, ready, s.call.p.Now, s.call.res); err != nil {
			return nil, err
		}
	}
	return func() {
		for _, s := range resolved {
			if g := groups[s.after.Task.TaskGroupID]; g != nil {
				// Reported once, with the first of the group's resolutions.
				s.call.res.Changes[0].GroupResolved = g
				delete(groups, s.after.Task.TaskGroupID)
			}
		}
	}, nil
}

// dependencyEdge is an unsatisfied edge from a dependent to the task it
// requires.
type dependencyEdge struct{ required, dependent, requires string }

// dependentsOfStatement reads the unsatisfied edges to the given tasks.
func (t *txn) dependentsOfStatement(taskIDs []any, edges *[]dependencyEdge) Statement {
	return Statement{
		Query: "SELECT required_task_id, dependent_task_id, requires FROM task_dependencies WHERE required_task_id IN (" +
			placeholders(len(taskIDs)) + ") AND satisfied = 0 ORDER BY required_task_id, dependent_task_id",
		Args: taskIDs,
		What: fmt.Sprintf("loading dependents of %d tasks", len(taskIDs)),
		Rows: func(rows Rows) error {
			for rows.Next() {
				var e dependencyEdge
				if err := rows.Scan(&e.required, &e.dependent, &e.requires); err != nil {
					return err
				}
				*edges = append(*edges, e)
			}
			return nil
		},
	}
}

// batchGroupsResolvedStatement puts into groups each of the task groups
// that has no unresolved member left.
func (t *txn) batchGroupsResolvedStatement(groupIDs []string, groups map[string]*TaskGroup) Statement {
	args := make([]any, len(groupIDs))
	for i, id := range groupIDs {
		args[i] = id
	}
	return Statement{
		Query: `SELECT task_group_id, scheduler_id, expires, sealed FROM task_groups g
		WHERE task_group_id IN (` + placeholders(len(args)) + `)
		AND NOT EXISTS (SELECT 1 FROM tasks WHERE task_group_id = g.task_group_id AND unresolved = 1)`,
		Args: args,
		What: fmt.Sprintf("checking %d task groups", len(args)),
		Rows: func(rows Rows) error {
			for rows.Next() {
				g, err := scanGroup(rows)
				if err != nil {
					return err
				}
				groups[g.TaskGroupID] = g
			}
			return nil
		},
	}
}
