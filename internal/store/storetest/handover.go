package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// testClaimHandover: tasks created while the store knows its queue drained
// are handed to the waiting claims, which claim them by the same rules as a
// look in the database would: priority then creation order, never a task
// that changed meanwhile, nothing for a quarantined worker; and a run the
// store did not make pending itself sends claims back to the database.
func testClaimHandover(t *testing.T, open Opener) {
	e := setup(t, open)
	// A waiter makes the store keep what it knows of the queue.
	_, unsubscribe := hubOf(e.s).SubscribePending(testQueue, 32)
	defer unsubscribe()
	now := Epoch.Add(time.Minute)
	claim := func(worker string, count int, woken bool) *store.ClaimResult {
		t.Helper()
		res, err := e.s.ClaimWork(e.ctx, store.ClaimWorkParams{
			TaskQueueID: testQueue, WorkerGroup: workerGroup, WorkerID: worker, Count: count,
			Now: now, TakenUntil: now.Add(claimTimeout), CheckQuarantine: true, SkipKnownEmpty: true, Woken: woken,
		})
		require.NoError(t, err)
		require.Len(t, res.Changes, len(res.Claims))
		requireStatusFilled(t, res.Changes)
		return res
	}
	// Runs handed over so far, where the store counts them.
	handedOver := func() uint64 {
		if c, ok := e.s.(interface{ CombinedStats() store.CombinedStats }); ok {
			return c.CombinedStats().HandedOverRuns
		}
		return 0
	}
	counted := func() bool { _, ok := e.s.(interface{ CombinedStats() store.CombinedStats }); return ok }
	ids := func(res *store.ClaimResult) []string {
		var out []string
		for _, c := range res.Claims {
			out = append(out, c.Task.TaskID)
		}
		return out
	}

	require.Empty(t, claim("w1", 1, false).Claims, "the queue is drained")
	e.create("low-1", Epoch, withPriority("low"))
	e.create("high", Epoch, withPriority("high"))
	e.create("gone", Epoch, withPriority("high"))
	e.create("low-2", Epoch, withPriority("low"))
	e.create("late", Epoch, withPriority("low"), withDeadline(Epoch.Add(30*time.Second)))
	// Cancelled after it was offered: its runs are no longer the ones
	// created, so no claim takes it.
	e.mustApply("gone", Epoch, cancel(Epoch))

	res := claim("w1", 2, true)
	require.Equal(t, []string{"high", "low-1"}, ids(res), "a lost offer is replaced by the next")
	for _, c := range res.Claims {
		require.Equal(t, queue.StateRunning, c.Task.State())
		require.Equal(t, []string{queue.EventTaskRunning}, eventKinds(res.Changes, c.Task.TaskID))
		stored := e.get(c.Task.TaskID)
		require.Equal(t, queue.StateRunning, stored.State())
		require.Equal(t, "w1", stored.Runs[c.RunID].WorkerID)
		require.Equal(t, now.Add(claimTimeout).UnixMilli(), stored.Runs[c.RunID].TakenUntil.Millis())
	}
	require.Equal(t, queue.StateException, e.get("gone").State(), "a cancelled task stays cancelled")
	if counted() {
		require.Equal(t, uint64(2), handedOver(), "both were handed over")
	}

	// A quarantined worker claims nothing, and the offer it was handed
	// goes back to the database's keeping.
	w2 := store.WorkerKey{TaskQueueID: testQueue, WorkerGroup: workerGroup, WorkerID: "w2"}
	_, err := e.s.TouchWorker(e.ctx, store.TouchWorkerParams{Key: w2, Now: now, Expires: now.Add(time.Hour)})
	require.NoError(t, err)
	_, err = e.s.QuarantineWorker(e.ctx, store.QuarantineWorkerParams{Key: w2, Now: now, QuarantineUntil: now.Add(time.Hour)})
	require.NoError(t, err)
	res = claim("w2", 1, true)
	require.Empty(t, res.Claims)
	require.Equal(t, now.Add(time.Hour).UnixMilli(), res.QuarantinedUntil.UnixMilli())
	require.Equal(t, queue.StatePending, e.get("low-2").State())

	// Past its deadline: left for the deadline to resolve.
	res = claim("w1", 32, false)
	require.Equal(t, []string{"low-2"}, ids(res), "found in the database again; the late task is not claimable")
	if counted() {
		require.Equal(t, uint64(2), handedOver(), "the queue was not known exactly")
	}
	require.Equal(t, queue.StatePending, e.get("late").State())
	require.Empty(t, claim("w1", 1, false).Claims)

	// Found drained again: offers are handed over; a retry (a run the
	// store did not create) sends the next claim to the database, which
	// hands out both in the order they became pending.
	e.create("new", Epoch)
	e.bring("retried", queue.StatePending)
	e.claim("retried", now)
	e.mustApply("retried", now, report(queue.ReasonWorkerShutdown, 0, now))
	res = claim("w1", 32, true)
	require.Equal(t, []string{"new", "retried"}, ids(res))
	if counted() {
		require.Equal(t, uint64(2), handedOver(), "a retry makes claims look in the database")
	}
	require.Equal(t, 1, res.Claims[1].RunID)

	pending, claimed := e.counts(now)
	require.Equal(t, 0, pending)
	require.Equal(t, 5, claimed)
}

