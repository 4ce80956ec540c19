package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
)

func (t *txn) lockTask(ctx context.Context, taskID string) (*queue.TaskState, error) {
	task, err := t.db.scanTask(t.queryRow(ctx, "SELECT "+taskColumns+" FROM tasks WHERE task_id = ?"+t.db.dialect.LockRow, taskID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("locking task %s: %w", taskID, err)
	}
	return task, nil
}

// derived are the indexed columns computed from a task's runs.
type derived struct {
	state        string
	unresolved   int
	takenUntil   sql.NullInt64
	claimedAt    sql.NullInt64
	pending      bool
	pendingSince sql.NullInt64
}

func derive(t *queue.TaskState) derived {
	d := derived{state: t.State()}
	if !t.IsResolved() {
		d.unresolved = 1
	}
	if r := t.LastRun(); r != nil {
		switch r.State {
		case queue.StateRunning:
			if r.TakenUntil != nil {
				d.takenUntil = sql.NullInt64{Int64: r.TakenUntil.Millis(), Valid: true}
			}
			if r.Started != nil {
				d.claimedAt = sql.NullInt64{Int64: r.Started.Millis(), Valid: true}
			}
		case queue.StatePending:
			d.pending = true
			d.pendingSince = sql.NullInt64{Int64: r.Scheduled.Millis(), Valid: true}
		}
	}
	return d
}

// samePendingRun reports whether before and after have the same pending run,
// which then keeps its place in the queue.
func samePendingRun(before, after *queue.TaskState) bool {
	b, a := before.LastRun(), after.LastRun()
	return b != nil && a != nil && b.State == queue.StatePending && a.State == queue.StatePending && b.RunID == a.RunID
}

// saveTask queues the write of a task's runs and derived columns after a
// transition.
func (t *txn) saveTask(before, after *queue.TaskState) error {
	runs, err := t.db.encodeRuns(after)
	if err != nil {
		return err
	}
	d := derive(after)
	seqExpr := "NULL"
	switch {
	case d.pending && samePendingRun(before, after):
		seqExpr = "pending_seq"
	case d.pending:
		seqExpr = t.db.dialect.NextPendingSeq
		t.notifyPending(after.Task.TaskQueueID)
	}
	t.notifyFlowRoom(after, d)
	// Queued: it goes to the database with the transaction's next
	// statements (or its COMMIT), and fails the transaction there if it
	// fails.
	t.send(Statement{Query: `UPDATE tasks SET retries_left = ?, runs = ?, state = ?, unresolved = ?,
		taken_until = ?, claimed_at = ?, pending_since = ?, pending_seq = ` + seqExpr + ` WHERE task_id = ?`,
		Args: []any{after.RetriesLeft, runs, d.state, d.unresolved, d.takenUntil, d.claimedAt, d.pendingSince, after.TaskID},
		What: "saving task " + after.TaskID})
	return nil
}

// saveMany queues the write of tasks whose last run is not newly pending
// (claimed, resolved, reclaimed, or the same pending run) as one UPDATE per
// 64 tasks: a claimWork of 32 tasks, or a batch of reports, costs one
// statement, not one per task.
func (t *txn) saveMany(tasks []*queue.TaskState) error {
	if t.db.dialect.Arrays {
		return t.saveManyArrays(tasks)
	}
	const perStatement = 64 // 9 values each
	for start := 0; start < len(tasks); start += perStatement {
		batch := tasks[start:min(start+perStatement, len(tasks))]
		values := make([]string, 0, len(batch))
		args := make([]any, 0, 9*len(batch))
		for _, task := range batch {
			runs, err := t.db.encodeRuns(task)
			if err != nil {
				return err
			}
			d := derive(task)
			t.notifyFlowRoom(task, d)
			values = append(values, "(CAST(? AS TEXT), CAST(? AS INTEGER), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS INTEGER), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS INTEGER))")
			// A task still pending keeps its place in the queue (callers
			// save a new pending run with saveTask).
			args = append(args, task.TaskID, task.RetriesLeft, runs, d.state, d.unresolved, d.takenUntil, d.claimedAt, d.pendingSince, boolInt(d.pending))
		}
		// VALUES columns are named column1… in both SQLite and PostgreSQL.
		t.send(Statement{Query: `UPDATE tasks SET retries_left = v.column2, runs = v.column3, state = v.column4,
			unresolved = v.column5, taken_until = v.column6, claimed_at = v.column7, pending_since = v.column8,
			pending_seq = CASE WHEN v.column9 = 1 THEN tasks.pending_seq ELSE NULL END
			FROM (VALUES ` + strings.Join(values, ", ") + `) AS v WHERE tasks.task_id = v.column1`,
			Args: args, What: fmt.Sprintf("saving %d tasks", len(batch))})
	}
	return nil
}

// saveManyArrays is saveMany for a dialect that takes arrays: one
// statement whatever the number of tasks, each column of values one array.
func (t *txn) saveManyArrays(tasks []*queue.TaskState) error {
	if len(tasks) == 0 {
		return nil
	}
	n := len(tasks)
	var (
		ids, runs, states                   = make([]string, n), make([]string, n), make([]string, n)
		retries, unresolved, pending        = make([]int64, n), make([]int64, n), make([]int64, n)
		takenUntil, claimedAt, pendingSince = make([]*int64, n), make([]*int64, n), make([]*int64, n)
	)
	nullable := func(v sql.NullInt64) *int64 {
		if !v.Valid {
			return nil
		}
		return &v.Int64
	}
	for i, task := range tasks {
		raw, err := t.db.encodeRuns(task)
		if err != nil {
			return err
		}
		d := derive(task)
		t.notifyFlowRoom(task, d)
		ids[i], retries[i], runs[i], states[i], unresolved[i] = task.TaskID, int64(task.RetriesLeft), raw, d.state, int64(d.unresolved)
		takenUntil[i], claimedAt[i], pendingSince[i] = nullable(d.takenUntil), nullable(d.claimedAt), nullable(d.pendingSince)
		pending[i] = int64(boolInt(d.pending))
	}
	// The same columns as saveMany's VALUES, in the same order.
	t.send(Statement{Query: `UPDATE tasks SET retries_left = v.column2, runs = v.column3, state = v.column4,
		unresolved = v.column5, taken_until = v.column6, claimed_at = v.column7, pending_since = v.column8,
		pending_seq = CASE WHEN v.column9 = 1 THEN tasks.pending_seq ELSE NULL END
		FROM unnest(CAST(? AS TEXT[]), CAST(? AS BIGINT[]), CAST(? AS TEXT[]), CAST(? AS TEXT[]), CAST(? AS BIGINT[]),
			CAST(? AS BIGINT[]), CAST(? AS BIGINT[]), CAST(? AS BIGINT[]), CAST(? AS BIGINT[]))
			AS v (column1, column2, column3, column4, column5, column6, column7, column8, column9)
		WHERE tasks.task_id = v.column1`,
		Args: []any{ids, retries, runs, states, unresolved, takenUntil, claimedAt, pendingSince, pending},
		What: fmt.Sprintf("saving %d tasks", n)})
	return nil
}

func withStatus(events []queue.Event, t *queue.TaskState) []queue.Event {
	st := t.Status()
	for i := range events {
		if events[i].Status == nil {
			events[i].Status = &st
		}
	}
	return events
}

// transition locks a task, applies fn and saves it with its consequences,
// appending the changes to res.
func (t *txn) transition(ctx context.Context, taskID string, now time.Time,
	fn func(*queue.TaskState, *queue.Transition) error, res *Result) (*queue.TaskState, error) {
	task, err := t.lockTask(ctx, taskID)
	if err != nil {
		return nil, err
	}
	before := task.Clone()
	var tr queue.Transition
	if err := fn(task, &tr); err != nil {
		return task, err
	}
	if len(tr.Events) == 0 && runsEqual(before.Runs, task.Runs) && before.RetriesLeft == task.RetriesLeft {
		return task, nil
	}
	if err := t.saveTask(before, task); err != nil {
		return nil, err
	}
	change := t.change(task, tr.Events, now)
	idx := len(res.Changes)
	res.Changes = append(res.Changes, change)
	if queue.BecameResolved(before, task) {
		// The dependents and the group are read with the save, in one round
		// trip. Both reads start after this transaction locked the task,
		// and a createTask adding an edge to it holds a share lock on it
		// until it commits, so every edge to the task is visible to them.
		// Scheduling dependents never resolves one, so reading the group
		// before they are scheduled gives the same answer as after.
		t.indexCompleted([]*queue.TaskState{task}, now)
		var edges []dependencyEdge
		checks := map[string]groupCheck{}
		t.send(t.dependentsOfStatement([]string{task.TaskID}, &edges))
		t.send(t.batchGroupsResolvedStatement([]string{task.Task.TaskGroupID}, checks))
		if err := t.flush(ctx); err != nil {
			return nil, err
		}
		if err := t.resolveDependents(ctx, task, readyDependents(edges, task), now, res); err != nil {
			return nil, err
		}
		if c, ok := checks[task.Task.TaskGroupID]; ok && c.unresolved == 0 {
			res.Changes[idx].GroupResolved = c.group
		}
	}
	return task, nil
}

func runsEqual(a, b []queue.Run) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.State != y.State || x.ReasonResolved != y.ReasonResolved || x.WorkerGroup != y.WorkerGroup ||
			x.WorkerID != y.WorkerID || !sameTimePtr(x.TakenUntil, y.TakenUntil) {
			return false
		}
	}
	return true
}

