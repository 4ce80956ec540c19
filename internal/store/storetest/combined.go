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

// testCombinedUpdates: a burst of transitions on one replica (which the
// store may run in shared transactions) keeps every call's outcome its
// own. In one task group, 48 running tasks are reported at once: some
// completed, some failed, some with a run that does not exist (refused,
// task untouched), some twice (one wins, one conflicts); each of the
// completed ones releases a dependent. Every dependent is scheduled once,
// and the group's resolution is reported once, by the last resolution.
func testCombinedUpdates(t *testing.T, stores []store.Store) {
	s := stores[0]
	const n = 48
	ids := seqIDs("comb-", n)
	deps := seqIDs("dep-", n)
	claimWithDependents(t, s, ids, deps)
	now := Epoch.Add(time.Minute)
	out := reportAtOnce(t, s, combinedReports(ids, now), now)
	checkCombinedReports(t, s, ids, deps, out)
	// A quarter of the group is still running: the group is not resolved.
	require.Empty(t, out.groupResolved)
	// The rest resolve at once: exactly one of them reports the group.
	var rest []string
	for i := 3; i < n; i += 4 {
		rest = append(rest, ids[i])
	}
	groupResolved := failAtOnce(t, s, rest, now)
	require.Len(t, groupResolved, 1, "the group's resolution is reported once: %v", groupResolved)
}

// claimWithDependents creates the tasks ids in group "cg", each with a
// dependent (deps[i] requires ids[i], in group "dg"), and claims them all.
func claimWithDependents(t *testing.T, s store.Store, ids, deps []string) {
	ctx := context.Background()
	for _, id := range ids {
		_, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: id, Task: NewTask(testQueue, Epoch, withGroup("cg")), Now: Epoch})
		require.NoError(t, err)
	}
	for i, id := range deps {
		_, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: id, Now: Epoch,
			Task: NewTask("prov/deps", Epoch, withGroup("dg"), withDeps(ids[i]))})
		require.NoError(t, err)
	}
	claimAll(t, s, len(ids))
}

// combinedReport is one report of a burst: the transition, and the state
// it reports ("refused" for a run that does not exist).
type combinedReport struct {
	id    string
	apply func(*queue.TaskState, *queue.Transition) error
	kind  string
}

// combinedReports reports the running tasks ids, by their index modulo 4:
// completed (0, 1), failed and completed at once (2), or run 7, which does
// not exist (3).
func combinedReports(ids []string, now time.Time) []combinedReport {
	var calls []combinedReport
	for i, id := range ids {
		switch i % 4 {
		case 0, 1:
			calls = append(calls, combinedReport{id, report(queue.StateCompleted, 0, now), queue.StateCompleted})
		case 2:
			calls = append(calls, combinedReport{id, report(queue.StateFailed, 0, now), queue.StateFailed})
			calls = append(calls, combinedReport{id, report(queue.StateCompleted, 0, now), queue.StateCompleted})
		case 3:
			calls = append(calls, combinedReport{id, report(queue.StateCompleted, 7, now), "refused"})
		}
	}
	return calls
}

// combinedOutcome is what a burst of reports answered: per task the
// states whose reports won, the tasks whose results reported their group
// resolved, and how often each dependent was scheduled.
type combinedOutcome struct {
	winners       map[string][]string
	groupResolved []string
	scheduled     map[string]int
}

