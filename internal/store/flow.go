package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
)

// Flow control (queue.FlowPolicy, README "Flow control") in the store.
//
// A task under a key's policy carries its key in tasks.flow_key; the key's
// row in flow_keys holds the policy the newest task declared and the counts
// of the key's pending and running tasks, kept by a trigger in the very
// transaction that changes a task's state. Keyed tasks are left out of the
// index plain claims read (tasks_pending), so a backlog held back by a
// limit costs other tasks nothing; a claim finds keyed tasks through the
// keys that have room (flow_keys_ready), one task per key:
//
//   - the key's row is locked (skipping rows others hold) for the rest of
//     the claim, so one claim at a time takes from a key, and the counts it
//     read stay true until it commits: no key goes over its limit, and a
//     createTask cancelling the key's running tasks waits for the claim and
//     then sees its run;
//   - the task is locked too, skipping tasks others hold; with supersede,
//     the older pending tasks of the key are locked the same way and
//     resolved exception/superseded before the commit, so a task is never
//     both superseded and running.

// flowQueues remembers which task queues have flow keys, so claims from a
// queue without any send exactly the statements they sent before flow
// control existed. A queue is known at once in the process that declared
// its first key; another process sharing the database looks again at most
// once a second while it has seen none (keys are never removed, so a
// queue once known stays known).
type flowQueues struct {
	mu      sync.Mutex
	queues  map[string]bool      // task queue → has keys
	checked map[string]time.Time // task queue without keys → when last looked
}

// flowRecheck is how long a task queue seen without flow keys is believed
// to have none.
const flowRecheck = time.Second

func (f *flowQueues) known(taskQueueID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.queues == nil {
		f.queues = map[string]bool{}
	}
	f.queues[taskQueueID] = true
}

// queueHasFlowKeys reports whether claims from the task queue must look for
// keyed tasks.
func (db *DB) queueHasFlowKeys(ctx context.Context, taskQueueID string) (bool, error) {
	f := &db.flows
	f.mu.Lock()
	has, last := f.queues[taskQueueID], f.checked[taskQueueID]
	f.mu.Unlock()
	if has || time.Since(last) < flowRecheck {
		return has, nil
	}
	var one int
	err := db.queryRow(ctx, "SELECT 1 FROM flow_keys WHERE task_queue_id = ? LIMIT 1", taskQueueID).Scan(&one)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("looking for flow keys of %s: %w", taskQueueID, err)
	}
	if err == nil {
		f.known(taskQueueID)
		return true, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.checked == nil {
		f.checked = map[string]time.Time{}
	}
	if len(f.checked) > 100000 {
		clear(f.checked) // bounded: queue names come from requests
	}
	f.checked[taskQueueID] = time.Now()
	return false, nil
}

// FlowStore is the flow-control part of the store.
type FlowStore interface {
	// FlowKeys lists the keys of a task queue ("" for every queue) with
	// their policies and counts, ordered by queue and key.
	FlowKeys(ctx context.Context, taskQueueID string) ([]FlowKey, error)
	// FailFastGroup cancels the unresolved tasks of a task group that
	// opted into fail-fast (nothing otherwise); the caller calls it once a
	// task of the group failed.
	FailFastGroup(ctx context.Context, taskGroupID string, now time.Time) (*Result, error)
}

// FlowKey is one key's policy and counts.
type FlowKey struct {
	TaskQueueID      string
	Key              string
	Limit            int // 0: no limit
	Supersede        bool
	CancelInProgress bool
	Pending, Running int
	// Superseded and Canceled count the tasks the key's policies resolved
	// so far.
	Superseded, Canceled int64
}

// Limited is how many of the key's pending tasks its limit holds back.
func (k FlowKey) Limited() int {
	if k.Limit == 0 || k.Running < k.Limit {
		return 0
	}
	return k.Pending
}

// Supersession is one claim that superseded older tasks of its key.
type Supersession struct {
	// By is the claimed task and run that stands in for the others.
	By RecentTask
	// Superseded are the runs resolved exception/superseded, oldest first.
	Superseded []RecentTask
}

