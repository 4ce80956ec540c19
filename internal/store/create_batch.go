package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hopper-ci/hopper/internal/queue"
)

// errBatchIncomplete abandons a batch of creates that did not insert every
// task.
var errBatchIncomplete = errors.New("store: batch of creates abandoned")

// createCall is one CreateTask waiting to be run, in a batch.
type createCall struct {
	ctx context.Context
	p   CreateTaskParams
	res *Result
	err error
}

// CreateTask implements Store (queue-api.md §3.4 steps 8–11). A new task
// without dependencies, the common case, is written by a batch that
// inserts every task of the batch whose group takes it and whose taskId is
// free; concurrent creates share that
// batch while the database is busy. Anything else (dependencies, a repeat,
// a refusal) takes the full path alone.
func (db *DB) CreateTask(ctx context.Context, p CreateTaskParams) (*Result, error) {
	if db.creates == nil || len(p.Task.Dependencies) > 0 {
		return db.createTaskAlone(ctx, p)
	}
	call := &createCall{ctx: ctx, p: p, err: errNotRun}
	db.creates.do(call)
	return call.res, call.err
}

// runCreates runs a batch of creates without dependencies. A create the
// batch did not insert is run alone afterwards, which answers it properly:
// an identical repeat succeeds, anything else gets its refusal.
func (db *DB) runCreates(calls []*createCall) {
	var batch, later []*createCall
	taskIDs := make(map[string]bool, len(calls))
	schedulers := map[string]string{} // task group → schedulerId in this batch
	for _, c := range calls {
		def := c.p.Task
		if s, ok := schedulers[def.TaskGroupID]; taskIDs[c.p.TaskID] || (ok && s != def.SchedulerID) {
			later = append(later, c)
			continue
		}
		taskIDs[c.p.TaskID] = true
		schedulers[def.TaskGroupID] = def.SchedulerID
		batch = append(batch, c)
	}
	// The batch outlives any one caller: the others' tasks ride on it.
	ctx := context.WithoutCancel(calls[0].ctx)
	var inserted map[string]bool
	defs := map[string]string{} // taskId → the definition as stored
	err := db.tryTx(ctx, func(tx *txn) error {
		inserted = map[string]bool{}
		refused := false
		if err := tx.createBatch(batch, inserted, &refused, defs); err != nil {
			return err
		}
		if err := tx.flush(ctx); err != nil {
			return err
		}
		if refused || len(inserted) < len(batch) {
			// Some create was refused or repeats a taskId: nothing of the
			// batch is kept (a refused create must leave no trace, not even
			// its group), and each is run alone.
			return errBatchIncomplete
		}
		return nil
	})
	for _, c := range batch {
		switch {
		case err == nil && inserted[c.p.TaskID]:
			c.res, c.err = newTaskResult(c.p), nil
			c.res.Task.DefinitionJSON = defs[c.p.TaskID]
		default:
			later = append(later, c)
		}
	}
	for _, c := range later {
		c.res, c.err = db.createTaskAlone(c.ctx, c.p)
	}
}

// newTaskResult is the state and events of a task without dependencies
// just created: defined, and its first run pending.
func newTaskResult(p CreateTaskParams) *Result {
	state := queue.NewTaskState(p.TaskID, *p.Task)
	var tr queue.Transition
	defined := state.Status()
	tr.Events = append(tr.Events, queue.Event{Kind: queue.EventTaskDefined, RunID: -1, Status: &defined})
	state.DependenciesSatisfied(p.Now, &tr)
	return &Result{Task: state, Changes: []Change{{Task: state, Events: withStatus(tr.Events, state)}}}
}

