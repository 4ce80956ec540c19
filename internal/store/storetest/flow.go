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

// withFlow sets the task's extra.flow block.
func withFlow(block string) func(*queue.Task) {
	return withExtra(`{"flow": ` + block + `}`)
}

// flowClaim is claimWork for the standard worker, answering the claimed
// taskIds in claim order.
func (e *env) flowClaim(count int, now time.Time) (*store.ClaimResult, []string) {
	e.t.Helper()
	res, err := e.s.ClaimWork(e.ctx, store.ClaimWorkParams{
		TaskQueueID: testQueue, WorkerGroup: workerGroup, WorkerID: workerID,
		Count: count, Now: now, TakenUntil: now.Add(claimTimeout),
	})
	require.NoError(e.t, err)
	requireStatusFilled(e.t, res.Changes)
	ids := []string{}
	for _, c := range res.Claims {
		ids = append(ids, c.Task.TaskID)
	}
	return res, ids
}

// flowKey loads one key of testQueue.
func (e *env) flowKey(key string) store.FlowKey {
	e.t.Helper()
	keys, err := e.s.FlowKeys(e.ctx, testQueue)
	require.NoError(e.t, err)
	for _, k := range keys {
		if k.Key == key {
			return k
		}
	}
	e.t.Fatalf("flow key %s not found in %+v", key, keys)
	return store.FlowKey{}
}

func testFlowLimit(t *testing.T, open Opener) {
	e := setup(t, open)
	for i := range 5 {
		e.create(fmt.Sprintf("k%d", i+1), Epoch.Add(time.Duration(i)*time.Millisecond), withFlow(`{"key": "deploy", "limit": 2}`))
	}
	e.create("p1", Epoch.Add(10*time.Millisecond))
	e.create("p2", Epoch.Add(11*time.Millisecond))
	now := Epoch.Add(time.Minute)

	// One task of a key per claim, in the claim order of everything else.
	_, ids := e.flowClaim(10, now)
	require.Equal(t, []string{"k1", "p1", "p2"}, ids)
	_, ids = e.flowClaim(10, now)
	require.Equal(t, []string{"k2"}, ids)
	// At its limit, the key gives nothing, and tasks without a key still
	// come out.
	e.create("p3", Epoch.Add(12*time.Millisecond))
	_, ids = e.flowClaim(10, now)
	require.Equal(t, []string{"p3"}, ids)
	_, ids = e.flowClaim(10, now)
	require.Empty(t, ids)
	require.Equal(t, store.FlowKey{TaskQueueID: testQueue, Key: "deploy", Limit: 2, Pending: 3, Running: 2}, e.flowKey("deploy"))
	require.Equal(t, 3, e.flowKey("deploy").Limited())
	pending, _ := e.counts(now)
	require.Equal(t, 3, pending, "held-back tasks are still pending")

	// A run ending makes room, whatever ended it.
	e.mustApply("k1", now, report(queue.StateCompleted, 0, now))
	_, ids = e.flowClaim(10, now)
	require.Equal(t, []string{"k3"}, ids)
	e.mustApply("k2", now, report(queue.ReasonWorkerShutdown, 0, now)) // retried: pending again
	k := e.flowKey("deploy")
	require.Equal(t, [2]int{3, 1}, [2]int{k.Pending, k.Running})
	_, ids = e.flowClaim(10, now)
	require.Equal(t, []string{"k4"}, ids, "the retried run queues behind the key's older pending runs")
	_, ids = e.flowClaim(10, now)
	require.Empty(t, ids)
}