// eventKinds lists the kinds of the events of taskID's change.
func eventKinds(changes []store.Change, taskID string) []string {
	var kinds []string
	for _, c := range changes {
		if c.Task.TaskID != taskID {
			continue
		}
		for _, ev := range c.Events {
			kinds = append(kinds, ev.Kind)
		}
	}
	return kinds
}

// testHandoverRace: claimers waiting on every replica while tasks are
// created through all of them, some cancelled as they arrive: runs handed
// over in one process race claims looking in the database from the others,
// and every task is claimed at most once, by the claimer the store records,
// and every task not cancelled is claimed.
func testHandoverRace(t *testing.T, stores []store.Store) {
	const (
		tasks    = 240
		creators = 4
		claimers = 8
	)
	r := &handoverRace{now: Epoch.Add(time.Minute), owner: map[string]string{}, claims: map[string]int{}, done: make(chan struct{})}
	var wg sync.WaitGroup
	for c := range claimers {
		wg.Go(func() { r.claimer(stores[c%len(stores)], c) })
	}
	var created sync.WaitGroup
	for c := range creators {
		created.Go(func() { r.creator(stores[c%len(stores)], c, creators, tasks) })
	}
	created.Wait()
	require.Eventually(t, func() bool { return r.settled.Load() >= tasks }, 30*time.Second, 10*time.Millisecond,
		"every task not cancelled is claimed")
	close(r.done)
	wg.Wait()
	r.errs.require(t)
	r.check(t, stores, tasks)
}

// handoverRace is the shared state of testHandoverRace's claimers and
// creators.
type handoverRace struct {
	now       time.Time
	mu        sync.Mutex
	owner     map[string]string // task → the worker that claimed it
	claims    map[string]int    // task → how often it was claimed
	settled   atomic.Int64      // claimed or cancelled before a claim
	cancelled sync.Map          // tasks cancelled while pending
	errs      errorList
	done      chan struct{} // closed once every task is settled
}

// record counts the claims worker got.
func (r *handoverRace) record(worker string, res *store.ClaimResult) {
	r.mu.Lock()
	for _, cl := range res.Claims {
		r.claims[cl.Task.TaskID]++
		r.owner[cl.Task.TaskID] = worker
	}
	r.mu.Unlock()
	r.settled.Add(int64(len(res.Claims)))
}

// claimer c long-polls as a worker "claimer-<c>" would, for 1 to 3 runs,
// until the race is done.
func (r *handoverRace) claimer(s store.Store, c int) {
	worker := fmt.Sprintf("claimer-%d", c)
	// Half the claimers wait as claimWork does, armed: creates in their
	// process claim for them (direct.go).
	var claimant *store.Claimant
	if c%2 == 0 {
		claimant = &store.Claimant{WorkerGroup: workerGroup, WorkerID: worker, ClaimTimeout: claimTimeout}
	}
	for {
		if !r.longPoll(s, worker, 1+c%3, claimant) {
			return
		}
		select {
		case <-r.done:
			return
		default:
		}
	}
}