// createBatch queues the upsert of the batch's task groups and the insert
// of its tasks; inserted receives the taskIds written (not those already
// taken), and *refused is set if a group refuses its tasks (sealed, or
// created with another schedulerId). The caller keeps the batch only if
// every task went in.
func (t *txn) createBatch(calls []*createCall, inserted map[string]bool, refused *bool, defs map[string]string) error {
	// Rows go in key order, so two batches lock in one order.
	sorted := slices.Clone(calls)
	slices.SortFunc(sorted, func(a, b *createCall) int { return strings.Compare(a.p.TaskID, b.p.TaskID) })

	type group struct {
		schedulerID string
		expires     int64
	}
	groups := map[string]*group{}
	for _, c := range sorted {
		def := c.p.Task
		exp := def.Expires.Add(queue.TaskGroupExpiresExtension).UnixMilli()
		if g := groups[def.TaskGroupID]; g != nil {
			g.expires = max(g.expires, exp)
		} else {
			groups[def.TaskGroupID] = &group{schedulerID: def.SchedulerID, expires: exp}
		}
	}
	groupIDs := make([]string, 0, len(groups))
	for id := range groups {
		groupIDs = append(groupIDs, id)
	}
	slices.Sort(groupIDs)
	groupArgs := make([]any, 0, 3*len(groupIDs))
	for _, id := range groupIDs {
		groupArgs = append(groupArgs, id, groups[id].schedulerID, groups[id].expires)
	}
	// A group that takes its tasks is created or extended, and locked
	// against a concurrent seal until the commit; one that refuses them is
	// left alone and missing from the rows returned.
	t.send(Statement{Query: `INSERT INTO task_groups (task_group_id, scheduler_id, expires) VALUES ` +
		strings.TrimSuffix(strings.Repeat("(?, ?, ?), ", len(groupIDs)), ", ") + `
		ON CONFLICT (task_group_id) DO UPDATE SET
		expires = CASE WHEN excluded.expires > task_groups.expires THEN excluded.expires ELSE task_groups.expires END
		WHERE task_groups.scheduler_id = excluded.scheduler_id AND task_groups.sealed IS NULL
		RETURNING task_group_id`,
		Args: groupArgs, What: fmt.Sprintf("joining %d task groups", len(groupIDs)),
		Rows: func(rows Rows) error {
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					return err
				}
				delete(groups, id)
			}
			if len(groups) > 0 {
				*refused = true
			}
			return nil
		}})

	const columns = 15
	row := "(" + strings.Repeat("?, ", columns)
	values := make([]string, 0, len(sorted))
	args := make([]any, 0, columns*len(sorted))
	queues := map[string]string{} // taskId → task queue, for the wake-ups
	for i, c := range sorted {
		state := newTaskResult(c.p).Task
		def := &state.Task
		defJSON, err := json.Marshal(def)
		if err != nil {
			return fmt.Errorf("encoding task %s: %w", c.p.TaskID, err)
		}
		defs[c.p.TaskID] = string(defJSON)
		runs, err := t.db.encodeRuns(state)
		if err != nil {
			return err
		}
		d := derive(state)
		// Every new task is pending; they take their places in the queue
		// in row order.
		values = append(values, row+t.db.dialect.PendingSeqs(strconv.Itoa(i+1))+")")
		args = append(args, c.p.TaskID, def.TaskQueueID, def.SchedulerID, def.ProjectID, def.TaskGroupID, def.Requires,
			queue.PriorityWeight(def.Priority), def.Deadline.Millis(), def.Expires.Millis(), string(defJSON), state.RetriesLeft,
			runs, d.state, d.unresolved, d.pendingSince)
		queues[c.p.TaskID] = def.TaskQueueID
	}
	t.send(Statement{Query: `INSERT INTO tasks (task_id, task_queue_id, scheduler_id, project_id, task_group_id, requires,
		priority, deadline, expires, definition, retries_left, runs, state, unresolved, pending_since, pending_seq)
		VALUES ` + strings.Join(values, ", ") + `
		ON CONFLICT (task_id) DO NOTHING RETURNING task_id`,
		Args: args, What: fmt.Sprintf("inserting %d tasks", len(sorted)),
		Rows: func(rows Rows) error {
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					return err
				}
				inserted[id] = true
				// Waiting claimWork calls learn of the new pending run
				// once this commits.
				t.notifyPending(queues[id])
			}
			return nil
		}})
	return nil
}
