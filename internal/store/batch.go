package store

import (
	"time"

	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
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
		ctx, cancel := batchContext(calls[0].ctx)
		defer cancel()
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
// complete the calls' results with what was read at the commit (and, for a
// group left with few unresolved members, after it; see groupRecheckLimit).
//
// The common case takes two round trips: the tasks are locked and their
// dependents read together, and when no dependent becomes ready the saves
// and the task-group check go with the COMMIT.
func (t *txn) updateBatch(ctx context.Context, calls []*updateCall) (finish func(), err error) {
	tasks, edges, err := t.lockBatchTasks(ctx, calls)
	if err != nil {
		return nil, err
	}
	changed := t.applyBatch(calls, tasks)
	if err := t.saveBatch(changed); err != nil {
		return nil, err
	}
	return t.resolveBatch(ctx, changed, edges)
}

// updatedTask is a task a batched call changed: as loaded and as saved.
type updatedTask struct {
	call          *updateCall
	before, after *queue.TaskState
}

// lockBatchTasks locks the calls' tasks and reads the unsatisfied edges of
// their dependents, in one round trip.
func (t *txn) lockBatchTasks(ctx context.Context, calls []*updateCall) (map[string]*queue.TaskState, []dependencyEdge, error) {
	ids := make([]string, len(calls))
	for i, c := range calls {
		ids[i] = c.p.TaskID
	}
	// Locked in one order, so two batches never wait on each other in a
	// cycle.
	slices.Sort(ids)
	tasks := make(map[string]*queue.TaskState, len(calls))
	cond, args := t.db.inList("task_id", ids)
	t.send(Statement{Query: "SELECT " + taskColumns + " FROM tasks WHERE " + cond + " ORDER BY task_id" + t.db.dialect.LockRow,
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
	t.send(t.dependentsOfStatement(ids, &edges))
	for _, c := range calls {
		if c.p.Standing != nil {
			t.sendStanding(c.p.TaskID, c.p.Now, c.p.Standing)
		}
	}
	if err := t.flush(ctx); err != nil {
		return nil, nil, err
	}
	return tasks, edges, nil
}

// applyBatch applies each call's transition to its loaded task, setting
// the call's result or its own error, queues the notifications of the
// changes, and returns the tasks that changed.
func (t *txn) applyBatch(calls []*updateCall, tasks map[string]*queue.TaskState) []updatedTask {
	var changed []updatedTask
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
		c.res.Changes = append(c.res.Changes, t.change(task, tr.Events, c.p.Now))
		changed = append(changed, updatedTask{call: c, before: before, after: task})
	}
	return changed
}

// saveBatch queues the changed tasks' saves: together, but a task with a
// new pending run alone.
func (t *txn) saveBatch(changed []updatedTask) error {
	var bulk []*queue.TaskState
	for _, s := range changed {
		if d := derive(s.after); d.pending && !samePendingRun(s.before, s.after) {
			// A new pending run takes the next place in the queue: saved
			// on its own (rare in a batch: a retry after an exception).
			if err := t.saveTask(s.before, s.after); err != nil {
				return err
			}
			continue
		}
		bulk = append(bulk, s.after)
	}
	return t.saveMany(bulk)
}

// resolveBatch queues the consequences of the batch's resolutions: the
// completed tasks' index entries, dependents to schedule, and the check of
// groups left with no unresolved member (read after the saves, so this
// batch's resolutions count), which finish reports.
func (t *txn) resolveBatch(ctx context.Context, changed []updatedTask, edges []dependencyEdge) (finish func(), err error) {
	var resolved []updatedTask
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
	// Completed tasks are indexed in this transaction (index.go).
	resolvedTasks := make([]*queue.TaskState, len(resolved))
	var resolvedAt time.Time
	for i, s := range resolved {
		resolvedTasks[i] = s.after
		if s.call.p.Now.After(resolvedAt) {
			resolvedAt = s.call.p.Now
		}
	}
	t.indexCompleted(resolvedTasks, resolvedAt)
	checks := map[string]groupCheck{}
	t.send(t.batchGroupsResolvedStatement(groupIDs, checks))
	for _, s := range resolved {
		if err := t.resolveDependents(ctx, s.after, readyDependents(edges, s.after), s.call.p.Now, s.call.res); err != nil {
			return nil, err
		}
	}
	return func() { t.reportResolvedGroups(ctx, checks, resolved) }, nil
}

// reportResolvedGroups, after the commit, adds each group the batch left
// with no unresolved member to the result of the first call that resolved
// one of its tasks; a group the check saw with a few unresolved members is
// read again (another transaction may have resolved them; see
// groupRecheckLimit).
func (t *txn) reportResolvedGroups(ctx context.Context, checks map[string]groupCheck, resolved []updatedTask) {
	groups := map[string]*TaskGroup{}
	var recheck []string
	for id, c := range checks {
		switch {
		case c.unresolved == 0:
			groups[id] = c.group
		case c.unresolved <= groupRecheckLimit:
			recheck = append(recheck, id)
		}
	}
	slices.Sort(recheck)
	maps.Copy(groups, t.db.recheckGroups(ctx, recheck))
	for _, s := range resolved {
		if g := groups[s.after.Task.TaskGroupID]; g != nil {
			// Reported once, with the first of the group's resolutions.
			s.call.res.Changes[0].GroupResolved = g
			delete(groups, s.after.Task.TaskGroupID)
		}
	}
}

// dependencyEdge is an unsatisfied edge from a dependent to the task it
// requires.
type dependencyEdge struct{ required, dependent, requires string }

// readyDependents returns the dependents whose unsatisfied edge to the
// newly resolved task its state now satisfies.
func readyDependents(edges []dependencyEdge, task *queue.TaskState) []string {
	var ready []string
	state := task.State()
	for _, e := range edges {
		if e.required == task.TaskID && e.dependent != e.required && queue.DependencySatisfied(e.requires, state) {
			ready = append(ready, e.dependent)
		}
	}
	return ready
}

// dependentsOfStatement reads the unsatisfied edges to the given tasks.
func (t *txn) dependentsOfStatement(taskIDs []string, edges *[]dependencyEdge) Statement {
	cond, args := t.db.inList("required_task_id", taskIDs)
	return Statement{
		Query: "SELECT required_task_id, dependent_task_id, requires FROM task_dependencies WHERE " + cond +
			" AND satisfied = 0 ORDER BY required_task_id, dependent_task_id",
		Args: args,
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

// groupCheck is what a transaction saw of a task group one of its tasks
// resolved: the group, and how many of its members were unresolved (up to
// groupRecheckLimit+1).
type groupCheck struct {
	group      *TaskGroup
	unresolved int
}

// groupRecheckLimit bounds the unresolved members a group may have left for
// a resolution to look at the group again after its commit. Two
// transactions resolving a group's last two tasks at once (on two replicas)
// each see the other's task unresolved, so neither would report the group;
// looked at again after the commit, at least one sees both resolved. A
// group with more members left than this is far from done. (Both may then
// report it: a rare duplicate, never a miss.)
const groupRecheckLimit = 8

// batchGroupsResolvedStatement reads, for each task group, how many
// unresolved members it has (counting stops past groupRecheckLimit).
func (t *txn) batchGroupsResolvedStatement(groupIDs []string, checks map[string]groupCheck) Statement {
	cond, ids := t.db.inList("task_group_id", groupIDs)
	return Statement{
		Query: `SELECT task_group_id, scheduler_id, expires, sealed,
		(SELECT COUNT(*) FROM (SELECT 1 FROM tasks WHERE task_group_id = g.task_group_id AND unresolved = 1 LIMIT ?) AS u)
		FROM task_groups g WHERE ` + cond,
		Args: append([]any{groupRecheckLimit + 1}, ids...),
		What: fmt.Sprintf("checking %d task groups", len(groupIDs)),
		Rows: func(rows Rows) error {
			for rows.Next() {
				var (
					g          TaskGroup
					expires    int64
					sealed     sql.NullInt64
					unresolved int
				)
				if err := rows.Scan(&g.TaskGroupID, &g.SchedulerID, &expires, &sealed, &unresolved); err != nil {
					return err
				}
				g.Expires = fromMS(expires)
				if sealed.Valid {
					s := fromMS(sealed.Int64)
					g.Sealed = &s
				}
				checks[g.TaskGroupID] = groupCheck{group: &g, unresolved: unresolved}
			}
			return nil
		},
	}
}

// recheckGroups looks again, after the commit, at the groups a batch left
// with few unresolved members, and returns those now resolved. It is best
// effort: the answer only decides whether an event is sent.
func (db *DB) recheckGroups(ctx context.Context, groupIDs []string) map[string]*TaskGroup {
	if len(groupIDs) == 0 {
		return nil
	}
	checks := map[string]groupCheck{}
	err := db.tx(ctx, func(tx *txn) error {
		tx.send(tx.batchGroupsResolvedStatement(groupIDs, checks))
		return tx.flush(ctx)
	})
	if err != nil {
		return nil
	}
	out := map[string]*TaskGroup{}
	for id, c := range checks {
		if c.unresolved == 0 {
			out[id] = c.group
		}
	}
	return out
}