// reportAtOnce sends the reports together and checks each answer on its
// own: a refused report is not found, a losing one conflicts, and a
// winner's result is about its own task.
func reportAtOnce(t *testing.T, s store.Store, calls []combinedReport, now time.Time) combinedOutcome {
	ctx := context.Background()
	out := combinedOutcome{winners: map[string][]string{}, scheduled: map[string]int{}}
	var (
		mu   sync.Mutex
		errs errorList
		wg   sync.WaitGroup
	)
	start := make(chan struct{})
	for _, c := range calls {
		wg.Go(func() {
			<-start
			res, err := s.UpdateTask(ctx, store.UpdateTaskParams{TaskID: c.id, Now: now, Apply: c.apply})
			var qe *queue.Error
			switch {
			case c.kind == "refused":
				if !errors.As(err, &qe) || qe.Kind != queue.KindNotFound {
					errs.add(fmt.Errorf("run 7 of %s: want not found, got %v", c.id, err))
				}
				return
			case errors.As(err, &qe) && qe.Kind == queue.KindConflict:
				return
			case err != nil:
				errs.add(fmt.Errorf("%s on %s: %w", c.kind, c.id, err))
				return
			}
			mu.Lock()
			defer mu.Unlock()
			out.winners[c.id] = append(out.winners[c.id], c.kind)
			for i, ch := range res.Changes {
				if i > 0 {
					out.scheduled[ch.Task.TaskID]++
				}
				if ch.GroupResolved != nil {
					out.groupResolved = append(out.groupResolved, ch.Task.TaskID)
				}
			}
			if res.Task == nil || res.Task.TaskID != c.id || res.Changes[0].Task.TaskID != c.id {
				errs.add(fmt.Errorf("%s on %s: the result is about another task", c.kind, c.id))
			}
		})
	}
	close(start)
	wg.Wait()
	errs.require(t)
	return out
}

// checkCombinedReports checks the stored tasks against the burst's
// outcome: a refused report leaves its task running, every other task took
// exactly one report, and a completed task's dependent was scheduled once.
func checkCombinedReports(t *testing.T, s store.Store, ids, deps []string, out combinedOutcome) {
	tasks, err := s.GetTasks(context.Background(), append(append([]string{}, ids...), deps...))
	require.NoError(t, err)
	byID := map[string]*queue.TaskState{}
	for _, ts := range tasks {
		byID[ts.TaskID] = ts
	}
	for i, id := range ids {
		ts, dep := byID[id], byID[deps[i]]
		if i%4 == 3 {
			require.Equal(t, queue.StateRunning, ts.State(), "a refused report leaves %s running", id)
			require.Empty(t, out.winners[id])
			require.Equal(t, queue.StateUnscheduled, dep.State())
			continue
		}
		require.Len(t, out.winners[id], 1, "reports that won on %s: %v", id, out.winners[id])
		require.Equal(t, out.winners[id][0], ts.State())
		if ts.State() == queue.StateCompleted {
			require.Equal(t, queue.StatePending, dep.State(), "%s completed: its dependent is scheduled", id)
			require.Equal(t, 1, out.scheduled[deps[i]], "%s scheduled once", deps[i])
		} else {
			require.Equal(t, queue.StateUnscheduled, dep.State())
			require.Zero(t, out.scheduled[deps[i]])
		}
	}
}

// failAtOnce reports run 0 of each running task ids failed, together, and
// returns the tasks whose results reported a group resolved.
func failAtOnce(t *testing.T, s store.Store, ids []string, now time.Time) []string {
	var (
		mu            sync.Mutex
		groupResolved []string
		errs          errorList
		wg            sync.WaitGroup
	)
	for _, id := range ids {
		wg.Go(func() {
			res, err := s.UpdateTask(context.Background(), store.UpdateTaskParams{TaskID: id, Now: now, Apply: report(queue.StateFailed, 0, now)})
			errs.add(err)
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			groupResolved = append(groupResolved, resolvedGroups(res)...)
		})
	}
	wg.Wait()
	errs.require(t)
	return groupResolved
}