func testFlowSupersede(t *testing.T, open Opener) {
	e := setup(t, open)
	// Another project's task under the same key is not the claim's to
	// supersede.
	e.create("s0", Epoch.Add(-time.Millisecond), withRoutes("coalesce.v1.lint"), withFlow(`{"supersede": true}`),
		func(t *queue.Task) { t.ProjectID = "other" })
	for i := range 3 {
		e.create(fmt.Sprintf("s%d", i+1), Epoch.Add(time.Duration(i)*time.Millisecond),
			withRoutes("coalesce.v1.lint"), withFlow(`{"supersede": true}`))
	}
	now := Epoch.Add(time.Minute)
	res, ids := e.flowClaim(1, now)
	require.Equal(t, []string{"s3"}, ids, "the newest pending task is handed out")
	require.Equal(t, []store.Supersession{{By: store.RecentTask{TaskID: "s3"},
		Superseded: []store.RecentTask{{TaskID: "s1"}, {TaskID: "s2"}}}}, res.Supersessions)
	requireEvents(t, res.Changes, ev("s3", queue.EventTaskRunning, 0),
		ev("s1", queue.EventTaskException, 0), ev("s2", queue.EventTaskException, 0))
	for _, id := range []string{"s1", "s2"} {
		r := e.get(id).Runs[0]
		require.Equal(t, queue.StateException, r.State)
		require.Equal(t, queue.ReasonSuperseded, r.ReasonResolved)
	}
	require.Equal(t, queue.StatePending, e.get("s0").State())
	k := e.flowKey("lint")
	require.Equal(t, [3]int64{1, 1, 2}, [3]int64{int64(k.Pending), int64(k.Running), k.Superseded})

	// Nothing older left: a lone newer task is just claimed.
	e.create("s4", Epoch.Add(time.Second), withRoutes("coalesce.v1.lint"), withFlow(`{"supersede": true}`))
	res, ids = e.flowClaim(4, now)
	require.Equal(t, []string{"s4"}, ids)
	require.Empty(t, res.Supersessions)
	_, ids = e.flowClaim(4, now)
	require.Equal(t, []string{"s0"}, ids)
}

func testFlowCancelInProgress(t *testing.T, open Opener) {
	e := setup(t, open)
	flow := withFlow(`{"key": "deploy", "cancelInProgress": true}`)
	e.create("c1", Epoch, flow)
	e.create("c2", Epoch.Add(time.Millisecond), flow)
	now := Epoch.Add(time.Minute)
	_, ids := e.flowClaim(1, now)
	require.Equal(t, []string{"c1"}, ids)
	_, ids = e.flowClaim(1, now)
	require.Equal(t, []string{"c2"}, ids)
	e.create("other", Epoch, withFlow(`{"key": "other", "cancelInProgress": true}`))
	_, ids = e.flowClaim(1, now)
	require.Equal(t, []string{"other"}, ids)
	// Another scheduler's task under the same key is not the creator's to
	// cancel.
	e.create("foreign", Epoch, flow, func(t *queue.Task) { t.SchedulerID = "someone-else" })
	_, ids = e.flowClaim(1, now)
	require.Equal(t, []string{"foreign"}, ids)

	res := e.create("c3", now, flow)
	require.Equal(t, "c3", res.Task.TaskID)
	requireEvents(t, res.Changes, ev("c3", queue.EventTaskDefined, -1), ev("c3", queue.EventTaskPending, 0),
		ev("c1", queue.EventTaskException, 0), ev("c2", queue.EventTaskException, 0))
	for _, id := range []string{"c1", "c2"} {
		require.Equal(t, queue.ReasonCanceled, e.get(id).Runs[0].ReasonResolved)
	}
	require.Equal(t, queue.StateRunning, e.get("other").State(), "other keys are left alone")
	require.Equal(t, queue.StateRunning, e.get("foreign").State(), "other schedulers' tasks are left alone")
	k := e.flowKey("deploy")
	require.Equal(t, [3]int64{1, 1, 2}, [3]int64{int64(k.Pending), int64(k.Running), k.Canceled})
}

func testFlowFailFast(t *testing.T, open Opener) {
	e := setup(t, open)
	now := Epoch.Add(time.Minute)
	e.create("a", Epoch, withGroup("g"), withFlow(`{"failFast": true}`))
	e.create("b", Epoch, withGroup("g"))
	e.create("c", Epoch, withGroup("g"), withDeps("b"))
	e.create("x", Epoch, withGroup("plain"))
	e.create("y", Epoch, withGroup("plain"))
	e.claim("a", now)
	e.mustApply("a", now, report(queue.StateFailed, 0, now))
	res, err := e.s.FailFastGroup(e.ctx, "g", now)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"b", "c"}, changedIDs(res.Changes))
	for _, id := range []string{"b", "c"} {
		require.Equal(t, queue.ReasonCanceled, e.get(id).LastRun().ReasonResolved)
	}
	// A group that did not opt in is left alone.
	e.claim("x", now)
	e.mustApply("x", now, report(queue.StateFailed, 0, now))
	res, err = e.s.FailFastGroup(e.ctx, "plain", now)
	require.NoError(t, err)
	require.Empty(t, res.Changes)
	require.Equal(t, queue.StatePending, e.get("y").State())
}

