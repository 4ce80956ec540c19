package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
)

const taskColumns = "task_id, definition, retries_left, runs"

type rowScanner interface{ Scan(dest ...any) error }

func (db *DB) scanTask(row rowScanner) (*queue.TaskState, error) {
	var (
		t         queue.TaskState
		def, runs string
	)
	if err := row.Scan(&t.TaskID, &def, &t.RetriesLeft, &runs); err != nil {
		return nil, err
	}
	if err := db.decodeTask(&t, def, runs); err != nil {
		return nil, err
	}
	return &t, nil
}

// decodeTask fills a task state from its stored JSON. Definitions never
// change once created, so decoded ones are kept in a bounded cache: every
// transition loads its task, and decoding the definition was a large share
// of each call's CPU. A cached entry is used only while the stored text is
// byte-for-byte the one it was decoded from.
func (db *DB) decodeTask(t *queue.TaskState, def, runs string) error {
	t.DefinitionJSON = def
	if cached, ok := db.defs.get(t.TaskID, def); ok {
		t.Task = cached
	} else {
		if err := json.Unmarshal([]byte(def), &t.Task); err != nil {
			return fmt.Errorf("decoding definition of task %s: %w", t.TaskID, err)
		}
		db.defs.put(t.TaskID, def, t.Task)
	}
	if cached, ok := db.defs.getRuns(t.TaskID, runs); ok {
		t.Runs = cached
		return nil
	}
	if err := json.Unmarshal([]byte(runs), &t.Runs); err != nil {
		return fmt.Errorf("decoding runs of task %s: %w", t.TaskID, err)
	}
	return nil
}

func (db *DB) scanTasks(rows *sql.Rows) ([]*queue.TaskState, error) {
	defer rows.Close()
	out, err := db.readTasks(rows)
	if err != nil {
		return nil, err
	}
	return out, rows.Err()
}