// sendFlowDeclaration queues, for a new task, the upsert of its key's row
// (the newest task's policy wins) and its group's fail-fast opt-in.
func (t *txn) sendFlowDeclaration(def *queue.Task, p *queue.FlowPolicy) {
	if p == nil {
		return
	}
	if p.Keyed() {
		t.send(Statement{Query: `INSERT INTO flow_keys (task_queue_id, flow_key, lim, supersede, cancel_in_progress)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (task_queue_id, flow_key) DO UPDATE SET
			lim = excluded.lim, supersede = excluded.supersede, cancel_in_progress = excluded.cancel_in_progress`,
			Args: []any{def.TaskQueueID, p.Key, p.Limit, boolInt(p.Supersede), boolInt(p.CancelInProgress)},
			What: "declaring flow key " + p.Key})
	}
	if p.FailFast {
		t.send(Statement{Query: "UPDATE task_groups SET fail_fast = 1 WHERE task_group_id = ? AND fail_fast = 0",
			Args: []any{def.TaskGroupID}, What: "opting task group " + def.TaskGroupID + " into fail-fast"})
	}
}

// cancelRunningOfKey cancels, when the new task taskID (def) is under a
// key with cancelInProgress, the running tasks it replaces
// (queue.CancelsInProgress). The key's row is locked by the declaration,
// so a claim of the key either committed before (its run is seen and
// cancelled) or waits for this transaction and then finds the new task.
func (t *txn) cancelRunningOfKey(ctx context.Context, taskID string, def *queue.Task, now time.Time, res *Result) error {
	p := def.Flow
	if !queue.CancelsOthers(p) {
		return nil
	}
	// The statement finds what queue.CancelsInProgress allows (only tasks
	// the creator could have created: same schedulerId and projectId,
	// which createTask's scopes cover), which is checked again on each
	// locked task.
	ids, err := t.queryStrings(ctx, `SELECT task_id FROM tasks WHERE task_queue_id = ? AND flow_key = ? AND state = 'running' AND task_id <> ?
		AND scheduler_id = ? AND project_id = ? ORDER BY task_id`,
		def.TaskQueueID, p.Key, taskID, def.SchedulerID, def.ProjectID)
	if err != nil {
		return fmt.Errorf("listing running tasks of flow key %s: %w", p.Key, err)
	}
	canceled := 0
	for _, id := range ids {
		_, err := t.transition(ctx, id, now, func(task *queue.TaskState, tr *queue.Transition) error {
			if !queue.CancelsInProgress(taskID, def, task) || task.Cancel(now, tr) != nil {
				return nil // resolved meanwhile, or past its deadline
			}
			canceled++
			return nil
		}, res)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("cancelling task %s of flow key %s: %w", id, p.Key, err)
		}
	}
	if canceled > 0 {
		t.send(Statement{Query: "UPDATE flow_keys SET canceled = canceled + ? WHERE task_queue_id = ? AND flow_key = ?",
			Args: []any{canceled, def.TaskQueueID, p.Key}, What: "counting cancellations of flow key " + p.Key})
	}
	return nil
}

// flowCandidatesStatement reads the keys a claim looks at (queue.KeysInTurn:
// up to count keys of the queue with pending tasks and room under their
// limit, least recently claimed first, then by key) and the task each
// offers (queue.NextOfKey: its first claimable in claim order, or with
// supersede its newest). Key rows and tasks are locked, skipping those
// other transactions hold.
func (t *txn) flowCandidatesStatement(p ClaimWorkParams, into *[]claimCandidate) Statement {
	lockTasks := t.db.dialect.LockSkip
	if lockTasks != "" {
		// The lock applies to the tasks only: the keys are locked by the
		// WITH query.
		lockTasks = strings.Replace(lockTasks, " SKIP LOCKED", " OF tasks SKIP LOCKED", 1)
	}
	next := `(SELECT n.task_id FROM tasks n WHERE n.task_queue_id = k.task_queue_id AND n.flow_key = k.flow_key
		AND n.pending_seq IS NOT NULL AND n.deadline > ? ORDER BY `
	return Statement{
		Query: `WITH k AS (SELECT task_queue_id, flow_key, supersede FROM flow_keys
			WHERE task_queue_id = ? AND pending > 0 AND (lim = 0 OR running < lim)
			ORDER BY last_claimed, flow_key LIMIT ?` + t.db.dialect.LockSkip + `)
			SELECT ` + prefixColumns("tasks.", taskColumns) + `, k.flow_key, tasks.pending_seq, k.supersede FROM k JOIN tasks
			ON tasks.task_id = CASE WHEN k.supersede = 1
				THEN ` + next + `n.pending_seq DESC LIMIT 1)
				ELSE ` + next + `n.priority DESC, n.pending_seq LIMIT 1) END
			WHERE tasks.pending_seq IS NOT NULL AND tasks.deadline > ?` + lockTasks,
		Args: []any{p.TaskQueueID, p.Count, ms(p.Now), ms(p.Now), ms(p.Now)},
		What: "selecting flow-controlled tasks of " + p.TaskQueueID,
		Rows: func(rows Rows) error {
			for rows.Next() {
				var (
					s              storedTask
					key            string
					seq, supersede int64
				)
				task := &queue.TaskState{}
				if err := rows.Scan(append(s.dest(task), &key, &seq, &supersede)...); err != nil {
					return err
				}
				if err := t.db.decodeTask(task, &s); err != nil {
					return err
				}
				c := claimCandidate{task: task, run: queue.NewPendingRun(task, seq), supersede: supersede == 1}
				c.run.FlowKey = key
				*into = append(*into, c)
			}
			return nil
		}}
}