// testFlowLimitRace claims a limited key from many goroutines over the
// replicas while others complete what they got: the key never has more
// runs than its limit, and every task runs exactly once.
func testFlowLimitRace(t *testing.T, stores []store.Store) {
	const (
		tasks = 60
		limit = 3
	)
	ctx := context.Background()
	ids := seqIDs("lim", tasks)
	createMany(t, stores, ids, Epoch, func(int) []func(*queue.Task) {
		return []func(*queue.Task){withFlow(fmt.Sprintf(`{"key": "k", "limit": %d}`, limit))}
	})
	var (
		running, peak, done atomic.Int64
		seen                sync.Map
		errs                errorList
		wg                  sync.WaitGroup
	)
	now := Epoch.Add(time.Minute)
	for c := range 8 {
		wg.Go(func() {
			s := stores[c%len(stores)]
			for idle := 0; done.Load() < tasks && idle < 2000; {
				res, err := s.ClaimWork(ctx, store.ClaimWorkParams{TaskQueueID: testQueue, WorkerGroup: "wg", WorkerID: fmt.Sprint("w", c),
					Count: 2, Now: now, TakenUntil: now.Add(claimTimeout)})
				if err != nil {
					errs.add(err)
					return
				}
				if len(res.Claims) == 0 {
					idle++
					time.Sleep(time.Millisecond)
					continue
				}
				for _, cl := range res.Claims {
					n := running.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					if _, dup := seen.LoadOrStore(cl.Task.TaskID, true); dup {
						errs.add(fmt.Errorf("task %s claimed twice", cl.Task.TaskID))
					}
					running.Add(-1) // before the report commits: never over-counts
					_, err := s.UpdateTask(ctx, store.UpdateTaskParams{TaskID: cl.Task.TaskID, Now: now, Apply: report(queue.StateCompleted, cl.RunID, now)})
					errs.add(err)
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	errs.require(t)
	require.EqualValues(t, tasks, done.Load())
	require.LessOrEqual(t, peak.Load(), int64(limit))
	keys, err := stores[0].FlowKeys(ctx, testQueue)
	require.NoError(t, err)
	require.Equal(t, [2]int{0, 0}, [2]int{keys[0].Pending, keys[0].Running})
}

// testFlowSupersedeRace creates tasks of a supersede key while claimers on
// both replicas take from it: no task is both superseded and claimed, and
// every task ends one way or the other.
func testFlowSupersedeRace(t *testing.T, stores []store.Store) {
	const tasks = 80
	ctx := context.Background()
	ids := seqIDs("sup", tasks)
	var (
		claimed sync.Map
		errs    errorList
		wg      sync.WaitGroup
		created atomic.Bool
	)
	now := Epoch.Add(time.Minute)
	wg.Go(func() {
		defer created.Store(true)
		createMany(t, stores, ids, Epoch, func(int) []func(*queue.Task) {
			return []func(*queue.Task){withFlow(`{"key": "k", "supersede": true}`)}
		})
	})
	for c := range 6 {
		wg.Go(func() {
			s := stores[c%len(stores)]
			for {
				last := created.Load()
				res, err := s.ClaimWork(ctx, store.ClaimWorkParams{TaskQueueID: testQueue, WorkerGroup: "wg", WorkerID: fmt.Sprint("w", c),
					Count: 1, Now: now, TakenUntil: now.Add(claimTimeout)})
				if err != nil {
					errs.add(err)
					return
				}
				for _, cl := range res.Claims {
					claimed.Store(cl.Task.TaskID, true)
					_, err := s.UpdateTask(ctx, store.UpdateTaskParams{TaskID: cl.Task.TaskID, Now: now, Apply: report(queue.StateCompleted, cl.RunID, now)})
					errs.add(err)
				}
				if len(res.Claims) == 0 {
					if last {
						return
					}
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	errs.require(t)
	states, err := stores[0].GetTasks(ctx, ids)
	require.NoError(t, err)
	superseded := 0
	for _, st := range states {
		_, wasClaimed := claimed.Load(st.TaskID)
		r := st.LastRun()
		switch {
		case wasClaimed:
			require.Len(t, st.Runs, 1, "task %s", st.TaskID)
			require.Equal(t, queue.StateCompleted, r.State, "claimed task %s", st.TaskID)
		default:
			require.Equal(t, queue.ReasonSuperseded, r.ReasonResolved, "unclaimed task %s", st.TaskID)
			superseded++
		}
	}
	t.Logf("%d of %d tasks superseded", superseded, tasks)
}
