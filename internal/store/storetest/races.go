package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// testReportRace: for each running task whose claim has run out, three
// reporters, an expirer and the claim-expiry sweeps of every replica race;
// exactly one of them resolves the run, the reporters that lose are refused
// with a conflict, and the expiry that loses changes nothing.
func testReportRace(t *testing.T, stores []store.Store) {
	const n = 60
	taskIDs := seqIDs("report-", n)
	createMany(t, stores, taskIDs, Epoch, func(int) []func(*queue.Task) { return []func(*queue.Task){withRetries(1)} })
	claimAll(t, stores[0], n)

	r := &reportRace{now: Epoch.Add(claimTimeout + time.Minute), winners: map[string][]string{}, start: make(chan struct{})}
	for i, id := range taskIDs {
		for k, kind := range []string{queue.StateCompleted, queue.StateFailed, queue.ReasonWorkerShutdown} {
			r.wg.Go(func() { r.report(stores[(i+k)%len(stores)], id, kind) })
		}
	}
	// The sweeps work through the tasks one by one, mostly behind the
	// reporters; so each task also gets an expirer of its own, doing what
	// the sweep does for one task, to race the reporters head-on.
	for i, id := range taskIDs {
		r.wg.Go(func() { r.expire(stores[i%len(stores)], id, Epoch.Add(claimTimeout)) })
	}
	for _, s := range stores {
		for range 2 {
			r.wg.Go(func() { r.sweep(s) })
		}
	}
	close(r.start)
	r.wg.Wait()
	r.errs.require(t)
	r.check(t, stores[0], taskIDs)
}

// reportRace is the shared state of testReportRace's racers, which start
// together when start closes.
type reportRace struct {
	now     time.Time
	start   chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	winners map[string][]string // task → what resolved its run
	errs    errorList
}

// win records that by resolved task id's run.
func (r *reportRace) win(id, by string) {
	r.mu.Lock()
	r.winners[id] = append(r.winners[id], by)
	r.mu.Unlock()
}

// report reports run 0 of task id resolved as kind; losing is a conflict.
func (r *reportRace) report(s store.Store, id, kind string) {
	<-r.start
	_, err := s.UpdateTask(context.Background(), store.UpdateTaskParams{TaskID: id, Now: r.now, Apply: report(kind, 0, r.now)})
	var qe *queue.Error
	switch {
	case err == nil:
		r.win(id, kind)
	case errors.As(err, &qe) && qe.Kind == queue.KindConflict:
	default:
		r.errs.add(fmt.Errorf("reporting %s on %s: %w", kind, id, err))
	}
}

// expire expires task id's claim (taken until takenUntil) as the sweep
// would; losing changes nothing.
func (r *reportRace) expire(s store.Store, id string, takenUntil time.Time) {
	<-r.start
	res, err := s.UpdateTask(context.Background(), store.UpdateTaskParams{TaskID: id, Now: r.now, Apply: func(ts *queue.TaskState, tr *queue.Transition) error {
		ts.ExpireClaim(takenUntil, r.now, tr)
		return nil
	}})
	r.errs.add(err)
	if err == nil && len(res.Changes) > 0 {
		r.win(id, queue.ReasonClaimExpired)
	}
}

// sweep runs the claim-expiry sweep five times.
func (r *reportRace) sweep(s store.Store) {
	<-r.start
	for range 5 {
		res, err := s.ExpireClaims(context.Background(), r.now, 1000)
		r.errs.add(err)
		if res == nil {
			continue
		}
		for _, c := range res.Changes {
			r.win(c.Task.TaskID, queue.ReasonClaimExpired)
		}
	}
}

// check checks that exactly one racer resolved each task, and the task's
// runs are what that racer makes of them.
func (r *reportRace) check(t *testing.T, s store.Store, taskIDs []string) {
	tally := map[string]int{}
	tasks, err := s.GetTasks(context.Background(), taskIDs)
	require.NoError(t, err)
	for _, ts := range tasks {
		winners := r.winners[ts.TaskID]
		require.Len(t, winners, 1, "winners on %s: %v", ts.TaskID, winners)
		by := winners[0]
		tally[by]++
		run0 := ts.Runs[0]
		switch by {
		case queue.StateCompleted, queue.StateFailed:
			require.Equal(t, by, run0.State)
			require.Len(t, ts.Runs, 1)
		default:
			require.Equal(t, queue.StateException, run0.State)
			require.Equal(t, by, run0.ReasonResolved)
			require.Len(t, ts.Runs, 2, "one retry run for %s", ts.TaskID)
			require.Equal(t, queue.StatePending, ts.Runs[1].State)
		}
	}
	t.Logf("report race winners over %d tasks: %v", len(taskIDs), tally)
}

