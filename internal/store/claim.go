package store

import (
	"context"
	"slices"

	"github.com/hopper-ci/hopper/internal/queue"
)

// ClaimWork implements Store: it takes up to Count pending runs of the queue
// as queue.PlanClaim decides (priority, then the order they became
// pending; tasks under a flow key's policy through their keys, flow.go),
// skipping rows other transactions hold, and claims each. Two round trips: the pending runs and
// the worker's record are read together, and the claimed tasks and the
// worker's recent tasks are written with the COMMIT.
//
// The worker's record is read without a lock, so a claim that finds
// nothing (most of those an idle fleet makes) writes nothing at all; its
// recent tasks are then written only if they are still what was read. When
// a concurrent claim by the same worker changed them meanwhile, they are
// appended again under a lock after the commit.
func (db *DB) ClaimWork(ctx context.Context, p ClaimWorkParams) (*ClaimResult, error) {
	if p.CheckStopped && (p.SkipKnownEmpty || p.Woken) && db.hub.answersAlone(p.TaskQueueID) {
		// The claim may not look at the queue at all: the worker's
		// standing is its one question to the database.
		key := WorkerKey{TaskQueueID: p.TaskQueueID, WorkerGroup: p.WorkerGroup, WorkerID: p.WorkerID}
		stopped, err := db.poolWorkerStopped(ctx, key)
		if err != nil || stopped {
			return &ClaimResult{WorkerStopped: stopped}, err
		}
		p.CheckStopped = false
	}
	if (p.SkipKnownEmpty || p.Woken) && !p.RecordRecentTasks && !p.CheckStopped {
		// Where this process knows the queue's pending runs exactly, the
		// claim takes them from the hub (handover.go).
		if res, exact, err := db.claimHandedOver(ctx, p); exact {
			return res, err
		}
	}
	generation, empty := db.hub.knownEmpty(p.TaskQueueID)
	if p.SkipKnownEmpty && !p.Woken && empty && !p.CheckStopped {
		return &ClaimResult{Skipped: true}, nil
	}
	res, err := db.claimWork(ctx, p, generation)
	if err != nil && p.Woken {
		// The runs this call was woken for may be left: let the next
		// claimWork look for them.
		db.hub.forgetEmpty(p.TaskQueueID)
	}
	return res, err
}

func (db *DB) claimWork(ctx context.Context, p ClaimWorkParams, generation uint64) (*ClaimResult, error) {
	var (
		res      *ClaimResult
		recent   []RecentTask
		recorded bool
		key      = WorkerKey{TaskQueueID: p.TaskQueueID, WorkerGroup: p.WorkerGroup, WorkerID: p.WorkerID}
	)
	flows, err := db.queueHasFlowKeys(ctx, p.TaskQueueID)
	if err != nil {
		return nil, err
	}
	err = db.tx(ctx, func(tx *txn) error {
		res = &ClaimResult{}
		var err error
		recent, err = tx.claimRuns(ctx, p, flows, key, res, &recorded)
		return err
	})
	if err != nil {
		return nil, err
	}
	if recent != nil && !recorded {
		// Best effort: the claims stand whatever happens to the worker's
		// bookkeeping.
		_ = db.AddRecentTasks(ctx, key, recent)
	}
	db.noteClaim(p, res, generation)
	return res, nil
}

// claimRuns claims the runs in this transaction, into res, unless the
// worker is quarantined, and queues the save of the claimed tasks and of
// the worker's recent tasks (*recorded says, after the commit, whether
// they were written). It returns those recent tasks.
func (t *txn) claimRuns(ctx context.Context, p ClaimWorkParams, flows bool, key WorkerKey, res *ClaimResult, recorded *bool) ([]RecentTask, error) {
	plain, keyed, worker, err := t.readClaimCandidates(ctx, p, flows, key)
	if err != nil {
		return nil, err
	}
	if worker.stopped {
		res.WorkerStopped = true
		return nil, nil
	}
	if p.CheckQuarantine && worker.found && worker.quarantineUntil > ms(p.Now) {
		res.QuarantinedUntil = fromMS(worker.quarantineUntil)
		return nil, nil
	}
	keyedClaims := t.claimCandidates(p, mergeClaimable(plain, keyed, p.Count), res)
	if err := t.finishFlowClaims(ctx, p, keyedClaims, res); err != nil {
		return nil, err
	}
	claimed := make([]*queue.TaskState, len(res.Claims))
	for i, cl := range res.Claims {
		claimed[i] = cl.Task
	}
	if err := t.saveMany(claimed); err != nil {
		return nil, err
	}
	res.WorkerUnknown = p.RecordRecentTasks && !worker.found
	if !p.RecordRecentTasks || !worker.found || len(res.Claims) == 0 {
		return nil, nil
	}
	recent := make([]RecentTask, 0, len(res.Claims))
	for _, cl := range res.Claims {
		recent = append(recent, RecentTask{TaskID: cl.Task.TaskID, RunID: cl.RunID})
	}
	return recent, t.sendRecentTasks(key, worker.recentTasks, recent, recorded)
}

