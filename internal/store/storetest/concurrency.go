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
	t.Run("HandoverRace", func(t *testing.T) { t.Parallel(); testHandoverRace(t, stores(t)) })
	t.Run("ClaimsOfOneWorker", func(t *testing.T) { t.Parallel(); testClaimsOfOneWorker(t, stores(t)) })
	t.Run("GroupResolvedRace", func(t *testing.T) { t.Parallel(); testGroupResolvedRace(t, stores(t)) })
	t.Run("FlowLimitRace", func(t *testing.T) { t.Parallel(); testFlowLimitRace(t, stores(t)) })
	t.Run("FlowSupersedeRace", func(t *testing.T) { t.Parallel(); testFlowSupersedeRace(t, stores(t)) })
	t.Run("NotifyClaimRace", func(t *testing.T) { t.Parallel(); testNotifyClaimRace(t, stores(t)) })
	t.Run("NotifyDuplicateRace", func(t *testing.T) { t.Parallel(); testNotifyDuplicateRace(t, opts.Open(t, 3).Stores) })
	t.Run("SigningKeyRace", func(t *testing.T) { t.Parallel(); testSigningKeyRace(t, stores(t)) })
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

// claimAll claims n pending tasks of testQueue at Epoch, 32 at a time.
func claimAll(t *testing.T, s store.Store, n int) {
	t.Helper()
	for left := n; left > 0; {
		res, err := s.ClaimWork(context.Background(), store.ClaimWorkParams{TaskQueueID: testQueue, WorkerGroup: workerGroup, WorkerID: workerID,
			Count: 32, Now: Epoch, TakenUntil: Epoch.Add(claimTimeout)})
		require.NoError(t, err)
		require.NotEmpty(t, res.Claims)
		left -= len(res.Claims)
	}
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
	taskIDs := fillClaimRace(t, fx, opts.Tasks)
	require.Len(t, taskIDs, opts.Tasks)
	pending, _, err := fx.Stores[0].TaskQueueCounts(context.Background(), testQueue, Epoch)
	require.NoError(t, err)
	require.Equal(t, opts.Tasks, pending)
	now := Epoch.Add(time.Minute)
	claimed := claimUntilEmpty(t, fx.Stores, opts.Claimers, now)
	checkClaimedOnce(t, fx.Stores, taskIDs, claimed, now)
}

// fillClaimRace creates n pending tasks of three priorities, through the
// bulk filler if the driver has one, and returns their ids.
func fillClaimRace(t *testing.T, fx Fixture, n int) []string {
	priorities := []string{"lowest", "low", "high"}
	if fx.Fill == nil {
		taskIDs := seqIDs("claim", n)
		createMany(t, fx.Stores, taskIDs, Epoch, func(i int) []func(*queue.Task) {
			return []func(*queue.Task){withPriority(priorities[i%len(priorities)])}
		})
		return taskIDs
	}
	// One task per priority through createTask, the rest bulk copies.
	var taskIDs []string
	began := time.Now()
	for i, p := range priorities {
		seed := "claim-" + p
		_, err := fx.Stores[0].CreateTask(context.Background(), store.CreateTaskParams{TaskID: seed, Task: NewTask(testQueue, Epoch, withGroup("claim"), withPriority(p)), Now: Epoch})
		require.NoError(t, err)
		copies := n/len(priorities) - 1
		if i == 0 {
			copies += n % len(priorities)
		}
		fx.Fill(t, seed, copies)
		taskIDs = append(taskIDs, seed)
		for c := 1; c <= copies; c++ {
			taskIDs = append(taskIDs, fmt.Sprintf("%s-%d", seed, c))
		}
	}
	t.Logf("filled %d tasks in %s", len(taskIDs), time.Since(began))
	return taskIDs
}

// claimUntilEmpty starts the claimers together, spread over the stores,
// each claiming 1 to 4 at a time until nothing is pending, and returns
// what each (worker "claimer-<n>") claimed.
func claimUntilEmpty(t *testing.T, stores []store.Store, claimers int, now time.Time) [][]string {
	ctx := context.Background()
	claimed := make([][]string, claimers)
	var errs errorList
	var wg sync.WaitGroup
	start := make(chan struct{})
	began := time.Now()
	for c := range claimers {
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
	n := 0
	for _, list := range claimed {
		n += len(list)
	}
	t.Logf("%d claimers on %d store(s) claimed %d tasks in %s", claimers, len(stores), n, time.Since(began))
	return claimed
}

// checkClaimedOnce checks that each of taskIDs was claimed exactly once,
// that the store records its claimer, and that every replica counts them
// all claimed.
func checkClaimedOnce(t *testing.T, stores []store.Store, taskIDs []string, claimed [][]string, now time.Time) {
	ctx := context.Background()
	byTask := map[string]int{}
	owner := map[string]string{}
	for c, list := range claimed {
		for _, id := range list {
			byTask[id]++
			owner[id] = fmt.Sprintf("claimer-%d", c)
		}
	}
	require.Len(t, byTask, len(taskIDs), "every task claimed")
	for id, n := range byTask {
		require.Equal(t, 1, n, "task %s claimed %d times", id, n)
	}
	tasks, err := stores[len(stores)-1].GetTasks(ctx, taskIDs)
	require.NoError(t, err)
	require.Len(t, tasks, len(taskIDs))
	for _, ts := range tasks {
		require.Equal(t, queue.StateRunning, ts.State(), ts.TaskID)
		require.Len(t, ts.Runs, 1, ts.TaskID)
		require.Equal(t, owner[ts.TaskID], ts.Runs[0].WorkerID, "the store records the claimer that got %s", ts.TaskID)
	}
	for _, s := range stores {
		pending, claimedCount, err := s.TaskQueueCounts(ctx, testQueue, now)
		require.NoError(t, err)
		require.Zero(t, pending)
		require.Equal(t, len(taskIDs), claimedCount)
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
	const perCase = 40
	want, all := createExpiryCases(t, stores, expiryCases(), perCase)
	now := Epoch.Add(30 * time.Minute)
	changes := sweepAtOnce(t, stores, now)
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
	checkExpired(t, stores, want, all, now, perCase)
}

// expiryCases are the kinds of task the expiry race resolves: claims that
// expire with retries left or none, and deadlines that pass while running,
// pending or unscheduled (Epoch+25m).
func expiryCases() []expiryCase {
	return []expiryCase{
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
}

// createExpiryCases creates perCase tasks of each case, in its state
// (claimed at Epoch until Epoch+20m), and returns each task's case and
// all the ids.
func createExpiryCases(t *testing.T, stores []store.Store, cases []expiryCase, perCase int) (map[string]expiryCase, []string) {
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
			claimAll(t, stores[0], perCase)
		}
	}
	return want, all
}

// sweepAtOnce runs, on every store at once, two claim-expiry and two
// deadline sweepers, each sweeping three times, and returns every change
// they made.
func sweepAtOnce(t *testing.T, stores []store.Store, now time.Time) []store.Change {
	ctx := context.Background()
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
	return changes
}

// checkExpired checks that the sweeps left nothing due and that every
// task has its case's runs; only the retries are pending.
func checkExpired(t *testing.T, stores []store.Store, want map[string]expiryCase, all []string, now time.Time, perCase int) {
	ctx := context.Background()
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
