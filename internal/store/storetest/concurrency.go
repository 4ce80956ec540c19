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

// Fixture is one fresh, empty database as the concurrency tests use it.
type Fixture struct {
	// Stores are the replicas over the database: as many as asked for
	// where the driver supports several processes sharing it, else one.
	Stores []store.Store
	// Fill, if set, populates large queues quickly; otherwise tasks are
	// created one by one.
	Fill BulkFiller
}

// ConcurrencyOptions sizes and shapes the concurrency tests for a driver.
type ConcurrencyOptions struct {
	// Tasks is how many pending tasks the claimers race for.
	Tasks int
	// Claimers is how many goroutines call ClaimWork at once, spread over
	// the replicas.
	Claimers int
	// Open opens a fresh database as the given number of replicas.
	Open func(t *testing.T, replicas int) Fixture
	// CrossProcessWakeup says that SubscribePending on one replica hears
	// runs made pending through another.
	CrossProcessWakeup bool
}

// RunConcurrency runs the concurrency tests: racing claimers, racing
// resolvers, racing reporters, racing creates and dependency resolution,
// and (when the driver supports it) the cross-process wake-up. The racing
// goroutines are spread over two replicas where the driver has them.
func RunConcurrency(t *testing.T, opts ConcurrencyOptions) {
	stores := func(t *testing.T) []store.Store {
		t.Helper()
		return opts.Open(t, 2).Stores
	}
	t.Run("ClaimRace", func(t *testing.T) { t.Parallel(); testClaimRace(t, opts.Open(t, 2), opts) })
	t.Run("ExpiryRace", func(t *testing.T) { t.Parallel(); testExpiryRace(t, stores(t)) })
	t.Run("ReportRace", func(t *testing.T) { t.Parallel(); testReportRace(t, stores(t)) })
	t.Run("CreateRace", func(t *testing.T) { t.Parallel(); testCreateRace(t, stores(t)) })
	t.Run("DependencyRace", func(t *testing.T) { t.Parallel(); testDependencyRace(t, stores(t)) })
	t.Run("CombinedUpdates", func(t *testing.T) { t.Parallel(); testCombinedUpdates(t, stores(t)) })
	t.Run("CombinedCreates", func(t *testing.T) { t.Parallel(); testCombinedCreates(t, stores(t)) })
	t.Run("ClaimsOfOneWorker", func(t *testing.T) { t.Parallel(); testClaimsOfOneWorker(t, stores(t)) })
	t.Run("GroupResolvedRace", func(t *testing.T) { t.Parallel(); testGroupResolvedRace(t, stores(t)) })
	if opts.CrossProcessWakeup {
		t.Run("CrossProcessWakeup", func(t *testing.T) {
			t.Parallel()
			s := stores(t)
			require.Len(t, s, 2, "CrossProcessWakeup needs two replicas")
			testCrossProcessWakeup(t, s)
		})
	}
}

// errorList collects errors from goroutines; the test goroutine checks them.
type errorList struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorList) add(err error) {
	if err == nil {
		return
	}
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

func (l *errorList) require(t *testing.T) {
	t.Helper()
	require.NoError(t, errors.Join(l.errs...))
}

// createMany creates the tasks from a few goroutines spread over the
// stores, as concurrent API requests would.
func createMany(t *testing.T, stores []store.Store, taskIDs []string, now time.Time, mutate func(i int) []func(*queue.Task)) {
	t.Helper()
	began := time.Now()
	defer func() {
		t.Logf("created %d tasks through %d store(s) in %s", len(taskIDs), len(stores), time.Since(began))
	}()
	var errs errorList
	var wg sync.WaitGroup
	const creators = 8
	for c := range creators {
		wg.Go(func() {
			s := stores[c%len(stores)]
			for i := c; i < len(taskIDs); i += creators {
				var m []func(*queue.Task)
				if mutate != nil {
					m = mutate(i)
				}
				def := NewTask(testQueue, now, append([]func(*queue.Task){withGroup(taskIDs[i])}, m...)...)
				_, err := s.CreateTask(context.Background(), store.CreateTaskParams{TaskID: taskIDs[i], Task: def, Now: now})
				errs.add(err)
			}
		})
	}
	wg.Wait()
	errs.require(t)
}

func seqIDs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%06d", prefix, i)
	}
	return out
}