func prefixColumns(prefix, columns string) string {
	parts := strings.Split(columns, ", ")
	for i := range parts {
		parts[i] = prefix + parts[i]
	}
	return strings.Join(parts, ", ")
}

// finishFlowClaims runs, inside a claim, what its keyed claims entail: the
// older pending tasks of a supersede key are resolved exception/superseded
// (queue.Supersedes), and each key records the claim (so keys take turns).
func (t *txn) finishFlowClaims(ctx context.Context, p ClaimWorkParams, claimed []claimCandidate, res *ClaimResult) error {
	for _, c := range claimed {
		key := c.run.FlowKey
		superseded := 0
		if c.supersede {
			// The statement finds what queue.Supersedes allows (the key's
			// tasks pending before it, of its schedulerId and projectId),
			// which is checked again on each locked task.
			older, err := t.pendingSeqs(ctx, `SELECT task_id, pending_seq FROM tasks WHERE task_queue_id = ? AND flow_key = ?
				AND pending_seq IS NOT NULL AND pending_seq < ? AND scheduler_id = ? AND project_id = ? ORDER BY pending_seq`+t.db.dialect.LockSkip,
				p.TaskQueueID, key, c.run.Seq, c.run.SchedulerID, c.run.ProjectID)
			if err != nil {
				return fmt.Errorf("listing tasks superseded by %s: %w", c.task.TaskID, err)
			}
			s := Supersession{By: RecentTask{TaskID: c.task.TaskID, RunID: len(c.task.Runs) - 1}}
			tr := &Result{}
			for _, o := range older {
				var runID int
				task, err := t.transition(ctx, o.taskID, p.Now, func(task *queue.TaskState, tr *queue.Transition) error {
					runID = len(task.Runs) - 1
					run := queue.NewPendingRun(task, o.seq)
					run.FlowKey = key
					if !queue.Supersedes(c.run, run) || !task.Supersede(p.Now, tr) {
						runID = -1
					}
					return nil
				}, tr)
				if err != nil {
					return fmt.Errorf("superseding task %s by %s: %w", o.taskID, c.task.TaskID, err)
				}
				if task != nil && runID >= 0 {
					s.Superseded = append(s.Superseded, RecentTask{TaskID: o.taskID, RunID: runID})
				}
			}
			res.Changes = append(res.Changes, tr.Changes...)
			if len(s.Superseded) > 0 {
				res.Supersessions = append(res.Supersessions, s)
				superseded = len(s.Superseded)
			}
		}
		t.send(Statement{Query: "UPDATE flow_keys SET last_claimed = ?, superseded = superseded + ? WHERE task_queue_id = ? AND flow_key = ?",
			Args: []any{ms(p.Now), superseded, p.TaskQueueID, key}, What: "recording a claim of flow key " + key})
	}
	return nil
}

// pendingSeq is a task's id and the pending_seq of its pending run.
type pendingSeq struct {
	taskID string
	seq    int64
}

// pendingSeqs runs a query reading (task_id, pending_seq) rows.
func (t *txn) pendingSeqs(ctx context.Context, query string, args ...any) ([]pendingSeq, error) {
	var out []pendingSeq
	err := t.queryEach(ctx, query, args, func(rows Rows) error {
		for rows.Next() {
			var s pendingSeq
			if err := rows.Scan(&s.taskID, &s.seq); err != nil {
				return err
			}
			out = append(out, s)
		}
		return nil
	})
	return out, err
}

// notifyFlowRoom wakes a waiting claim when a task of a flow key resolved:
// its key may have room for a pending task now, though no run became
// pending.
func (t *txn) notifyFlowRoom(task *queue.TaskState, d derived) {
	if d.unresolved == 0 && flowKeyed(task) {
		t.notifyPending(task.Task.TaskQueueID)
	}
}

