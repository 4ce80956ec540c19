package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

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
	ctx, cancel := batchContext(calls[0].ctx)
	defer cancel()
	var now time.Time
	for _, c := range batch {
		if c.p.Now.After(now) {
			now = c.p.Now
		}
	}
	// Waiting claimWork calls take the new tasks as they are created
	// (direct.go).
	direct, reserved := db.planDirectClaims(batch)
	var inserted map[string]bool
	defs := map[string]string{} // taskId → the definition as stored
	err := db.tryTx(ctx, func(tx *txn) error {
		inserted = map[string]bool{}
		w, err := tx.db.buildCreateBatch(batch, defs, direct)
		if err != nil {
			return err
		}
		w.quarantineCond, w.quarantineArgs = quarantineCondition(reserved, now)
		if db.dialect.Assert != "" {
			// One round trip with the COMMIT: the statement fails, and the
			// transaction with it, unless every group took its tasks, every
			// task went in and no worker claimed for is quarantined.
			tx.send(w.assertedStatement(db.dialect.Assert))
			for id, c := range w.created {
				inserted[id] = true
				if !c.direct {
					tx.offerPending(c.state, c.runs)
				}
			}
			return nil
		}
		refused := false
		tx.send(w.groupsStatement(&refused))
		tx.send(w.tasksStatement(tx, inserted))
		tx.send(w.membersStatement())
		if w.quarantineCond != "" {
			tx.send(quarantineStatement(w.quarantineCond, w.quarantineArgs))
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
	db.settleDirectClaims(ctx, reserved, err == nil, now)
	for _, c := range batch {
		switch {
		case err == nil && inserted[c.p.TaskID]:
			c.res, c.err = newTaskResult(c.p), nil
			c.res.Task.DefinitionJSON = defs[c.p.TaskID]
			if dc := direct[c.p.TaskID]; dc != nil && dc.made() {
				c.res = directResult(c.res, dc)
			}
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

// createWrites are the two statements that write a batch of creates: the
// upsert of its task groups and the insert of its tasks.
type createWrites struct {
	groupsQuery   string
	groupsArgs    []any
	groups        int
	tasksInsert   string // the insert, without its conflict clause
	tasksArgs     []any
	membersInsert string
	membersArgs   []any
	created       map[string]createdTask // taskId → the task as written, for the wake-ups
	// quarantineCond holds if no worker the batch claims for is
	// quarantined (empty: it claims for none).
	quarantineCond string
	quarantineArgs []any
}

// createdTask is a task of a batch as it is written.
type createdTask struct {
	state  *queue.TaskState
	runs   string // the runs column
	direct bool   // claimed for a waiting call as it was created (direct.go)
}

// buildCreateBatch prepares the writes of a batch; defs receives each
// task's definition as stored.
//
// A group that takes its tasks is created or extended, and locked against a
// concurrent seal until the commit; one that refuses them (sealed, or
// created with another schedulerId) is left alone and missing from the
// upsert's rows. A taskId already taken is missing from the insert's rows.
// Rows go in key order, so two batches lock in one order. A task planned
// for a direct claim goes in claimed, out of the pending order.
func (db *DB) buildCreateBatch(calls []*createCall, defs map[string]string, direct map[string]*directClaim) (*createWrites, error) {
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
	w := &createWrites{groups: len(groupIDs), created: map[string]createdTask{}}
	for _, id := range groupIDs {
		w.groupsArgs = append(w.groupsArgs, id, groups[id].schedulerID, groups[id].expires)
	}
	w.groupsQuery = `INSERT INTO task_groups (task_group_id, scheduler_id, expires) VALUES ` +
		strings.TrimSuffix(strings.Repeat("(?, ?, ?), ", len(groupIDs)), ", ") + `
		ON CONFLICT (task_group_id) DO UPDATE SET
		expires = CASE WHEN excluded.expires > task_groups.expires THEN excluded.expires ELSE task_groups.expires END
		WHERE task_groups.scheduler_id = excluded.scheduler_id AND task_groups.sealed IS NULL
		RETURNING task_group_id`

	values := make([]string, 0, len(sorted))
	for i, c := range sorted {
		if c.p.Task.Flow != nil {
			// The batch's insert writes neither flow nor flow_key:
			// CreateTask sends a task with a flow policy alone
			// (createTaskAlone, sendInsertTask), which stores it.
			return nil, fmt.Errorf("task %s has a flow policy: it is created alone, not in a batch", c.p.TaskID)
		}
		state := newTaskResult(c.p).Task
		// Pending tasks take their places in the queue in row order.
		row, seq := state, db.dialect.PendingSeqs(strconv.Itoa(i+1))
		if dc := direct[c.p.TaskID]; dc != nil && dc.claim(state, c.p.Now) {
			row, seq = dc.state, "NULL"
		}
		args, runs, err := db.insertTaskArgs(row)
		if err != nil {
			return nil, err
		}
		defs[c.p.TaskID] = row.DefinitionJSON
		values = append(values, "("+strings.Repeat("?, ", len(args))+seq+")")
		w.tasksArgs = append(w.tasksArgs, args...)
		w.membersArgs = append(w.membersArgs, memberArgs(c.p.TaskID, &state.Task)...)
		w.created[c.p.TaskID] = createdTask{state: row, runs: runs, direct: row != state}
	}
	w.tasksInsert = `INSERT INTO tasks (` + insertTaskColumns + `)
		VALUES ` + strings.Join(values, ", ")
	w.membersInsert = insertMembers + strings.TrimSuffix(strings.Repeat(memberValues+", ", len(sorted)), ", ")
	return w, nil
}

// groupsStatement runs the groups' upsert, setting *refused if a group
// refused its tasks.
func (w *createWrites) groupsStatement(refused *bool) Statement {
	return Statement{Query: w.groupsQuery, Args: w.groupsArgs, What: fmt.Sprintf("joining %d task groups", w.groups),
		Rows: func(rows Rows) error {
			n := 0
			for rows.Next() {
				n++
			}
			*refused = n < w.groups
			return nil
		}}
}

// tasksStatement runs the tasks' insert; inserted receives the taskIds
// written, whose queues are told of their new pending runs at the commit.
func (w *createWrites) tasksStatement(t *txn, inserted map[string]bool) Statement {
	query := w.tasksInsert + " ON CONFLICT (task_id) DO NOTHING RETURNING task_id"
	return Statement{Query: query, Args: w.tasksArgs, What: fmt.Sprintf("inserting %d tasks", len(w.created)),
		Rows: func(rows Rows) error {
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					return err
				}
				inserted[id] = true
				if c, ok := w.created[id]; ok && !c.direct {
					t.offerPending(c.state, c.runs)
				}
			}
			return nil
		}}
}

// membersStatement records the tasks in their groups. It runs after the
// tasks' insert, in a batch that is abandoned unless every task went in.
func (w *createWrites) membersStatement() Statement {
	return Statement{Query: w.membersInsert + " ON CONFLICT (task_group_id, task_id) DO NOTHING", Args: w.membersArgs,
		What: fmt.Sprintf("recording %d tasks in their groups", len(w.created))}
}

// assertedStatement runs both writes as one statement that fails (through
// the dialect's assert function) unless every group took its tasks, and
// fails on its own if a taskId is taken: the tasks go in by a plain insert,
// whose unique index refuses a taken taskId as it inserts. (ON CONFLICT DO
// NOTHING would probe the index before inserting each row and log a
// confirmation of each, for a repeat that is rare and is re-run alone
// either way.)
func (w *createWrites) assertedStatement(assert string) Statement {
	args := append(append(append(slices.Clip(w.groupsArgs), w.tasksArgs...), w.membersArgs...), w.groups)
	ok := "(SELECT COUNT(*) FROM g) = ?"
	if w.quarantineCond != "" {
		ok += " AND " + w.quarantineCond
		args = append(args, w.quarantineArgs...)
	}
	return Statement{
		Query: "WITH g AS (" + w.groupsQuery + "), t AS (" + w.tasksInsert + "), m AS (" + w.membersInsert + ")\n" +
			"SELECT " + assert + "(" + ok + ", 'batch of creates incomplete')",
		Args: args,
		What: fmt.Sprintf("creating %d tasks", len(w.created)),
	}
}