// readClaimCandidates reads, in one round trip, the plain tasks a claim
// may take, the tasks under a flow key's policy it may take (if the queue
// has flow keys), and the worker's record (when the claim needs it).
func (t *txn) readClaimCandidates(ctx context.Context, p ClaimWorkParams, flows bool, key WorkerKey) (plain, keyed []claimCandidate, worker workerClaimRecord, err error) {
	// The plain tasks a claim may take (queue.PlanClaim's rules 1 and 2),
	// first in claim order: the index tasks_pending holds them in that
	// order, leaving out tasks under a flow key's policy.
	t.send(Statement{Query: "SELECT " + taskColumns + `, pending_seq FROM tasks
		WHERE task_queue_id = ? AND pending_seq IS NOT NULL AND flow_key IS NULL AND deadline > ?
		ORDER BY priority DESC, pending_seq LIMIT ?` + t.db.dialect.LockSkip,
		Args: []any{p.TaskQueueID, ms(p.Now), p.Count},
		What: "selecting pending tasks of " + p.TaskQueueID,
		Rows: func(rows Rows) error {
			var err error
			plain, err = t.db.readPlainCandidates(rows)
			return err
		}})
	// Tasks under a flow key's policy are found through their keys, in
	// the same round trip (flow.go).
	if flows {
		t.send(t.flowCandidatesStatement(p, &keyed))
	}
	if p.RecordRecentTasks || p.CheckQuarantine {
		t.send(t.workerClaimRecordStatement(key, &worker, false))
	}
	if p.CheckStopped {
		t.send(poolWorkerStoppedStatement(key, &worker.stopped))
	}
	err = t.flush(ctx)
	return plain, keyed, worker, err
}

// claimCandidates claims the pending run of each candidate, in order, for
// the worker, adding the claims and their changes to res; a candidate lost
// to a race or past its deadline is skipped. It returns the claimed
// candidates under a flow key's policy.
func (t *txn) claimCandidates(p ClaimWorkParams, candidates []claimCandidate, res *ClaimResult) []claimCandidate {
	var keyedClaims []claimCandidate
	for _, c := range candidates {
		task := c.task
		last := task.LastRun()
		if last == nil || last.State != queue.StatePending {
			continue
		}
		var tr queue.Transition
		if err := task.Claim(last.RunID, p.WorkerGroup, p.WorkerID, p.Now, p.TakenUntil, &tr); err != nil {
			continue // lost a race or past deadline: skip silently
		}
		res.Claims = append(res.Claims, Claimed{Task: task, RunID: last.RunID})
		res.Changes = append(res.Changes, t.change(task, tr.Events, p.Now))
		if c.run.FlowKey != "" {
			keyedClaims = append(keyedClaims, c)
		}
	}
	return keyedClaims
}

// noteClaim tells this process's hub, after the commit, what the claim
// learned of the queue.
func (db *DB) noteClaim(p ClaimWorkParams, res *ClaimResult, generation uint64) {
	if res.WorkerStopped {
		return // the claim did not look at the queue
	}
	if !res.QuarantinedUntil.IsZero() && p.Woken {
		db.hub.forgetEmpty(p.TaskQueueID)
	}
	if (p.SkipKnownEmpty || p.Woken) && len(res.Claims) < p.Count && res.QuarantinedUntil.IsZero() {
		// The queue was drained at this claim's snapshot: until a run is
		// announced, the waiters of this process need not look.
		db.hub.markEmpty(p.TaskQueueID, generation)
	}
	if len(res.Claims) == p.Count {
		// Runs may be left: the next waiter of this process looks (the hub
		// wakes one waiter per run made pending, and this claim may have
		// been woken for fewer runs than it took, or a wake-up may have
		// been coalesced).
		db.hub.Notify(p.TaskQueueID, 1)
	}
}

// claimCandidate is a task a claim may take, with its pending run as the
// claim rules see it (queue.PendingRun).
type claimCandidate struct {
	task *queue.TaskState
	run  queue.PendingRun
	// supersede is its key's policy when the claim read it.
	supersede bool
}

// readPlainCandidates reads tasks outside flow control with their
// pending_seq.
func (db *DB) readPlainCandidates(rows Rows) ([]claimCandidate, error) {
	var out []claimCandidate
	for rows.Next() {
		var (
			s   storedTask
			seq int64
		)
		t := &queue.TaskState{}
		if err := rows.Scan(append(s.dest(t), &seq)...); err != nil {
			return nil, err
		}
		if err := db.decodeTask(t, &s); err != nil {
			return nil, err
		}
		run := queue.NewPendingRun(t, seq)
		// The row says it is outside flow control, whatever its
		// definition: a flow block written before flow control existed
		// is inert.
		run.FlowKey = ""
		out = append(out, claimCandidate{task: t, run: run})
	}
	return out, nil
}

// mergeClaimable merges the plain candidates (in claim order, as read)
// with the keyed ones into claim order (queue.ClaimOrder), keeping count.
func mergeClaimable(plain, keyed []claimCandidate, count int) []claimCandidate {
	if len(keyed) == 0 {
		return plain
	}
	order := func(a, b claimCandidate) int { return queue.ClaimOrder(a.run, b.run) }
	slices.SortStableFunc(keyed, order)
	out := make([]claimCandidate, 0, min(count, len(plain)+len(keyed)))
	i, j := 0, 0
	for len(out) < count && (i < len(plain) || j < len(keyed)) {
		if j >= len(keyed) || (i < len(plain) && order(keyed[j], plain[i]) >= 0) {
			out = append(out, plain[i])
			i++
			continue
		}
		out = append(out, keyed[j])
		j++
	}
	return out
}
