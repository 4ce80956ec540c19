package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
)

// Claiming at create.
//
// A claimWork call that waits on a queue whose pending runs this process
// knows exactly, with none left over (the hand-over's knowledge,
// handover.go), is the next to get whatever is created there. A batch of
// creates then claims the new runs for such calls in its own transaction:
// each task goes into the database already claimed by the waiting worker,
// and the call is handed its claims once the batch has committed. That
// saves the claim's own transaction (a second version of every task row,
// with an entry in each of the row's indexes, its commit and its round
// trip): of the three writes of a task's life-cycle, two remain.
//
// The rules of an ordinary claim still hold. Only a call that is waiting
// and armed (it looked and found nothing, and is not looking now) is
// claimed for, so it never gets two answers; it leaves the hub's list
// while the batch runs, so no wake-up is spent on it. The batch fails,
// and its creates are run again alone, if one of the workers it claims for
// is quarantined; that worker's call is not claimed for again. The new
// tasks' events are the creator's to publish, in their order: defined,
// pending, running. A call that goes away while its claims are being made
// finds them when it leaves (Waiting.Leave) and answers with them if it
// can still answer; a worker that is gone by then leaves its claims to
// expire, as with any claimWork reply lost on the way.

// Claimant is what a create needs to claim runs for a waiting claimWork.
type Claimant struct {
	WorkerGroup, WorkerID string
	// ClaimTimeout is how long a claim made at a given time holds.
	ClaimTimeout time.Duration
	// Alive, if set, reports whether the call can still answer. It is
	// asked with the hub's lock held, and must not wait.
	Alive func() bool
}

func (c *Claimant) alive() bool { return c.Alive == nil || c.Alive() }

// Waiting is a claimWork call registered with the hub.
type Waiting struct {
	// C receives a wake-up: runs were made pending (claim them), or runs
	// were claimed for the call (Claimed).
	C <-chan struct{}

	h       *Hub
	queueID string
	q       *waiters
	w       *waiter
	once    sync.Once
	left    *ClaimResult
}

// Wait registers a waiter on a task queue that claims up to capacity runs
// when woken; woken, if not nil, is started in a goroutine of its own each
// time a wake-up is put in C. With a claimant, creates may claim runs for
// the waiter while it is armed (Arm).
func (h *Hub) Wait(taskQueueID string, capacity int, c *Claimant, woken func()) *Waiting {
	w := &waiter{ch: make(chan struct{}, 1), capacity: max(capacity, 1), woken: woken, claimant: c}
	q := h.subscribe(taskQueueID, w)
	return &Waiting{C: w.ch, h: h, queueID: taskQueueID, q: q, w: w}
}

// Arm says the call is waiting, not looking: a create may claim runs for
// it until it is woken. A call holding a wake-up it has not taken stays
// unarmed: it is about to look.
func (wt *Waiting) Arm() {
	wt.h.mu.Lock()
	defer wt.h.mu.Unlock()
	if len(wt.w.ch) == 0 && wt.w.claimant != nil && !wt.w.noDirect {
		wt.w.armed = true
	}
}

// Claimed returns the runs a create claimed for the call, once; nil if
// none. The wake-up that announced them has been taken from C.
func (wt *Waiting) Claimed() *ClaimResult {
	wt.h.mu.Lock()
	defer wt.h.mu.Unlock()
	res := wt.w.claimed
	wt.w.claimed = nil
	return res
}

// Leave unsubscribes the call, after any claim being made for it has
// settled, and returns the runs claimed for it that it had not taken: the
// call answers with them if it can. Later calls return nil.
func (wt *Waiting) Leave() *ClaimResult {
	wt.once.Do(func() { wt.left = wt.h.leave(wt.queueID, wt.q, wt.w) })
	res := wt.left
	wt.left = nil
	return res
}

