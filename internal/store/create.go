package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/queue"
)

// CreateTask implements Store (docs/contract/queue.md §3.4 steps 8–11). A new task
// without dependencies, the common case, is written by a batch that
// inserts every task of the batch whose group takes it and whose taskId is
// free; concurrent creates share that
// batch while the database is busy. Anything else (dependencies, a repeat,
// a refusal) takes the full path alone.
func (db *DB) CreateTask(ctx context.Context, p CreateTaskParams) (*Result, error) {
	if p.Task.Flow == nil {
		// A definition not made by createTask (queue.BuildTask's callers
		// parse its flow block there): read its policy now.
		flow, err := queue.ParseFlow(p.Task)
		if err != nil {
			return nil, err
		}
		if flow != nil {
			def := *p.Task
			def.Flow = flow
			p.Task = &def
		}
	}
	// A task under a flow policy goes alone (createTaskAlone): its key's
	// row is written, and with cancelInProgress the key's running tasks
	// are cancelled, in its transaction: a keyed create may cancel others
	// (docs/flow-control.md).
	// So does a task with notify routes: its notifications are written by
	// the transaction that creates it, and its runs are never handed over
	// or claimed at create, whose writes record none (notify.go), and a
	// task of a forge build, whose changes the forge reporter learns of
	// from the outbox (forgeReported).
	if db.creates == nil || len(p.Task.Dependencies) > 0 || p.Task.Flow != nil || notify.HasRoutes(p.Task) || forgeReported(p.Task) {
		return db.createTaskAlone(ctx, p)
	}
	call := &createCall{ctx: ctx, p: p, err: errNotRun}
	db.creates.do(call)
	return call.res, call.err
}