// flowKeyed reports whether a task is under a key's policy (its definition
// says so; definitions never change).
func flowKeyed(t *queue.TaskState) bool { return t.Task.Flow.Keyed() }

// FlowKeys implements FlowStore.
func (db *DB) FlowKeys(ctx context.Context, taskQueueID string) ([]FlowKey, error) {
	rows, err := db.query(ctx, `SELECT task_queue_id, flow_key, lim, supersede, cancel_in_progress, pending, running, superseded, canceled
		FROM flow_keys WHERE ? = '' OR task_queue_id = ? ORDER BY task_queue_id, flow_key`, taskQueueID, taskQueueID)
	if err != nil {
		return nil, fmt.Errorf("listing flow keys of %q: %w", taskQueueID, err)
	}
	defer rows.Close()
	var out []FlowKey
	for rows.Next() {
		var (
			k                 FlowKey
			supersede, cancel int64
		)
		if err := rows.Scan(&k.TaskQueueID, &k.Key, &k.Limit, &supersede, &cancel, &k.Pending, &k.Running, &k.Superseded, &k.Canceled); err != nil {
			return nil, fmt.Errorf("reading flow keys: %w", err)
		}
		k.Supersede, k.CancelInProgress = supersede == 1, cancel == 1
		out = append(out, k)
	}
	return out, rows.Err()
}

// FailFastGroup implements FlowStore. The group row is locked first, so
// two failures of one group cancel its tasks one after the other.
func (db *DB) FailFastGroup(ctx context.Context, taskGroupID string, now time.Time) (*Result, error) {
	res := &Result{}
	// Most groups never opt in: a plain read spares them a transaction.
	var optedIn int64
	err := db.queryRow(ctx, "SELECT fail_fast FROM task_groups WHERE task_group_id = ?", taskGroupID).Scan(&optedIn)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && optedIn == 0) {
		return res, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading task group %s: %w", taskGroupID, err)
	}
	err = db.tx(ctx, func(tx *txn) error {
		res = &Result{}
		var failFast int64
		err := tx.queryRow(ctx, "SELECT fail_fast FROM task_groups WHERE task_group_id = ?"+db.dialect.LockRow, taskGroupID).Scan(&failFast)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && failFast == 0) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("locking task group %s: %w", taskGroupID, err)
		}
		ids, err := tx.cancellableGroupTasks(ctx, taskGroupID, now)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := tx.transition(ctx, id, now, func(t *queue.TaskState, tr *queue.Transition) error {
				return t.Cancel(now, tr)
			}, res); err != nil && !errors.Is(err, ErrNotFound) {
				return fmt.Errorf("cancelling task %s of failed group %s: %w", id, taskGroupID, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// The flow policy createTask parsed from a task's flow block is stored in
// its row (migration 054), so that reading the task (after a restart, on
// another replica, once the definition cache dropped it) never parses the
// block again: tasks.flow holds the policy's limit and switches as one
// integer, limit<<3 | failFast<<2 | cancelInProgress<<1 | supersede, NULL
// for a task without a flow block (most tasks: their inserts and reads
// stay as they were), and the key is flow_key, which a keyed task has
// always had for its claims and counts.
const (
	flowSupersede        = 1
	flowCancelInProgress = 2
	flowFailFast         = 4
	flowLimitShift       = 3
)

// flowColumn is the value of tasks.flow for a policy.
func flowColumn(p *queue.FlowPolicy) int64 {
	v := int64(p.Limit) << flowLimitShift
	if p.Supersede {
		v |= flowSupersede
	}
	if p.CancelInProgress {
		v |= flowCancelInProgress
	}
	if p.FailFast {
		v |= flowFailFast
	}
	return v
}

// decodeFlowColumn is the policy stored as flow and flow_key (nil for a
// task without a flow block). The key is read only for a keyed policy:
// a fail-fast-only block has none.
func decodeFlowColumn(flow sql.NullInt64, key sql.NullString) *queue.FlowPolicy {
	if !flow.Valid {
		return nil
	}
	v := flow.Int64
	p := &queue.FlowPolicy{
		Limit:            int(v >> flowLimitShift),
		Supersede:        v&flowSupersede != 0,
		CancelInProgress: v&flowCancelInProgress != 0,
		FailFast:         v&flowFailFast != 0,
	}
	if p.Limit > 0 || p.Supersede || p.CancelInProgress {
		p.Key = key.String
	}
	return p
}