// reservation is a waiting call a batch of creates claims runs for.
type reservation struct {
	queueID string
	q       *waiters
	w       *waiter
	planned []*directClaim // the tasks it is given, highest priority first
}

// reserve takes armed claimants of the queue, longest-waiting first, with
// room for up to runs runs, out of its list, if the queue's pending runs
// are known exactly and none is waiting (new runs would otherwise go ahead
// of older ones).
func (h *Hub) reserve(taskQueueID string, runs int) []*reservation {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.queues[taskQueueID]
	if q == nil || !q.exact || len(q.offers) > 0 {
		return nil
	}
	var out []*reservation
	for w := q.first; w != nil && runs > 0; {
		next := w.next
		if w.armed && w.reserved == nil && len(w.ch) == 0 && w.claimant.alive() {
			q.remove(w)
			w.armed = false
			w.reserved = make(chan struct{})
			q.reserved++
			out = append(out, &reservation{queueID: taskQueueID, q: q, w: w})
			runs -= w.capacity
		}
		w = next
	}
	return out
}

// settle ends a reservation: the waiter goes back to its queue's list and,
// given claims, is woken to take them; given none, it waits armed again
// unless excused (a create's claim for it failed: it claims for itself).
func (h *Hub) settle(r *reservation, res *ClaimResult, excused bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w, q := r.w, r.q
	q.reserved--
	q.push(w)
	close(w.reserved)
	w.reserved = nil
	if res == nil {
		w.armed, w.noDirect = !excused, excused
		return
	}
	w.claimed = res
	select {
	case w.ch <- struct{}{}: // empty: nothing else wakes a reserved waiter
	default:
	}
	if w.woken != nil {
		go w.woken()
	}
}

// directClaim is a task of a batch of creates claimed as it is created.
type directClaim struct {
	r      *reservation
	state  *queue.TaskState // as written: claimed
	events []queue.Event    // the claim's
}

// planDirectClaims reserves waiting claimants for the batch's tasks and
// assigns them, queue by queue, in claim order (queue.ClaimOrder): highest
// priority first, then in the order the batch numbers its pending runs (by
// taskId).
func (db *DB) planDirectClaims(batch []*createCall) (map[string]*directClaim, []*reservation) {
	byQueue := map[string][]*createCall{}
	for _, c := range batch {
		byQueue[c.p.Task.TaskQueueID] = append(byQueue[c.p.Task.TaskQueueID], c)
	}
	var direct map[string]*directClaim
	var all []*reservation
	for queueID, calls := range byQueue {
		rs := db.hub.reserve(queueID, len(calls))
		if len(rs) == 0 {
			continue
		}
		all = append(all, rs...)
		slices.SortStableFunc(calls, func(a, b *createCall) int {
			if d := queue.PriorityWeight(b.p.Task.Priority) - queue.PriorityWeight(a.p.Task.Priority); d != 0 {
				return d
			}
			return strings.Compare(a.p.TaskID, b.p.TaskID)
		})
		i := 0
		for _, r := range rs {
			for ; len(r.planned) < r.w.capacity && i < len(calls); i++ {
				if direct == nil {
					direct = map[string]*directClaim{}
				}
				dc := &directClaim{r: r}
				direct[calls[i].p.TaskID] = dc
				r.planned = append(r.planned, dc)
			}
		}
	}
	return direct, all
}

// claim claims the new task's first run for the reservation's waiter;
// false if it cannot be (the task is then created pending).
func (dc *directClaim) claim(state *queue.TaskState, now time.Time) bool {
	claimed := state.Clone()
	last := claimed.LastRun()
	if last == nil || last.State != queue.StatePending {
		return false
	}
	c := dc.r.w.claimant
	var tr queue.Transition
	if err := claimed.Claim(last.RunID, c.WorkerGroup, c.WorkerID, now, now.Add(c.ClaimTimeout), &tr); err != nil {
		return false
	}
	dc.state, dc.events = claimed, tr.Events
	return true
}

