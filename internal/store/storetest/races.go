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
	ctx := context.Background()
	const n = 60
	taskIDs := seqIDs("report-", n)
	createMany(t, stores, taskIDs, Epoch, func(int) []func(*queue.Task) { return []func(*queue.Task){withRetries(1)} })
	for left := n; left > 0; {
		res, err := stores[0].ClaimWork(ctx, store.ClaimWorkParams{TaskQueueID: testQueue, WorkerGroup: workerGroup, WorkerID: workerID,
			Count: 32, Now: Epoch, TakenUntil: Epoch.Add(claimTimeout)})
		require.NoError(t, err)
		require.NotEmpty(t, res.Claims)
		left -= len(res.Claims)
	}

	now := Epoch.Add(claimTimeout + time.Minute)
	reports := []string{queue.StateCompleted, queue.StateFailed, queue.ReasonWorkerShutdown}
	type outcome struct {
		winners []string
	}
	var (
		mu       sync.Mutex
		outcomes = map[string]*outcome{}
		errs     errorList
		wg       sync.WaitGroup
	)
	for _, id := range taskIDs {
		outcomes[id] = &outcome{}
	}
	win := func(id, by string) {
		mu.Lock()
		outcomes[id].winners = append(outcomes[id].winners, by)
		mu.Unlock()
	}
	start := make(chan struct{})
	for i, id := range taskIDs {
		for k, kind := range reports {
			s := stores[(i+k)%len(stores)]
			wg.Go(func() {
				<-start
				_, err := s.UpdateTask(ctx, store.UpdateTaskParams{TaskID: id, Now: now, Apply: report(kind, 0, now)})
				var qe *queue.Error
				switch {
				case err == nil:
					win(id, kind)
				case errors.As(err, &qe) && qe.Kind == queue.KindConflict:
				default:
					errs.add(fmt.Errorf("reporting %s on %s: %w", kind, id, err))
				}
			})
		}
	}
	// The sweeps work through the tasks one by one, mostly behind the
	// reporters; so each task also gets an expirer of its own, doing what
	// the sweep does for one task, to race the reporters head-on.
	takenUntil := Epoch.Add(claimTimeout)
	for i, id := range taskIDs {
		s := stores[i%len(stores)]
		wg.Go(func() {
			<-start
			res, err := s.UpdateTask(ctx, store.UpdateTaskParams{TaskID: id, Now: now, Apply: func(ts *queue.TaskState, tr *queue.Transition) error {
				ts.ExpireClaim(takenUntil, now, tr)
				return nil
			}})
			errs.add(err)
			if err == nil && len(res.Changes) > 0 {
				win(id, queue.ReasonClaimExpired)
			}
		})
	}
	for _, s := range stores {
		for range 2 {
			wg.Go(func() {
				<-start
				for range 5 {
					res, err := s.ExpireClaims(ctx, now, 1000)
					errs.add(err)
					if res == nil {
						continue
					}
					for _, c := range res.Changes {
						win(c.Task.TaskID, queue.ReasonClaimExpired)
					}
				}
			})
		}
	}
	close(start)
	wg.Wait()
	errs.require(t)

	tally := map[string]int{}
	tasks, err := stores[0].GetTasks(ctx, taskIDs)
	require.NoError(t, err)
	for _, ts := range tasks {
		winners := outcomes[ts.TaskID].winners
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
	t.Logf("report race winners over %d tasks: %v", n, tally)
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
	for left := 2 * n; left > 0; {
		res, err := stores[0].ClaimWork(ctx, store.ClaimWorkParams{TaskQueueID: testQueue, WorkerGroup: workerGroup, WorkerID: workerID,
			Count: 32, Now: Epoch, TakenUntil: Epoch.Add(claimTimeout)})
		require.NoError(t, err)
		require.NotEmpty(t, res.Claims)
		left -= len(res.Claims)
	}
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

	_, err := b.CreateTask(ctx, store.CreateTaskParams{TaskID: "t1", Task: NewTask(testQueue, Epoch, withGroup("t1"), withRetries(1)), Now: Epoch})
	require.NoError(t, err)
	requireSignal(t, ch, "createTask on the other replica")
	drain(ch)

	res, err := b.ClaimWork(ctx, store.ClaimWorkParams{TaskQueueID: testQueue, WorkerGroup: workerGroup, WorkerID: workerID,
		Count: 1, Now: Epoch, TakenUntil: Epoch.Add(claimTimeout)})
	require.NoError(t, err)
	require.Len(t, res.Claims, 1)
	requireNoSignal(t, ch, "a claim on the other replica") // claims never announce across processes

	exp, err := b.ExpireClaims(ctx, Epoch.Add(claimTimeout), 10)
	require.NoError(t, err)
	require.Len(t, exp.Changes, 1)
	requireSignal(t, ch, "a retry on the other replica")

	select {
	case <-other:
		t.Fatal("a subscriber of another queue was woken")
	default:
	}
}