// longPoll is one claimWork call: it claims from the database, waits on
// the hub for up to 50 ms between tries, and takes what was claimed for it
// as it leaves. It reports false after an error.
func (r *handoverRace) longPoll(s store.Store, worker string, count int, claimant *store.Claimant) bool {
	waiting := hubOf(s).WaitForWork(testQueue, count, claimant, nil)
	woken := false
	for poll := time.After(50 * time.Millisecond); ; {
		res := waiting.Claimed()
		if res == nil {
			var err error
			res, err = s.ClaimWork(context.Background(), store.ClaimWorkParams{
				TaskQueueID: testQueue, WorkerGroup: workerGroup, WorkerID: worker, Count: count,
				Now: r.now, TakenUntil: r.now.Add(claimTimeout), CheckQuarantine: true, SkipKnownEmpty: true, Woken: woken,
			})
			if err != nil {
				r.errs.add(fmt.Errorf("%s: %w", worker, err))
				waiting.Leave()
				return false
			}
		}
		r.record(worker, res)
		if len(res.Claims) > 0 {
			break // answered: the worker polls again
		}
		waiting.Arm()
		select {
		case <-waiting.C:
			woken = true
			continue
		case <-poll:
		case <-r.done:
		}
		break
	}
	if res := waiting.Leave(); res != nil {
		r.record(worker, res)
	}
	return true
}

// creator c creates every creators-th of the tasks, alternating low and
// high priority, and cancels every tenth as it arrives.
func (r *handoverRace) creator(s store.Store, c, creators, tasks int) {
	ctx := context.Background()
	for i := c; i < tasks; i += creators {
		id := fmt.Sprintf("handover-%03d", i)
		_, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: id, Task: NewTask(testQueue, Epoch, withGroup("handover"),
			withPriority([]string{"low", "high"}[i%2])), Now: Epoch})
		if err != nil {
			r.errs.add(err)
			return
		}
		if i%10 == 0 {
			res, err := s.UpdateTask(ctx, store.UpdateTaskParams{TaskID: id, Now: r.now, Apply: cancel(r.now)})
			if err != nil {
				r.errs.add(err)
				return
			}
			if res.Task != nil && len(res.Task.Runs) == 1 && res.Task.Runs[0].WorkerID == "" {
				r.cancelled.Store(id, true) // cancelled while pending
				r.settled.Add(1)
			}
		}
	}
}

// check checks that every task was claimed once, by the claimer the store
// records, or, if cancelled while pending, never.
func (r *handoverRace) check(t *testing.T, stores []store.Store, tasks int) {
	var handedOver, atCreate uint64
	for _, s := range stores {
		if c, ok := s.(interface{ CombinedStats() store.CombinedStats }); ok {
			handedOver += c.CombinedStats().HandedOverRuns
			atCreate += c.CombinedStats().ClaimedAtCreate
		}
	}
	n := 0
	r.cancelled.Range(func(any, any) bool { n++; return true })
	t.Logf("%d tasks on %d replica(s): %d cancelled while pending, %d runs handed over, %d claimed at create", tasks, len(stores), n, handedOver, atCreate)
	ids := make([]string, 0, tasks)
	for i := range tasks {
		ids = append(ids, fmt.Sprintf("handover-%03d", i))
	}
	all, err := stores[0].GetTasks(context.Background(), ids)
	require.NoError(t, err)
	require.Len(t, all, tasks)
	for _, ts := range all {
		if _, ok := r.cancelled.Load(ts.TaskID); ok {
			require.Zero(t, r.claims[ts.TaskID], "%s was claimed after it was cancelled", ts.TaskID)
			continue
		}
		require.Equal(t, 1, r.claims[ts.TaskID], "%s claimed %d times", ts.TaskID, r.claims[ts.TaskID])
		require.Len(t, ts.Runs, 1, ts.TaskID)
		require.Equal(t, r.owner[ts.TaskID], ts.Runs[0].WorkerID, "the store records the claimer that got %s", ts.TaskID)
	}
}