// testCombinedCreates: a burst of creates on one replica (which the store
// may write in shared transactions) answers each call on its own merits:
// new tasks are created, identical repeats succeed, a reused taskId with
// another definition conflicts, and a task for a sealed group or a group
// of another schedulerId is refused and leaves nothing behind. The new
// tasks are claimable in the order their creates were answered.
func testCombinedCreates(t *testing.T, stores []store.Store) {
	ctx := context.Background()
	s := stores[0]
	_, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: "taken", Task: NewTask(testQueue, Epoch, withGroup("open")), Now: Epoch})
	require.NoError(t, err)
	_, err = s.CreateTask(ctx, store.CreateTaskParams{TaskID: "sealer", Task: NewTask(testQueue, Epoch, withGroup("sealed")), Now: Epoch})
	require.NoError(t, err)
	_, err = s.SealTaskGroup(ctx, "sealed", Epoch)
	require.NoError(t, err)
	_, err = s.CreateTask(ctx, store.CreateTaskParams{TaskID: "other-sched", Now: Epoch,
		Task: NewTask(testQueue, Epoch, withGroup("theirs"), func(d *queue.Task) { d.SchedulerID = "them" })})
	require.NoError(t, err)

	type outcome struct {
		id       string
		def      *queue.Task
		conflict bool // refused with a conflict, else created (or repeated)
		racing   bool // one of two different creates of one id: either may win
	}
	var outcomes []outcome
	for i := range 40 {
		outcomes = append(outcomes, outcome{id: fmt.Sprintf("new-%02d", i), def: NewTask(testQueue, Epoch, withGroup(fmt.Sprintf("ng-%d", i%5)))})
	}
	outcomes = append(outcomes,
		outcome{id: "taken", def: NewTask(testQueue, Epoch, withGroup("open"))}, // an identical repeat
		outcome{id: "taken", def: NewTask(testQueue, Epoch, withGroup("open"), withPriority("high")), conflict: true},
		outcome{id: "in-sealed", def: NewTask(testQueue, Epoch, withGroup("sealed")), conflict: true},
		outcome{id: "wrong-sched", def: NewTask(testQueue, Epoch, withGroup("theirs")), conflict: true},
		outcome{id: "twice", def: NewTask(testQueue, Epoch, withGroup("fresh-1")), racing: true},
		outcome{id: "twice", def: NewTask(testQueue, Epoch, withGroup("fresh-2")), racing: true},
	)
	var (
		errs      errorList
		wg        sync.WaitGroup
		mu        sync.Mutex
		twiceWins int
	)
	start := make(chan struct{})
	for _, o := range outcomes {
		wg.Go(func() {
			<-start
			res, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: o.id, Task: o.def, Now: Epoch})
			var qe *queue.Error
			conflict := errors.As(err, &qe) && qe.Kind == queue.KindConflict
			switch {
			case o.racing && (err == nil || conflict):
				if err == nil {
					mu.Lock()
					twiceWins++
					mu.Unlock()
				}
			case !o.conflict && err == nil:
				if res.Task == nil || res.Task.TaskID != o.id {
					errs.add(fmt.Errorf("create %s: no status in the reply", o.id))
				}
			case o.conflict && conflict:
			default:
				errs.add(fmt.Errorf("create %s (conflict expected: %v): got %v", o.id, o.conflict, err))
			}
		})
	}
	close(start)
	wg.Wait()
	errs.require(t)
	require.Equal(t, 1, twiceWins, "one of two different creates of one taskId wins")

	groups := 0
	for _, g := range []string{"fresh-1", "fresh-2"} {
		_, err := s.GetTaskGroup(ctx, g)
		if err == nil {
			groups++
			continue
		}
		require.ErrorIs(t, err, store.ErrNotFound)
	}
	require.Equal(t, 1, groups, "only the winning create's group exists")
	_, err = s.GetTask(ctx, "in-sealed")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.GetTask(ctx, "wrong-sched")
	require.ErrorIs(t, err, store.ErrNotFound)

	pending, _, err := s.TaskQueueCounts(ctx, testQueue, Epoch)
	require.NoError(t, err)
	require.Equal(t, 3+40+1, pending, "taken, sealer, other-sched, the new tasks and twice")
}