// testClaimRace: many claimers over one queue, on every replica: every task
// is claimed exactly once, by the worker the store records, and none is
// left behind.
func testClaimRace(t *testing.T, fx Fixture, opts ConcurrencyOptions) {
	ctx := context.Background()
	stores := fx.Stores
	priorities := []string{"lowest", "low", "high"}
	var taskIDs []string
	if fx.Fill != nil {
		// One task per priority through createTask, the rest bulk copies.
		began := time.Now()
		for i, p := range priorities {
			seed := "claim-" + p
			_, err := stores[0].CreateTask(ctx, store.CreateTaskParams{TaskID: seed, Task: NewTask(testQueue, Epoch, withGroup("claim"), withPriority(p)), Now: Epoch})
			require.NoError(t, err)
			copies := opts.Tasks/len(priorities) - 1
			if i == 0 {
				copies += opts.Tasks % len(priorities)
			}
			fx.Fill(t, seed, copies)
			taskIDs = append(taskIDs, seed)
			for c := 1; c <= copies; c++ {
				taskIDs = append(taskIDs, fmt.Sprintf("%s-%d", seed, c))
			}
		}
		t.Logf("filled %d tasks in %s", len(taskIDs), time.Since(began))
	} else {
		taskIDs = seqIDs("claim", opts.Tasks)
		createMany(t, stores, taskIDs, Epoch, func(i int) []func(*queue.Task) {
			return []func(*queue.Task){withPriority(priorities[i%len(priorities)])}
		})
	}
	pending, _, err := stores[0].TaskQueueCounts(ctx, testQueue, Epoch)
	require.NoError(t, err)
	require.Equal(t, opts.Tasks, pending)

	now := Epoch.Add(time.Minute)
	claimed := make([][]string, opts.Claimers)
	var errs errorList
	var wg sync.WaitGroup
	start := make(chan struct{})
	began := time.Now()
	for c := range opts.Claimers {
		wg.Go(func() {
			s := stores[c%len(stores)]
			<-start
			for {
				res, err := s.ClaimWork(ctx, store.ClaimWorkParams{
					TaskQueueID: testQueue, WorkerGroup: "race", WorkerID: fmt.Sprintf("claimer-%d", c),
					Count: 1 + c%4, Now: now, TakenUntil: now.Add(claimTimeout),
				})
				if err != nil {
					errs.add(fmt.Errorf("claimer %d: %w", c, err))
					return
				}
				for _, cl := range res.Claims {
					claimed[c] = append(claimed[c], cl.Task.TaskID)
				}
				if len(res.Claims) > 0 {
					continue
				}
				// Nothing claimable right now: done once nothing is pending
				// (others may merely hold the rest locked).
				left, _, err := s.TaskQueueCounts(ctx, testQueue, now)
				if err != nil {
					errs.add(err)
					return
				}
				if left == 0 {
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	errs.require(t)
	t.Logf("%d claimers on %d store(s) claimed %d tasks in %s", opts.Claimers, len(stores), opts.Tasks, time.Since(began))

	byTask := map[string]int{}
	owner := map[string]string{}
	for c, list := range claimed {
		for _, id := range list {
			byTask[id]++
			owner[id] = fmt.Sprintf("claimer-%d", c)
		}
	}
	require.Len(t, byTask, opts.Tasks, "every task claimed")
	for id, n := range byTask {
		require.Equal(t, 1, n, "task %s claimed %d times", id, n)
	}
	tasks, err := stores[len(stores)-1].GetTasks(ctx, taskIDs)
	require.NoError(t, err)
	require.Len(t, tasks, opts.Tasks)
	for _, ts := range tasks {
		require.Equal(t, queue.StateRunning, ts.State(), ts.TaskID)
		require.Len(t, ts.Runs, 1, ts.TaskID)
		require.Equal(t, owner[ts.TaskID], ts.Runs[0].WorkerID, "the store records the claimer that got %s", ts.TaskID)
	}
	for _, s := range stores {
		pending, claimedCount, err := s.TaskQueueCounts(ctx, testQueue, now)
		require.NoError(t, err)
		require.Zero(t, pending)
		require.Equal(t, opts.Tasks, claimedCount)
	}
}

// expiryCase is one kind of task in the expiry race and what must become
// of it.
type expiryCase struct {
	prefix string
	// claimed tasks are claimed at Epoch until Epoch+20m; others are
	// unscheduled or pending.
	state    string
	mutate   []func(*queue.Task)
	wantRuns []queue.Run // State and reasons only
	events   []string
}

// testExpiryRace: claim expiry and deadline sweeps from every replica at
// once over the same due tasks resolve each exactly once, with exactly the
// expected runs.
func testExpiryRace(t *testing.T, stores []store.Store) {
	ctx := context.Background()
	const perCase = 40
	cases := []expiryCase{
		{"retry", queue.StateRunning, []func(*queue.Task){withRetries(2)},
			[]queue.Run{{State: queue.StateException, ReasonCreated: queue.ReasonScheduled, ReasonResolved: queue.ReasonClaimExpired}, {State: queue.StatePending, ReasonCreated: queue.ReasonRetry}},
			[]string{queue.EventTaskException, queue.EventTaskPending}},
		{"final", queue.StateRunning, []func(*queue.Task){withRetries(0)},
			[]queue.Run{{State: queue.StateException, ReasonCreated: queue.ReasonScheduled, ReasonResolved: queue.ReasonClaimExpired}},
			[]string{queue.EventTaskException}},
		{"deadline-running", queue.StateRunning, []func(*queue.Task){withDeadline(Epoch.Add(25 * time.Minute))},
			[]queue.Run{{State: queue.StateException, ReasonCreated: queue.ReasonScheduled, ReasonResolved: queue.ReasonDeadlineExceeded}},
			[]string{queue.EventTaskException}},
		{"deadline-pending", queue.StatePending, []func(*queue.Task){withDeadline(Epoch.Add(25 * time.Minute))},
			[]queue.Run{{State: queue.StateException, ReasonCreated: queue.ReasonScheduled, ReasonResolved: queue.ReasonDeadlineExceeded}},
			[]string{queue.EventTaskException}},
		{"deadline-unscheduled", queue.StateUnscheduled, []func(*queue.Task){withDeadline(Epoch.Add(25 * time.Minute))},
			[]queue.Run{{State: queue.StateException, ReasonCreated: queue.ReasonException, ReasonResolved: queue.ReasonDeadlineExceeded}},
			[]string{queue.EventTaskException}},
	}
	want := map[string]expiryCase{}
	var all []string
	for _, c := range cases {
		ids := seqIDs(c.prefix+"-", perCase)
		createMany(t, stores, ids, Epoch, func(i int) []func(*queue.Task) {
			m := append([]func(*queue.Task){}, c.mutate...)
			if c.state == queue.StateUnscheduled {
				m = append(m, withDeps(ids[i])) // a self-dependency keeps it unscheduled
			}
			return m
		})
		for _, id := range ids {
			want[id] = c
		}
		all = append(all, ids...)
		if c.state == queue.StateRunning {
			// Claim this case's tasks before the next case creates more.
			for left := perCase; left > 0; {
				res, err := stores[0].ClaimWork(ctx, store.ClaimWorkParams{TaskQueueID: testQueue, WorkerGroup: workerGroup, WorkerID: workerID,
					Count: 32, Now: Epoch, TakenUntil: Epoch.Add(claimTimeout)})
				require.NoError(t, err)
				require.NotEmpty(t, res.Claims)
				left -= len(res.Claims)
			}
		}
	}

	now := Epoch.Add(30 * time.Minute)
	var (
		mu      sync.Mutex
		changes []store.Change
		errs    errorList
		wg      sync.WaitGroup
	)
	start := make(chan struct{})
	for _, s := range stores {
		for range 2 {
			wg.Go(func() {
				<-start
				for range 3 {
					res, err := s.ExpireClaims(ctx, now, 1000)
					errs.add(err)
					if res != nil {
						mu.Lock()
						changes = append(changes, res.Changes...)
						mu.Unlock()
					}
				}
			})
			wg.Go(func() {
				<-start
				for range 3 {
					res, err := s.ExpireDeadlines(ctx, now, now, 1000)
					errs.add(err)
					if res != nil {
						mu.Lock()
						changes = append(changes, res.Changes...)
						mu.Unlock()
					}
				}
			})
		}
	}
	close(start)
	wg.Wait()
	errs.require(t)

	seen := map[string]int{}
	for _, c := range changes {
		id := c.Task.TaskID
		seen[id]++
		var kinds []string
		for _, e := range c.Events {
			kinds = append(kinds, e.Kind)
		}
		require.Equal(t, want[id].events, kinds, "events of %s", id)
	}
	require.Len(t, seen, len(all), "every due task was resolved")
	for id, n := range seen {
		require.Equal(t, 1, n, "task %s resolved %d times", id, n)
	}

	// Nothing was left for a later sweep.
	for _, s := range stores {
		res, err := s.ExpireClaims(ctx, now, 1000)
		require.NoError(t, err)
		require.Empty(t, res.Changes)
		res, err = s.ExpireDeadlines(ctx, now, now, 1000)
		require.NoError(t, err)
		require.Empty(t, res.Changes)
	}

	tasks, err := stores[0].GetTasks(ctx, all)
	require.NoError(t, err)
	require.Len(t, tasks, len(all))
	for _, ts := range tasks {
		exp := want[ts.TaskID].wantRuns
		require.Len(t, ts.Runs, len(exp), "runs of %s", ts.TaskID)
		for i, r := range ts.Runs {
			require.Equal(t, exp[i].State, r.State, "run %d of %s", i, ts.TaskID)
			require.Equal(t, exp[i].ReasonCreated, r.ReasonCreated, "run %d of %s", i, ts.TaskID)
			require.Equal(t, exp[i].ReasonResolved, r.ReasonResolved, "run %d of %s", i, ts.TaskID)
		}
	}
	pending, claimed, err := stores[0].TaskQueueCounts(ctx, testQueue, now)
	require.NoError(t, err)
	require.Equal(t, perCase, pending, "only the retries are pending")
	require.Zero(t, claimed)
}

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
	ch, unsubscribe := a.SubscribePending(testQueue, 1)
	defer unsubscribe()
	other, unsubscribeOther := a.SubscribePending("prov/other", 1)
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