// readTasks decodes every row of a task query.
func (db *DB) readTasks(rows Rows) ([]*queue.TaskState, error) {
	var out []*queue.TaskState
	for rows.Next() {
		t, err := db.scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// GetTask implements Store.
func (db *DB) GetTask(ctx context.Context, taskID string) (*queue.TaskState, error) {
	t, err := db.scanTask(db.queryRow(ctx, "SELECT "+taskColumns+" FROM tasks WHERE task_id = ?", taskID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading task %s: %w", taskID, err)
	}
	return t, nil
}

// GetTasks implements Store; unknown ids are skipped.
func (db *DB) GetTasks(ctx context.Context, taskIDs []string) ([]*queue.TaskState, error) {
	var out []*queue.TaskState
	for start := 0; start < len(taskIDs); start += 500 {
		chunk := taskIDs[start:min(start+500, len(taskIDs))]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		rows, err := db.query(ctx, "SELECT "+taskColumns+" FROM tasks WHERE task_id IN ("+placeholders(len(chunk))+") ORDER BY task_id", args...)
		if err != nil {
			return nil, fmt.Errorf("loading tasks: %w", err)
		}
		ts, err := db.scanTasks(rows)
		if err != nil {
			return nil, fmt.Errorf("loading tasks: %w", err)
		}
		out = append(out, ts...)
	}
	return out, nil
}

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

// createTaskAlone runs one createTask (queue-api.md §3.4 steps 8–11) in a
// transaction of its own: the path for tasks with dependencies, and for
// every create a batch could not settle (a repeat, a refusal).
func (db *DB) createTaskAlone(ctx context.Context, p CreateTaskParams) (*Result, error) {
	var res *Result
	err := db.tx(ctx, func(tx *txn) error {
		res = &Result{}
		// The common case, a new task, is tried first; an identical repeat
		// then shows up as a taskId taken (or as a group or dependency
		// refusal, when the group was sealed or a dependency expired since)
		// and succeeds with the current status; a different definition
		// conflicts. This saves a look-up on every create.
		repeat := func(cause error) error {
			existing, err := tx.lockTask(ctx, p.TaskID)
			if errors.Is(err, ErrNotFound) {
				return cause
			}
			if err != nil {
				return err
			}
			if !queue.SameDefinition(&existing.Task, p.Task) {
				return queue.Conflictf("taskId %s already used by another task", p.TaskID)
			}
			res.Task = existing
			return nil
		}
		state := queue.NewTaskState(p.TaskID, *p.Task)
		var tr queue.Transition
		defined := state.Status()
		tr.Events = append(tr.Events, queue.Event{Kind: queue.EventTaskDefined, RunID: -1, Status: &defined})
		// The group upsert and the dependency look-up go in one round trip.
		// A task without dependencies is inserted in the same one, before
		// the group's answer is known: if the group refuses it, the
		// transaction is rolled back, and an insert that succeeded shows
		// that the taskId was free, so the refusal stands.
		var groupRefusal error
		tx.send(tx.joinTaskGroupStatement(p.Task, &groupRefusal))
		var depStates map[string]string
		var depRefusal error
		if len(p.Task.Dependencies) > 0 {
			depStates = map[string]string{}
			tx.sendDependencyCheck(p.TaskID, p.Task, depStates, &depRefusal)
		}
		inserted, early := false, len(p.Task.Dependencies) == 0
		if early {
			state.DependenciesSatisfied(p.Now, &tr)
			if err := tx.sendInsertTask(state, &inserted); err != nil {
				return err
			}
		}
		if err := tx.flush(ctx); err != nil {
			return err
		}
		if groupRefusal != nil {
			if inserted {
				return groupRefusal
			}
			return repeat(groupRefusal)
		}
		var satisfied []bool
		if !early {
			if depRefusal != nil {
				return repeat(depRefusal)
			}
			unsatisfied := 0
			satisfied = make([]bool, len(p.Task.Dependencies))
			for i, dep := range p.Task.Dependencies {
				state, known := depStates[dep]
				satisfied[i] = known && queue.DependencySatisfied(p.Task.Requires, state)
				if !satisfied[i] {
					unsatisfied++
				}
			}
			if unsatisfied == 0 {
				state.DependenciesSatisfied(p.Now, &tr)
			}
			if err := tx.sendInsertTask(state, &inserted); err != nil {
				return err
			}
			if err := tx.flush(ctx); err != nil {
				return err
			}
		}
		if !inserted {
			// Taken, by an earlier or a concurrent (now committed) create.
			return repeat(queue.Conflictf("taskId %s already used by another task", p.TaskID))
		}
		// The edges are written with the COMMIT.
		tx.sendDependencies(p.TaskID, p.Task, satisfied)
		res.Task = state
		res.Changes = append(res.Changes, Change{Task: state, Events: withStatus(tr.Events, state)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// sendInsertTask queues the insert of a new task with its first state
// (unscheduled, or with run 0 pending) as one statement. *inserted reports
// whether it wrote the row: not when the taskId is already taken (under
// PostgreSQL, also by a create that committed while this one ran: ON
// CONFLICT then sees the committed row).
func (t *txn) sendInsertTask(state *queue.TaskState, inserted *bool) error {
	def := &state.Task
	args, err := t.db.insertTaskArgs(state)
	if err != nil {
		return err
	}
	d := derive(state)
	seqExpr := "NULL"
	if d.pending {
		seqExpr = t.db.dialect.NextPendingSeq
	}
	t.send(Statement{Query: `INSERT INTO tasks (` + insertTaskColumns + `)
		VALUES (` + strings.Repeat("?, ", len(args)) + seqExpr + `) ON CONFLICT (task_id) DO NOTHING`,
		Args: args,
		What: "inserting task " + state.TaskID,
		Exec: func(n int64) error {
			*inserted = n > 0
			// Waiting claimWork calls learn of the new pending run once
			// this commits.
			if n > 0 && d.pending {
				t.notifyPending(def.TaskQueueID)
			}
			return nil
		}})
	return nil
}

// insertTaskColumns are the columns a new task's row is inserted with;
// insertTaskArgs gives the values of all but the last, pending_seq, which
// is an SQL expression.
const insertTaskColumns = `task_id, task_queue_id, scheduler_id, project_id, task_group_id, requires,
	priority, deadline, expires, definition, retries_left, runs, state, unresolved, pending_since, pending_seq`

// insertTaskArgs encodes a new task for insertTaskColumns, recording the
// definition as stored in state.DefinitionJSON.
func (db *DB) insertTaskArgs(state *queue.TaskState) ([]any, error) {
	def := &state.Task
	defJSON, err := json.Marshal(def)
	if err != nil {
		return nil, fmt.Errorf("encoding task %s: %w", state.TaskID, err)
	}
	state.DefinitionJSON = string(defJSON)
	runs, err := db.encodeRuns(state)
	if err != nil {
		return nil, err
	}
	d := derive(state)
	return []any{state.TaskID, def.TaskQueueID, def.SchedulerID, def.ProjectID, def.TaskGroupID, def.Requires,
		queue.PriorityWeight(def.Priority), def.Deadline.Millis(), def.Expires.Millis(), state.DefinitionJSON, state.RetriesLeft,
		runs, d.state, d.unresolved, d.pendingSince}, nil
}

// sendDependencies queues the task's dependency edges, many per statement.
func (t *txn) sendDependencies(taskID string, def *queue.Task, satisfied []bool) {
	const perStatement = 200 // 5 values each, well under SQLite's variable limit
	deps := def.Dependencies
	for start := 0; start < len(deps); start += perStatement {
		end := min(start+perStatement, len(deps))
		values := make([]string, 0, end-start)
		args := make([]any, 0, 5*(end-start))
		for i := start; i < end; i++ {
			values = append(values, "(?, ?, ?, ?, ?)")
			args = append(args, deps[i], taskID, def.Requires, boolInt(satisfied[i]), def.Expires.Millis())
		}
		t.send(Statement{Query: `INSERT INTO task_dependencies (required_task_id, dependent_task_id, requires, satisfied, expires)
			VALUES ` + strings.Join(values, ", ") + ` ON CONFLICT (required_task_id, dependent_task_id) DO NOTHING`,
			Args: args, What: "recording dependencies of " + taskID})
	}
}

// joinTaskGroupStatement creates the task's group or checks and extends it;
// *refusal is set when the group does not take the task.
func (t *txn) joinTaskGroupStatement(def *queue.Task, refusal *error) Statement {
	groupExpires := def.Expires.Add(queue.TaskGroupExpiresExtension).UnixMilli()
	// One upsert creates the group or extends its expiry (rolled back with
	// the transaction if the task is refused), locking the row against a
	// concurrent seal, and reports what the group was created with.
	return Statement{Query: `INSERT INTO task_groups (task_group_id, scheduler_id, expires) VALUES (?, ?, ?)
		ON CONFLICT (task_group_id) DO UPDATE SET
		expires = CASE WHEN excluded.expires > task_groups.expires THEN excluded.expires ELSE task_groups.expires END
		RETURNING scheduler_id, sealed`,
		Args: []any{def.TaskGroupID, def.SchedulerID, groupExpires},
		What: "joining task group " + def.TaskGroupID,
		Rows: func(rows Rows) error {
			var (
				schedulerID string
				sealed      sql.NullInt64
			)
			if err := scanOne(rows, &schedulerID, &sealed); err != nil {
				return err
			}
			switch {
			case schedulerID != def.SchedulerID:
				*refusal = queue.Conflictf("Task group %s exists with schedulerId %q; this task has schedulerId %q", def.TaskGroupID, schedulerID, def.SchedulerID)
			case sealed.Valid:
				*refusal = queue.Conflictf("Task group %s is sealed; no more tasks can be added to it", def.TaskGroupID)
			}
			return nil
		}}
}

// sendDependencyCheck queues the look-up of the task's dependencies: it
// fills states with each one's current state, and sets *refusal unless
// every dependency exists and outlives the new task's deadline.
func (t *txn) sendDependencyCheck(taskID string, def *queue.Task, states map[string]string, refusal *error) {
	expires := map[string]int64{}
	var ids []string
	for _, dep := range def.Dependencies {
		if dep != taskID {
			ids = append(ids, dep)
		}
	}
	for start := 0; start < len(ids); start += 500 {
		chunk := ids[start:min(start+500, len(ids))]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		// The share lock keeps each dependency from resolving (every
		// transition locks its task for update first) until this
		// transaction commits: otherwise a dependency seen unresolved here
		// could resolve concurrently without seeing the new, uncommitted
		// edge, and the dependent would wait forever.
		t.send(Statement{Query: "SELECT task_id, state, expires FROM tasks WHERE task_id IN (" + placeholders(len(chunk)) + ")" + t.db.dialect.LockShare,
			Args: args, What: "loading dependencies",
			Rows: func(rows Rows) error {
				for rows.Next() {
					var id, state string
					var exp int64
					if err := rows.Scan(&id, &state, &exp); err != nil {
						return err
					}
					states[id] = state
					expires[id] = exp
				}
				return nil
			}})
	}
	if len(ids) == 0 {
		return // only itself: nothing to look up
	}
	// The verdict is reached by the last chunk's reader, once every chunk
	// has been read.
	last := &t.queued[len(t.queued)-1]
	read := last.Rows
	last.Rows = func(rows Rows) error {
		if err := read(rows); err != nil {
			return err
		}
		var missing, expiring []string
		for _, id := range ids {
			exp, ok := expires[id]
			switch {
			case !ok:
				missing = append(missing, id)
			case exp < def.Deadline.Millis():
				expiring = append(expiring, id)
			}
		}
		if len(missing) > 0 || len(expiring) > 0 {
			e := queue.InputErrorf("%s", dependencyMessage(missing, expiring))
			e.Details = map[string]any{}
			if len(missing) > 0 {
				e.Details["missingTaskDependencies"] = missing
			}
			if len(expiring) > 0 {
				e.Details["expiringTaskDependencies"] = expiring
			}
			*refusal = e
		}
		return nil
	}
}

func dependencyMessage(missing, expiring []string) string {
	msg := ""
	if len(missing) > 0 {
		msg += fmt.Sprintf("`task.dependencies` references non-existing tasks: %v. All taskIds in `task.dependencies` must exist before the task is created.", missing)
	}
	if len(expiring) > 0 {
		if msg != "" {
			msg += "\n"
		}
		msg += fmt.Sprintf("`task.dependencies` references tasks that expire before the task's deadline: %v.", expiring)
	}
	return msg
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
	change := Change{Task: task, Events: withStatus(tr.Events, task)}
	idx := len(res.Changes)
	res.Changes = append(res.Changes, change)
	if queue.BecameResolved(before, task) {
		// The dependents and the group are read with the save, in one round
		// trip. Both reads start after this transaction locked the task,
		// and a createTask adding an edge to it holds a share lock on it
		// until it commits, so every edge to the task is visible to them.
		// Scheduling dependents never resolves one, so reading the group
		// before they are scheduled gives the same answer as after.
		t.indexCompleted([]*queue.TaskState{task})
		var edges []dependencyEdge
		checks := map[string]groupCheck{}
		t.send(t.dependentsOfStatement([]any{task.TaskID}, &edges))
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

// ClaimWork implements Store: it takes up to Count pending runs of the queue
// in priority then FIFO order in one statement, skipping rows other
// transactions hold, and claims each. Two round trips: the pending runs and
// the worker's record are read together, and the claimed tasks and the
// worker's recent tasks are written with the COMMIT.
//
// The worker's record is read without a lock, so a claim that finds
// nothing (most of those an idle fleet makes) writes nothing at all; its
// recent tasks are then written only if they are still what was read. When
// a concurrent claim by the same worker changed them meanwhile, they are
// appended again under a lock after the commit.
func (db *DB) ClaimWork(ctx context.Context, p ClaimWorkParams) (*ClaimResult, error) {
	var (
		res      *ClaimResult
		recent   []RecentTask
		recorded bool
		key      = WorkerKey{TaskQueueID: p.TaskQueueID, WorkerGroup: p.WorkerGroup, WorkerID: p.WorkerID}
	)
	err := db.tx(ctx, func(tx *txn) error {
		res = &ClaimResult{}
		var tasks []*queue.TaskState
		tx.send(Statement{Query: "SELECT " + taskColumns + ` FROM tasks
			WHERE task_queue_id = ? AND pending_seq IS NOT NULL AND deadline > ?
			ORDER BY priority DESC, pending_seq LIMIT ?` + db.dialect.LockSkip,
			Args: []any{p.TaskQueueID, ms(p.Now), p.Count},
			What: "selecting pending tasks of " + p.TaskQueueID,
			Rows: func(rows Rows) error {
				var err error
				tasks, err = db.readTasks(rows)
				return err
			}})
		var worker workerClaimRecord
		if p.RecordRecentTasks || p.CheckQuarantine {
			tx.send(tx.workerClaimRecordStatement(key, &worker, false))
		}
		if err := tx.flush(ctx); err != nil {
			return err
		}
		if p.CheckQuarantine && worker.found && worker.quarantineUntil > ms(p.Now) {
			res.QuarantinedUntil = fromMS(worker.quarantineUntil)
			return nil
		}
		for _, task := range tasks {
			last := task.LastRun()
			if last == nil || last.State != queue.StatePending {
				continue
			}
			var tr queue.Transition
			if err := task.Claim(last.RunID, p.WorkerGroup, p.WorkerID, p.Now, p.TakenUntil, &tr); err != nil {
				continue // lost a race or past deadline: skip silently
			}
			res.Claims = append(res.Claims, Claimed{Task: task, RunID: last.RunID})
			res.Changes = append(res.Changes, Change{Task: task, Events: withStatus(tr.Events, task)})
		}
		claimed := make([]*queue.TaskState, len(res.Claims))
		for i, cl := range res.Claims {
			claimed[i] = cl.Task
		}
		if err := tx.saveMany(claimed); err != nil {
			return err
		}
		recent = nil
		if p.RecordRecentTasks && worker.found && len(res.Claims) > 0 {
			for _, cl := range res.Claims {
				recent = append(recent, RecentTask{TaskID: cl.Task.TaskID, RunID: cl.RunID})
			}
			return tx.sendRecentTasks(key, worker.recentTasks, recent, &recorded)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if recent != nil && !recorded {
		// Best effort: the claims stand whatever happens to the worker's
		// bookkeeping.
		_ = db.AddRecentTasks(ctx, key, recent)
	}
	if len(res.Claims) == p.Count {
		// Runs may be left: the next waiter of this process looks (the hub
		// wakes one waiter per run made pending, and this claim may have
		// been woken for fewer runs than it took, or a wake-up may have
		// been coalesced).
		db.hub.Notify(p.TaskQueueID, 1)
	}
	return res, nil
}

// ListDependents implements Store.
func (db *DB) ListDependents(ctx context.Context, taskID string, page Page) ([]*queue.TaskState, string, error) {
	after, err := decodeToken(page.ContinuationToken)
	if err != nil {
		return nil, "", err
	}
	limit := page.size()
	rows, err := db.query(ctx, `SELECT t.task_id, t.definition, t.retries_left, t.runs FROM task_dependencies d
		JOIN tasks t ON t.task_id = d.dependent_task_id
		WHERE d.required_task_id = ? AND d.dependent_task_id > ? ORDER BY d.dependent_task_id LIMIT ?`, taskID, after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("listing dependents of %s: %w", taskID, err)
	}
	tasks, err := db.scanTasks(rows)
	if err != nil {
		return nil, "", fmt.Errorf("listing dependents of %s: %w", taskID, err)
	}
	return pageTasks(tasks, limit)
}

func pageTasks(tasks []*queue.TaskState, limit int) ([]*queue.TaskState, string, error) {
	if len(tasks) > limit {
		tasks = tasks[:limit]
		return tasks, encodeToken(tasks[limit-1].TaskID), nil
	}
	return tasks, "", nil
}

// ExpireClaims implements Store.
func (db *DB) ExpireClaims(ctx context.Context, now time.Time, limit int) (*Result, error) {
	rows, err := db.query(ctx, `SELECT task_id, taken_until FROM tasks WHERE taken_until IS NOT NULL AND taken_until <= ? AND deadline > ?
		ORDER BY taken_until LIMIT ?`, ms(now), ms(now), limit)
	if err != nil {
		return nil, fmt.Errorf("finding expired claims: %w", err)
	}
	type due struct {
		taskID string
		until  int64
	}
	var dues []due
	for rows.Next() {
		var d due
		if err := rows.Scan(&d.taskID, &d.until); err != nil {
			rows.Close()
			return nil, fmt.Errorf("finding expired claims: %w", err)
		}
		dues = append(dues, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("finding expired claims: %w", err)
	}
	total := &Result{}
	for _, d := range dues {
		res, err := db.UpdateTask(ctx, UpdateTaskParams{TaskID: d.taskID, Now: now, Apply: func(t *queue.TaskState, tr *queue.Transition) error {
			t.ExpireClaim(fromMS(d.until), now, tr)
			return nil
		}})
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return total, fmt.Errorf("expiring claim of %s: %w", d.taskID, err)
		}
		total.Changes = append(total.Changes, res.Changes...)
	}
	return total, nil
}

// ExpireDeadlines implements Store: tasks whose deadline is at or before
// cutoff and that are not resolved are resolved deadline-exceeded.
func (db *DB) ExpireDeadlines(ctx context.Context, cutoff, now time.Time, limit int) (*Result, error) {
	rows, err := db.query(ctx, "SELECT task_id FROM tasks WHERE unresolved = 1 AND deadline <= ? ORDER BY deadline LIMIT ?", ms(cutoff), limit)
	if err != nil {
		return nil, fmt.Errorf("finding tasks past deadline: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("finding tasks past deadline: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("finding tasks past deadline: %w", err)
	}
	total := &Result{}
	for _, id := range ids {
		res, err := db.UpdateTask(ctx, UpdateTaskParams{TaskID: id, Now: now, Apply: func(t *queue.TaskState, tr *queue.Transition) error {
			t.ExpireDeadline(now, tr)
			return nil
		}})
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return total, fmt.Errorf("resolving deadline of %s: %w", id, err)
		}
		total.Changes = append(total.Changes, res.Changes...)
	}
	return total, nil
}

// encodeRuns encodes a task's runs for storage and remembers them, so the
// next load of the task (usually its next transition) need not decode
// them: a cached copy is used only while the stored text is exactly this.
func (db *DB) encodeRuns(t *queue.TaskState) (string, error) {
	b, err := json.Marshal(t.Runs)
	if err != nil {
		return "", fmt.Errorf("encoding runs of %s: %w", t.TaskID, err)
	}
	raw := string(b)
	db.defs.putRuns(t.TaskID, raw, t.Runs)
	return raw, nil
}