func sameTimePtr(a, b *queue.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b.Time)
}

// resolveDependents satisfies the edges to the ready dependents of a newly
// resolved task and schedules those left with no unsatisfied edge.
func (t *txn) resolveDependents(ctx context.Context, task *queue.TaskState, ready []string, now time.Time, res *Result) error {
	for _, dependent := range ready {
		t.send(Statement{Query: "UPDATE task_dependencies SET satisfied = 1 WHERE required_task_id = ? AND dependent_task_id = ?",
			Args: []any{task.TaskID, dependent}, What: fmt.Sprintf("satisfying dependency %s of %s", task.TaskID, dependent)})
		// Lock the dependent before counting its open edges. Two of its
		// dependencies resolving at once then count one after the other,
		// and the second sees the first's edge satisfied; without the lock
		// each could see the other's edge still open (write skew) and
		// neither would schedule the dependent. The count is sent with the
		// lock but runs after it has been granted, so it sees every edge
		// committed before.
		found := false
		t.send(Statement{Query: "SELECT task_id FROM tasks WHERE task_id = ?" + t.db.dialect.LockRow, Args: []any{dependent},
			What: "locking dependent " + dependent,
			Rows: func(rows Rows) error {
				found = rows.Next()
				return nil
			}})
		var left int
		t.send(Statement{Query: "SELECT COUNT(*) FROM task_dependencies WHERE dependent_task_id = ? AND satisfied = 0", Args: []any{dependent},
			What: "counting dependencies of " + dependent,
			Rows: func(rows Rows) error { return scanOne(rows, &left) }})
		if err := t.flush(ctx); err != nil {
			return err
		}
		if !found || left > 0 {
			continue
		}
		_, err := t.transition(ctx, dependent, now, func(d *queue.TaskState, tr *queue.Transition) error {
			d.DependenciesSatisfied(now, tr)
			return nil
		}, res)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return nil
}
