package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hopper-ci/hopper/internal/queue"
)

// Handing created tasks over to waiting claims.
//
// When this process creates a task on a queue whose pending runs it knows
// exactly (a claim found the queue drained, and every run made pending
// since was one of its own creates), it hands the new task's state to the
// hub along with the wake-up. The claim that takes it then needs no look at
// the queue: it applies the claim to the state it was given and writes it
// with one conditional UPDATE that succeeds only if the task's runs in the
// database are still the ones created. That is one statement in one round
// trip, in place of a locking SELECT, the worker's record, the UPDATE, and
// BEGIN and COMMIT in two round trips.
//
// The condition keeps every rule the ordinary claim keeps: a task claimed
// by another process meanwhile, cancelled, or past its deadline does not
// match and is simply not claimed; two claims given the same task (they
// never are in one process) would serialise on its row, and the second
// would find its runs changed. Runs of tasks this process did not create
// here (another replica's, a retry, a rerun, a dependency satisfied) end
// the exact knowledge, and claims look in the database as before until a
// claim finds the queue drained again.

// maxOffers bounds the runs a queue's hub entry holds; past it, claims look
// in the database.
const maxOffers = 1024

// offer is a run this process made pending, with the state of its task as
// committed.
type offer struct {
	task    *queue.TaskState // never changed: claims work on a clone
	runsRaw string           // the runs column as written
	weight  int              // priority weight (queue.PriorityWeight)
}

// notifyOffers is Notify for runs made pending by tasks this process just
// created, whose states it hands over: a queue whose pending runs were
// known exactly keeps them as offers for the next claims.
func (h *Hub) notifyOffers(taskQueueID string, offers []offer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.queues[taskQueueID]
	if q == nil {
		return // no waiters: nothing is kept, nobody to wake
	}
	h.wakeLocked(taskQueueID, len(offers))
	if !q.exact || len(q.offers)+len(offers) > maxOffers {
		q.empty, q.exact, q.offers = false, false, nil
		return
	}
	q.empty = false
	q.offers = append(q.offers, offers...)
	// In claim order (queue.ClaimOrder): highest priority first; among
	// equals, the order they were made pending in (a stable sort).
	slices.SortStableFunc(q.offers, func(a, b offer) int { return b.weight - a.weight })
}

// takeOffers hands up to n offers of the queue to a claim. exact reports
// whether the queue's pending runs are known exactly; if not, the claim
// looks in the database. Exact with no offers means the queue is empty.
func (h *Hub) takeOffers(taskQueueID string, n int) (taken []offer, exact bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.queues[taskQueueID]
	if q == nil || !q.exact {
		return nil, false
	}
	n = min(n, len(q.offers))
	taken = slices.Clone(q.offers[:n])
	q.offers = slices.Delete(q.offers, 0, n)
	if len(q.offers) == 0 {
		q.offers, q.empty = nil, true
	}
	return taken, true
}

// wakeForOffers wakes one more waiter if offers are left: a claim that took
// all it asked for may have taken offers another waiter was woken for.
func (h *Hub) wakeForOffers(taskQueueID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if q := h.queues[taskQueueID]; q != nil && q.exact && len(q.offers) > 0 {
		h.wakeLocked(taskQueueID, 1)
	}
}

// offerPending is notifyPending for a task created in this transaction,
// whose state the hub may hand to a claim once it has committed.
func (t *txn) offerPending(state *queue.TaskState, runsRaw string) {
	q := state.Task.TaskQueueID
	t.notifyPending(q)
	if t.offers == nil {
		t.offers = map[string][]offer{}
	}
	t.offers[q] = append(t.offers[q], offer{task: state, runsRaw: runsRaw, weight: queue.PriorityWeight(state.Task.Priority)})
}

// maxOfferRounds bounds how often a claim takes more offers to replace
// ones it lost (to another replica's claim, a cancel).
const maxOfferRounds = 4

// claimHandedOver claims from the queue's offers if the hub knows the
// queue's pending runs exactly (exact); otherwise the caller looks in the
// database. Offers lost meanwhile are replaced by the next ones.
func (db *DB) claimHandedOver(ctx context.Context, p ClaimWorkParams) (res *ClaimResult, exact bool, err error) {
	res = &ClaimResult{}
	want := p.Count
	for round := 0; round < maxOfferRounds && want > 0; round++ {
		offers, exact := db.hub.takeOffers(p.TaskQueueID, want)
		if !exact {
			// Knowledge lost meanwhile: what was claimed stands; the
			// caller looks in the database only if nothing was.
			return res, round > 0, nil
		}
		if len(offers) == 0 {
			res.Skipped = round == 0
			return res, true, nil
		}
		got, err := db.claimOffers(ctx, p, offers)
		if err != nil {
			// The offers taken may still be pending: claims look in the
			// database until it is found drained again.
			db.hub.forgetEmpty(p.TaskQueueID)
			if len(res.Claims) > 0 {
				return res, true, nil // keep what was claimed
			}
			return nil, true, err
		}
		res.Claims = append(res.Claims, got.Claims...)
		res.Changes = append(res.Changes, got.Changes...)
		if !got.QuarantinedUntil.IsZero() {
			if len(res.Claims) == 0 {
				res.QuarantinedUntil = got.QuarantinedUntil
			}
			return res, true, nil // claims made before the quarantine stand
		}
		if len(got.Claims) == len(offers) {
			break // none lost
		}
		want -= len(got.Claims)
	}
	if len(res.Claims) == p.Count {
		db.hub.wakeForOffers(p.TaskQueueID)
	}
	return res, true, nil
}