// createTaskAlone runs one createTask (docs/contract/queue.md §3.4 steps 8–11) in a
// transaction of its own: the path for tasks with dependencies, and for
// every create a batch could not settle (a repeat, a refusal).
func (db *DB) createTaskAlone(ctx context.Context, p CreateTaskParams) (*Result, error) {
	var res *Result
	err := db.tx(ctx, func(tx *txn) error {
		res = &Result{}
		// The common case, a new task, is tried first; an identical repeat
		// then shows up as a taskId taken (or as a group or dependency
		// refusal, when the group was sealed or a dependency expired since)
		// and succeeds with the current status (repeatedCreate). This
		// saves a look-up on every create.
		repeat := func(cause error) error { return tx.repeatedCreate(ctx, p, cause, res) }
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
		// A flow key's row is written (and locked) before the task goes in,
		// so the counting trigger finds it (flow.go).
		tx.sendFlowDeclaration(p.Task, p.Task.Flow)
		if p.Task.Flow.Keyed() {
			db.flows.known(p.Task.TaskQueueID)
		}
		var depStates map[string]string
		var depRefusal error
		if len(p.Task.Dependencies) > 0 {
			depStates = map[string]string{}
			tx.sendDependencyCheck(p.TaskID, p.Task, depStates, &depRefusal)
		}
		inserted, early := false, len(p.Task.Dependencies) == 0
		if early {
			state.DependenciesSatisfied(p.Now, &tr)
			if err := tx.sendInsertTask(state, p.Task.Flow, &inserted); err != nil {
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
			var all bool
			if satisfied, all = dependenciesSatisfied(p.Task, depStates); all {
				state.DependenciesSatisfied(p.Now, &tr)
			}
			if err := tx.sendInsertTask(state, p.Task.Flow, &inserted); err != nil {
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
		// A keyed create may cancel others: a task under a key with
		// cancelInProgress replaces the key's running tasks, cancelled in
		// this transaction (flow.go).
		if err := tx.cancelRunningOfKey(ctx, p.TaskID, p.Task, p.Now, res); err != nil {
			return err
		}
		// The edges are written with the COMMIT.
		tx.sendDependencies(p.TaskID, p.Task, satisfied)
		res.Task = state
		// The new task's change comes first (Result.Changes), before those
		// of tasks it cancelled.
		res.Changes = append([]Change{tx.change(state, tr.Events, p.Now)}, res.Changes...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// repeatedCreate answers a create whose taskId was taken, or refused for
// its group or dependencies: an identical repeat succeeds with the task as
// it is now (res.Task), a different definition conflicts, and a taskId
// not taken leaves the refusal (cause) standing.
func (tx *txn) repeatedCreate(ctx context.Context, p CreateTaskParams, cause error, res *Result) error {
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

// dependenciesSatisfied says, for each of a task's dependencies, whether
// its state (states, by taskId; absent: unknown) satisfies the task's
// requires, and whether all do.
func dependenciesSatisfied(t *queue.Task, states map[string]string) (satisfied []bool, all bool) {
	all = true
	satisfied = make([]bool, len(t.Dependencies))
	for i, dep := range t.Dependencies {
		state, known := states[dep]
		satisfied[i] = known && queue.DependencySatisfied(t.Requires, state)
		all = all && satisfied[i]
	}
	return satisfied, all
}

// sendInsertTask queues the insert of a new task with its first state
// (unscheduled, or with run 0 pending) as one statement. *inserted reports
// whether it wrote the row: not when the taskId is already taken (under
// PostgreSQL, also by a create that committed while this one ran: ON
// CONFLICT then sees the committed row).
func (t *txn) sendInsertTask(state *queue.TaskState, flow *queue.FlowPolicy, inserted *bool) error {
	def := &state.Task
	args, _, err := t.db.insertTaskArgs(state)
	if err != nil {
		return err
	}
	d := derive(state)
	seqExpr := "NULL"
	if d.pending {
		seqExpr = t.db.dialect.NextPendingSeq
	}
	columns, values := insertTaskColumns, strings.Repeat("?, ", len(args))+seqExpr
	if flow != nil {
		// The policy is stored with the task (flowColumn), so that reading
		// it never parses the block again. Only tasks with a flow block
		// write these columns, so other inserts stay as they were.
		columns, values = columns+", flow", values+", ?"
		args = append(args, flowColumn(flow))
	}
	if flow.Keyed() {
		// Only tasks under a key's policy write flow_key (its trigger
		// counts them).
		columns, values = columns+", flow_key", values+", ?"
		args = append(args, flow.Key)
	}
	t.send(Statement{Query: `INSERT INTO tasks (` + columns + `)
		VALUES (` + values + `) ON CONFLICT (task_id) DO NOTHING`,
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
	// The task's membership goes in with it. When the taskId was taken,
	// the create either fails, rolling this back, or repeats the stored
	// definition, whose membership is this one.
	t.send(Statement{Query: insertMembers + memberValues + " ON CONFLICT (task_group_id, task_id) DO NOTHING",
		Args: memberArgs(state.TaskID, def),
		What: "recording task " + state.TaskID + " in its group"})
	return nil
}

// insertMembers starts the insert of rows of task_group_members, each
// (task_group_id, task_id, expires, created, task_queue_id, name): the
// look-ups of tasks by group, by expiry and, for the history (history.go),
// by creation time, queue and name, kept out of the tasks table
// (migrations 008 and 013) so that their indexes are not written again at
// every change of a task's state.
const insertMembers = "INSERT INTO task_group_members (task_group_id, task_id, expires, created, task_queue_id, name) VALUES "

// memberValues are the placeholders of one row of insertMembers.
const memberValues = "(?, ?, ?, ?, ?, ?)"

// memberArgs are the values of a task's row of insertMembers.
func memberArgs(taskID string, def *queue.Task) []any {
	return []any{def.TaskGroupID, taskID, def.Expires.Millis(), def.Created.Millis(), def.TaskQueueID, derivedText(def.Metadata.Name)}
}

// derivedText is a value taken from a task's definition for a text column
// of its own (the name the history searches, a notify route): the
// definition keeps a NUL (as JSON's \u0000), the column, which cannot,
// has U+FFFD in its place (ErrTextNUL).
func derivedText(s string) string {
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// insertTaskColumns are the columns a new task's row is inserted with;
// insertTaskArgs gives the values of all but the last, pending_seq, which
// is an SQL expression.
const insertTaskColumns = `task_id, task_queue_id, scheduler_id, project_id, task_group_id, requires,

	priority, deadline, expires, definition, retries_left, runs, state, unresolved, pending_since, taken_until, claimed_at, created, pending_seq`

// insertTaskArgs encodes a new task for insertTaskColumns, recording the
// definition as stored in state.DefinitionJSON.
func (db *DB) insertTaskArgs(state *queue.TaskState) (args []any, runs string, err error) {
	def := &state.Task
	defJSON, err := json.Marshal(def)
	if err != nil {
		return nil, "", fmt.Errorf("encoding task %s: %w", state.TaskID, err)
	}
	state.DefinitionJSON = string(defJSON)
	runs, err = db.encodeRuns(state)
	if err != nil {
		return nil, "", err
	}
	d := derive(state)
	return []any{state.TaskID, def.TaskQueueID, def.SchedulerID, def.ProjectID, def.TaskGroupID, def.Requires,
		queue.PriorityWeight(def.Priority), def.Deadline.Millis(), def.Expires.Millis(), state.DefinitionJSON, state.RetriesLeft,
		runs, d.state, d.unresolved, d.pendingSince, d.takenUntil, d.claimedAt, def.Created.Millis()}, runs, nil
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