// made reports whether the task was claimed as planned (see claim).
func (dc *directClaim) made() bool { return dc.state != nil }

// quarantineCondition is an SQL condition true if none of the workers the
// batch claims for is quarantined at now. The workers are joined from a
// list, so each is one look-up by the table's key (a disjunction of the
// keys had PostgreSQL scan the whole table, dead rows of the fleet's
// touches included: 100 ms a batch beside 10,000 waiting workers).
func quarantineCondition(reserved []*reservation, now time.Time) (string, []any) {
	var values []string
	var args []any
	for _, r := range reserved {
		if !slices.ContainsFunc(r.planned, (*directClaim).made) {
			continue
		}
		values = append(values, "(CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT))")
		args = append(args, r.queueID, r.w.claimant.WorkerGroup, r.w.claimant.WorkerID)
	}
	if len(values) == 0 {
		return "", nil
	}
	return `NOT EXISTS (SELECT 1 FROM (VALUES ` + strings.Join(values, ", ") + `) AS v
		JOIN workers ON workers.task_queue_id = v.column1 AND workers.worker_group = v.column2 AND workers.worker_id = v.column3
		WHERE workers.quarantine_until > ?)`, append(args, ms(now))
}

// errClaimantQuarantined abandons a batch that claimed for a quarantined
// worker.
var errClaimantQuarantined = errors.New("store: a waiting worker the batch claimed for is quarantined")

// quarantineStatement fails the transaction (errClaimantQuarantined) if a
// worker the batch claims for is quarantined; for dialects without an
// assert function.
func quarantineStatement(cond string, args []any) Statement {
	return Statement{Query: "SELECT CASE WHEN " + cond + " THEN 1 ELSE 0 END", Args: args,
		What: "checking the waiting workers for quarantine",
		Rows: func(rows Rows) error {
			var ok int
			if err := scanOne(rows, &ok); err != nil {
				return err
			}
			if ok == 0 {
				return errClaimantQuarantined
			}
			return nil
		}}
}

// settleDirectClaims hands each reserved call its claims after the batch
// committed (ok), or sends it back to waiting. After a failure, the calls
// whose workers are quarantined are excused from further claims at create.
func (db *DB) settleDirectClaims(ctx context.Context, reserved []*reservation, ok bool, now time.Time) {
	for _, r := range reserved {
		var claims []Claimed
		for _, dc := range r.planned {
			if ok && dc.made() {
				// Cached for the worker's reports, which read it back.
				db.defs.put(dc.state.TaskID, dc.state.DefinitionJSON, dc.state.Task)
				claims = append(claims, Claimed{Task: dc.state, RunID: dc.state.LastRun().RunID})
			}
		}
		if len(claims) > 0 {
			db.claimedAtCreate.Add(uint64(len(claims)))
			db.hub.settle(r, &ClaimResult{Claims: claims}, false)
			continue
		}
		db.hub.settle(r, nil, !ok && db.claimantQuarantined(ctx, r, now))
	}
}

// claimantQuarantined reports whether the reserved call's worker is
// quarantined (or its record cannot be read: then it is not claimed for
// again either).
func (db *DB) claimantQuarantined(ctx context.Context, r *reservation, now time.Time) bool {
	c := r.w.claimant
	w, err := db.GetWorker(ctx, WorkerKey{TaskQueueID: r.queueID, WorkerGroup: c.WorkerGroup, WorkerID: c.WorkerID}, now)
	if errors.Is(err, ErrNotFound) {
		return false
	}
	return err != nil || w.QuarantineUntil.After(now)
}

// directResult is a created task's result when its first run was claimed
// as it was created: the creator publishes the claim's events after its
// own.
func directResult(res *Result, dc *directClaim) *Result {
	res.Changes = append(res.Changes, Change{Task: dc.state, Events: withStatus(dc.events, dc.state)})
	return res
}