// claimOffers claims the offered runs for the worker in one conditional
// UPDATE. Offers it could not claim were taken, cancelled or expired
// meanwhile; nothing is claimed for a quarantined worker, and the offers go
// back to the database's keeping (the hub forgets them).
func (db *DB) claimOffers(ctx context.Context, p ClaimWorkParams, offers []offer) (*ClaimResult, error) {
	type attempt struct {
		task   *queue.TaskState
		runID  int
		events []queue.Event
		offer  offer
	}
	attempts := make([]attempt, 0, len(offers))
	for _, o := range offers {
		task := o.task.Clone()
		last := task.LastRun()
		if last == nil || last.State != queue.StatePending {
			continue
		}
		var tr queue.Transition
		if err := task.Claim(last.RunID, p.WorkerGroup, p.WorkerID, p.Now, p.TakenUntil, &tr); err != nil {
			continue // past its deadline: the deadline resolves it
		}
		attempts = append(attempts, attempt{task: task, runID: last.RunID, events: tr.Events, offer: o})
	}
	res := &ClaimResult{}
	if len(attempts) == 0 {
		return res, nil
	}
	for _, a := range attempts {
		// Cached before the write, so the runs it encodes are cached with
		// the definition: the worker's report reads both back.
		db.defs.put(a.task.TaskID, a.task.DefinitionJSON, a.task.Task)
	}
	tasks := make([]*queue.TaskState, len(attempts))
	expected := make([]string, len(attempts))
	for i, a := range attempts {
		tasks[i], expected[i] = a.task, a.offer.runsRaw
	}
	claimed := map[string]bool{}
	st, err := db.claimOffersStatement(p, tasks, expected, claimed)
	if err != nil {
		return nil, err
	}
	err = db.tx(ctx, func(tx *txn) error {
		clear(claimed) // a re-run starts afresh
		tx.send(st)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, a := range attempts {
		if !claimed[a.task.TaskID] {
			continue
		}
		db.handedOver.Add(1)
		res.Claims = append(res.Claims, Claimed{Task: a.task, RunID: a.runID})
		res.Changes = append(res.Changes, Change{Task: a.task, Events: withStatus(a.events, a.task)})
	}
	if len(res.Claims) == 0 && p.CheckQuarantine {
		// The UPDATE claims nothing for a quarantined worker; tell that
		// apart from runs lost to other claims.
		w, err := db.GetWorker(ctx, WorkerKey{TaskQueueID: p.TaskQueueID, WorkerGroup: p.WorkerGroup, WorkerID: p.WorkerID}, p.Now)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		if w != nil && w.QuarantineUntil.After(p.Now) {
			db.hub.forgetEmpty(p.TaskQueueID)
			res.QuarantinedUntil = w.QuarantineUntil
			return res, nil
		}
	}
	return res, nil
}

// claimOffersStatement writes the claimed tasks whose runs in the database
// are still expected, of a worker not quarantined; claimed receives the
// taskIds written.
func (db *DB) claimOffersStatement(p ClaimWorkParams, tasks []*queue.TaskState, expected []string, claimed map[string]bool) (Statement, error) {
	n := len(tasks)
	ids, runs, states := make([]string, n), make([]string, n), make([]string, n)
	takenUntil, claimedAt := make([]int64, n), make([]int64, n)
	for i, task := range tasks {
		raw, err := db.encodeRuns(task)
		if err != nil {
			return Statement{}, err
		}
		d := derive(task)
		ids[i], runs[i], states[i] = task.TaskID, raw, d.state
		takenUntil[i], claimedAt[i] = d.takenUntil.Int64, d.claimedAt.Int64
	}
	var from string
	var args []any
	if db.dialect.Arrays {
		from = `unnest(CAST(? AS TEXT[]), CAST(? AS TEXT[]), CAST(? AS TEXT[]), CAST(? AS BIGINT[]), CAST(? AS BIGINT[]), CAST(? AS TEXT[]))
			AS v (column1, column2, column3, column4, column5, column6)`
		args = []any{ids, runs, states, takenUntil, claimedAt, expected}
	} else {
		values := make([]string, n)
		for i := range tasks {
			values[i] = "(CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS TEXT))"
			args = append(args, ids[i], runs[i], states[i], takenUntil[i], claimedAt[i], expected[i])
		}
		from = "(VALUES " + strings.Join(values, ", ") + ") AS v"
	}
	// A claimed run is running: unresolved, out of the pending order. The
	// rows are found by taskId: a condition on pending_seq or the queue
	// would let PostgreSQL's generic plan walk a partial index of pending
	// runs instead, which is long where a backlog waits.
	query := `UPDATE tasks SET runs = v.column2, state = v.column3, unresolved = 1, taken_until = v.column4,
		claimed_at = v.column5, pending_since = NULL, pending_seq = NULL
		FROM ` + from + `
		WHERE tasks.task_id = v.column1 AND tasks.runs = v.column6 AND tasks.state = 'pending'
			AND tasks.flow_key IS NULL AND tasks.deadline > ?`
	args = append(args, ms(p.Now))
	if p.CheckQuarantine {
		query += ` AND NOT EXISTS (SELECT 1 FROM workers
			WHERE task_queue_id = ? AND worker_group = ? AND worker_id = ? AND quarantine_until > ?)`
		args = append(args, p.TaskQueueID, p.WorkerGroup, p.WorkerID, ms(p.Now))
	}
	return Statement{Query: query + " RETURNING task_id", Args: args,
		What: fmt.Sprintf("claiming %d offered tasks", n),
		Rows: func(rows Rows) error {
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					return err
				}
				claimed[id] = true
			}
			return nil
		}}, nil
}