// testCreateRace: the same createTask sent many times at once (a client
// retrying) creates the task once and answers every request.
func testCreateRace(t *testing.T, stores []store.Store) {
	ctx := context.Background()
	const tasks, senders = 20, 6
	var (
		mu      sync.Mutex
		defined = map[string]int{}
		errs    errorList
		wg      sync.WaitGroup
	)
	start := make(chan struct{})
	for i := range tasks {
		id := fmt.Sprintf("same-%02d", i)
		for k := range senders {
			s := stores[k%len(stores)]
			wg.Go(func() {
				<-start
				res, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: id, Task: NewTask(testQueue, Epoch, withGroup("g")), Now: Epoch})
				if err != nil {
					errs.add(fmt.Errorf("sender %d of %s: %w", k, id, err))
					return
				}
				if res.Task == nil || res.Task.TaskID != id {
					errs.add(fmt.Errorf("sender %d of %s: no status in the reply", k, id))
				}
				mu.Lock()
				defined[id] += len(res.Changes)
				mu.Unlock()
			})
		}
	}
	close(start)
	wg.Wait()
	errs.require(t)
	for i := range tasks {
		id := fmt.Sprintf("same-%02d", i)
		require.Equal(t, 1, defined[id], "changes reported for %s", id)
	}
	pending, _, err := stores[0].TaskQueueCounts(ctx, testQueue, Epoch)
	require.NoError(t, err)
	require.Equal(t, tasks, pending)
}

// testDependencyRace: dependencies resolving concurrently with each other
// and with the creation of their dependents never leave a dependent
// waiting on an edge that is in fact satisfied.
func testDependencyRace(t *testing.T, stores []store.Store) {
	ctx := context.Background()
	const n = 40
	var d1, d2, x, y []string
	for i := range n {
		d1 = append(d1, fmt.Sprintf("d1-%03d", i))
		d2 = append(d2, fmt.Sprintf("d2-%03d", i))
		x = append(x, fmt.Sprintf("x-%03d", i))
		y = append(y, fmt.Sprintf("y-%03d", i))
	}
	createMany(t, stores, append(append([]string{}, d1...), d2...), Epoch, nil)
	claimAll(t, stores[0], 2*n)
	createMany(t, stores, x, Epoch, func(i int) []func(*queue.Task) {
		return []func(*queue.Task){withDeps(d1[i], d2[i])}
	})

	now := Epoch.Add(time.Minute)
	var errs errorList
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		for k, dep := range []string{d1[i], d2[i]} {
			s := stores[k%len(stores)]
			wg.Go(func() {
				<-start
				_, err := s.UpdateTask(ctx, store.UpdateTaskParams{TaskID: dep, Now: now, Apply: report(queue.StateCompleted, 0, now)})
				errs.add(err)
			})
		}
		// y depends on d1 and is created while d1 completes.
		s := stores[(i+1)%len(stores)]
		wg.Go(func() {
			<-start
			_, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: y[i], Now: now,
				Task: NewTask(testQueue, now, withGroup(y[i]), withDeps(d1[i]))})
			errs.add(err)
		})
	}
	close(start)
	wg.Wait()
	errs.require(t)

	tasks, err := stores[0].GetTasks(ctx, append(append([]string{}, x...), y...))
	require.NoError(t, err)
	require.Len(t, tasks, 2*n)
	for _, ts := range tasks {
		require.Equal(t, queue.StatePending, ts.State(), "%s must be scheduled once its dependencies completed", ts.TaskID)
		require.Len(t, ts.Runs, 1)
	}
}

// testCrossProcessWakeup: a subscriber on one replica hears runs made
// pending through the other.
func testCrossProcessWakeup(t *testing.T, stores []store.Store) {
	ctx := context.Background()
	a, b := stores[0], stores[1]
	ch, unsubscribe := hubOf(a).SubscribePending(testQueue, 1)
	defer unsubscribe()
	other, unsubscribeOther := hubOf(a).SubscribePending("prov/other", 1)
	defer unsubscribeOther()
	// The observers (OnPending: the provisioner's wake-up) of both
	// replicas hear of every run made pending, whoever waits.
	observed, observedLocally := observe(a), observe(b)

	_, err := b.CreateTask(ctx, store.CreateTaskParams{TaskID: "t1", Task: NewTask(testQueue, Epoch, withGroup("t1"), withRetries(1)), Now: Epoch})
	require.NoError(t, err)
	requireSignal(t, ch, "createTask on the other replica")
	requireSignal(t, observed, "createTask on the other replica (an observer)")
	requireSignal(t, observedLocally, "createTask on the observer's replica")
	drain(ch)
	drain(observed)
	drain(observedLocally)

	res, err := b.ClaimWork(ctx, store.ClaimWorkParams{TaskQueueID: testQueue, WorkerGroup: workerGroup, WorkerID: workerID,
		Count: 1, Now: Epoch, TakenUntil: Epoch.Add(claimTimeout)})
	require.NoError(t, err)
	require.Len(t, res.Claims, 1)
	requireNoSignal(t, ch, "a claim on the other replica") // claims never announce across processes
	requireNoSignal(t, observed, "a claim on the other replica (an observer)")

	exp, err := b.ExpireClaims(ctx, Epoch.Add(claimTimeout), 10)
	require.NoError(t, err)
	require.Len(t, exp.Changes, 1)
	requireSignal(t, ch, "a retry on the other replica")
	requireSignal(t, observed, "a retry on the other replica (an observer)")

	select {
	case <-other:
		t.Fatal("a subscriber of another queue was woken")
	default:
	}
}

// observe registers an observer of the store's announcements that
// signals the test queue's.
func observe(s store.Store) <-chan struct{} {
	ch := make(chan struct{}, 1)
	hubOf(s).OnPending(func(taskQueueID string) {
		if taskQueueID == testQueue {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	})
	return ch
}