// testClaimsOfOneWorker: one worker's claims racing each other each land
// in its recent tasks (they are written without holding the worker's
// record while the claims look for work).
func testClaimsOfOneWorker(t *testing.T, stores []store.Store) {
	ctx := context.Background()
	const n = 16
	q := "prov/one-worker"
	for i := range n {
		id := fmt.Sprintf("ow-%02d", i)
		_, err := stores[0].CreateTask(ctx, store.CreateTaskParams{TaskID: id, Task: NewTask(q, Epoch, withGroup(id)), Now: Epoch})
		require.NoError(t, err)
	}
	key := store.WorkerKey{TaskQueueID: q, WorkerGroup: workerGroup, WorkerID: "same"}
	_, err := stores[0].TouchWorker(ctx, store.TouchWorkerParams{Key: key, Now: Epoch, Expires: Epoch.Add(time.Hour)})
	require.NoError(t, err)
	var (
		errs    errorList
		wg      sync.WaitGroup
		mu      sync.Mutex
		claimed []string
	)
	start := make(chan struct{})
	for i := range n {
		s := stores[i%len(stores)]
		wg.Go(func() {
			<-start
			res, err := s.ClaimWork(ctx, store.ClaimWorkParams{TaskQueueID: q, WorkerGroup: workerGroup, WorkerID: "same",
				Count: 1, Now: Epoch, TakenUntil: Epoch.Add(claimTimeout), RecordRecentTasks: true, CheckQuarantine: true})
			errs.add(err)
			if err == nil {
				mu.Lock()
				for _, c := range res.Claims {
					claimed = append(claimed, c.Task.TaskID)
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	errs.require(t)
	require.NotEmpty(t, claimed)
	w, err := stores[0].GetWorker(ctx, key, Epoch)
	require.NoError(t, err)
	var recorded []string
	for _, r := range w.RecentTasks {
		recorded = append(recorded, r.TaskID)
	}
	require.ElementsMatch(t, claimed, recorded, "every claim is in the worker's recent tasks")
}

// testGroupResolvedRace: the last two tasks of a group resolved at the
// same moment, on two replicas, never leave the group's resolution
// unreported (each sees the other's task unresolved in its transaction).
func testGroupResolvedRace(t *testing.T, stores []store.Store) {
	ctx := context.Background()
	const groups = 200
	q := "prov/group-race"
	var ids [groups][2]string
	for g := range groups {
		for k := range 2 {
			ids[g][k] = fmt.Sprintf("gr-%02d-%d", g, k)
			_, err := stores[0].CreateTask(ctx, store.CreateTaskParams{TaskID: ids[g][k], Now: Epoch,
				Task: NewTask(q, Epoch, withGroup(fmt.Sprintf("race-%02d", g)))})
			require.NoError(t, err)
		}
	}
	for left := 2 * groups; left > 0; {
		res, err := stores[0].ClaimWork(ctx, store.ClaimWorkParams{TaskQueueID: q, WorkerGroup: workerGroup, WorkerID: workerID,
			Count: 32, Now: Epoch, TakenUntil: Epoch.Add(claimTimeout)})
		require.NoError(t, err)
		require.NotEmpty(t, res.Claims)
		left -= len(res.Claims)
	}
	now := Epoch.Add(time.Minute)
	var (
		errs     errorList
		wg       sync.WaitGroup
		mu       sync.Mutex
		reported = map[string]int{}
	)
	start := make(chan struct{})
	for g := range groups {
		for k := range 2 {
			s := stores[k%len(stores)]
			wg.Go(func() {
				<-start
				res, err := s.UpdateTask(ctx, store.UpdateTaskParams{TaskID: ids[g][k], Now: now, Apply: report(queue.StateCompleted, 0, now)})
				errs.add(err)
				if err != nil {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, g := range resolvedGroups(res) {
					reported[g]++
				}
			})
		}
	}
	close(start)
	wg.Wait()
	errs.require(t)
	for g := range groups {
		id := fmt.Sprintf("race-%02d", g)
		n := reported[id]
		require.GreaterOrEqual(t, n, 1, "group %s resolved without being reported", id)
		require.LessOrEqual(t, n, len(stores), "group %s reported %d times", id, n)
	}
}

// resolvedGroups lists the task groups a result reports resolved.
func resolvedGroups(res *store.Result) []string {
	var out []string
	for _, ch := range res.Changes {
		if ch.GroupResolved != nil {
			out = append(out, ch.GroupResolved.TaskGroupID)
		}
	}
	return out
}
