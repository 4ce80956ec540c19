package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// resolveDep resolves a running dependency "d" in one of several ways and
// returns the store's result.
type resolveDep func(e *env, now time.Time) (*store.Result, error)

func resolveBy(kind string) resolveDep {
	return func(e *env, now time.Time) (*store.Result, error) {
		return e.apply("d", now, report(kind, 0, now))
	}
}

func resolveByCancel(e *env, now time.Time) (*store.Result, error) {
	return e.apply("d", now, cancel(now))
}

func resolveByDeadline(e *env, now time.Time) (*store.Result, error) {
	return e.s.ExpireDeadlines(e.ctx, now, now, 100)
}

func resolveByClaimExpiry(e *env, now time.Time) (*store.Result, error) {
	return e.s.ExpireClaims(e.ctx, now, 100)
}

func testDependencyResolution(t *testing.T, open Opener) {
	tests := []struct {
		name     string
		requires string
		retries  int // of the dependency
		resolve  resolveDep
		at       time.Duration // after Epoch
		// scheduled says whether the dependent gets run 0.
		scheduled bool
	}{
		{"all-completed/completed", queue.RequiresAllCompleted, 0, resolveBy(queue.StateCompleted), time.Minute, true},
		{"all-completed/failed", queue.RequiresAllCompleted, 0, resolveBy(queue.StateFailed), time.Minute, false},
		{"all-completed/exception", queue.RequiresAllCompleted, 0, resolveBy(queue.ReasonMalformedPayload), time.Minute, false},
		{"all-completed/canceled", queue.RequiresAllCompleted, 0, resolveByCancel, time.Minute, false},
		{"all-completed/claim-expired", queue.RequiresAllCompleted, 0, resolveByClaimExpiry, claimTimeout, false},
		{"all-resolved/completed", queue.RequiresAllResolved, 0, resolveBy(queue.StateCompleted), time.Minute, true},
		{"all-resolved/failed", queue.RequiresAllResolved, 0, resolveBy(queue.StateFailed), time.Minute, true},
		{"all-resolved/exception", queue.RequiresAllResolved, 0, resolveBy(queue.ReasonInternalError), time.Minute, true},
		{"all-resolved/canceled", queue.RequiresAllResolved, 0, resolveByCancel, time.Minute, true},
		{"all-resolved/claim-expired", queue.RequiresAllResolved, 0, resolveByClaimExpiry, claimTimeout, true},
		{"all-resolved/deadline", queue.RequiresAllResolved, 0, resolveByDeadline, 30 * time.Minute, true},
		{"all-completed/deadline", queue.RequiresAllCompleted, 0, resolveByDeadline, 30 * time.Minute, false},
		// An exception that is retried does not resolve the dependency.
		{"all-resolved/retried", queue.RequiresAllResolved, 1, resolveBy(queue.ReasonWorkerShutdown), time.Minute, false},
		{"all-resolved/claim-expired retried", queue.RequiresAllResolved, 1, resolveByClaimExpiry, claimTimeout, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, open)
			// The dependency's deadline is before the dependent's, so the
			// deadline cases resolve only the dependency.
			e.bring("d", queue.StateRunning, withRetries(tc.retries), withDeadline(Epoch.Add(30*time.Minute)))
			res := e.create("x", Epoch, withDeps("d"), withRequires(tc.requires))
			require.Equal(t, queue.StateUnscheduled, res.Task.State())
			requireEvents(t, res.Changes, ev("x", queue.EventTaskDefined, -1))
			pending, _ := e.counts(Epoch)
			require.Zero(t, pending)

			now := Epoch.Add(tc.at)
			res, err := tc.resolve(e, now)
			require.NoError(t, err)
			requireStatusFilled(t, res.Changes)
			require.Equal(t, "d", res.Changes[0].Task.TaskID)
			x := e.get("x")
			if !tc.scheduled {
				require.Equal(t, []string{"d"}, changedIDs(res.Changes))
				require.Equal(t, queue.StateUnscheduled, x.State())
				return
			}
			// The dependent's change follows the dependency's, in the same
			// result, and the dependent is claimable at once.
			require.Equal(t, []string{"d", "x"}, changedIDs(res.Changes))
			requireEvents(t, res.Changes[1:], ev("x", queue.EventTaskPending, 0))
			require.Equal(t, []queue.Run{{RunID: 0, State: queue.StatePending, ReasonCreated: queue.ReasonScheduled, Scheduled: queue.NewTime(now)}}, x.Runs)
			require.Equal(t, x, res.Changes[1].Task)
			claims := e.claimWork(testQueue, 1, now)
			require.Equal(t, []string{"x"}, changedIDs(claims.Changes))
		})
	}
}

// testDependencyMultiple: a dependent waits for its last dependency, and a
// satisfied edge stays satisfied when the dependency is rerun.
func testDependencyMultiple(t *testing.T, open Opener) {
	e := setup(t, open)
	now := Epoch.Add(time.Minute)
	for _, id := range []string{"d1", "d2", "d3"} {
		e.bring(id, queue.StateRunning)
	}
	e.create("x", Epoch, withDeps("d1", "d2", "d3"))
	e.create("y", Epoch, withDeps("d1"))

	res := e.mustApply("d1", now, report(queue.StateCompleted, 0, now))
	require.Equal(t, []string{"d1", "y"}, changedIDs(res.Changes))
	require.Equal(t, queue.StateUnscheduled, e.get("x").State())

	// Rerunning d1 does not re-block x.
	e.mustApply("d1", now, rerun(now))
	res = e.mustApply("d2", now, report(queue.StateCompleted, 0, now))
	require.Equal(t, []string{"d2"}, changedIDs(res.Changes))
	require.Equal(t, queue.StateUnscheduled, e.get("x").State())
	res = e.mustApply("d3", now, report(queue.StateCompleted, 0, now))
	require.Equal(t, []string{"d3", "x"}, changedIDs(res.Changes))
	require.Equal(t, queue.StatePending, e.get("x").State())

	// Completing d1's rerun schedules nothing twice.
	e.claim("d1", now)
	res = e.mustApply("d1", now, report(queue.StateCompleted, 1, now))
	require.Equal(t, []string{"d1"}, changedIDs(res.Changes))
	require.Len(t, e.get("x").Runs, 1)
	require.Len(t, e.get("y").Runs, 1)

	deps, _, err := e.s.ListDependents(e.ctx, "d1", store.Page{})
	require.NoError(t, err)
	require.Equal(t, []string{"x", "y"}, ids(deps))
}

// testDependencyAtCreate: edges to dependencies that are already resolved
// are satisfied at creation; a pending retry is not resolved.
func testDependencyAtCreate(t *testing.T, open Opener) {
	tests := []struct {
		state    string
		retry    bool // the dependency's last run is a pending retry
		requires string
		want     string
	}{
		{queue.StateCompleted, false, queue.RequiresAllCompleted, queue.StatePending},
		{queue.StateCompleted, false, queue.RequiresAllResolved, queue.StatePending},
		{queue.StateFailed, false, queue.RequiresAllCompleted, queue.StateUnscheduled},
		{queue.StateFailed, false, queue.RequiresAllResolved, queue.StatePending},
		{queue.StateException, false, queue.RequiresAllCompleted, queue.StateUnscheduled},
		{queue.StateException, false, queue.RequiresAllResolved, queue.StatePending},
		{queue.StateUnscheduled, false, queue.RequiresAllResolved, queue.StateUnscheduled},
		{queue.StatePending, false, queue.RequiresAllResolved, queue.StateUnscheduled},
		{queue.StateRunning, false, queue.RequiresAllResolved, queue.StateUnscheduled},
		{queue.StatePending, true, queue.RequiresAllResolved, queue.StateUnscheduled},
	}
	for _, tc := range tests {
		name := tc.state + "/" + tc.requires
		if tc.retry {
			name = "retry/" + tc.requires
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, open)
			if tc.retry {
				e.bring("d", queue.StateRunning)
				e.mustApply("d", Epoch.Add(time.Second), report(queue.ReasonWorkerShutdown, 0, Epoch.Add(time.Second)))
			} else {
				e.bring("d", tc.state)
			}
			now := Epoch.Add(time.Minute)
			res := e.create("x", now, withDeps("d"), withRequires(tc.requires))
			require.Equal(t, tc.want, res.Task.State())
			if tc.want == queue.StatePending {
				requireEvents(t, res.Changes, ev("x", queue.EventTaskDefined, -1), ev("x", queue.EventTaskPending, 0))
			} else {
				requireEvents(t, res.Changes, ev("x", queue.EventTaskDefined, -1))
			}
			require.Equal(t, res.Task, e.get("x"))
			deps, _, err := e.s.ListDependents(e.ctx, "d", store.Page{})
			require.NoError(t, err)
			require.Contains(t, ids(deps), "x")
		})
	}
}

// testDependencySelf: a self-dependency is legal and never satisfied; only
// scheduleTask (or rerun, cancel, deadline) moves the task.
func testDependencySelf(t *testing.T, open Opener) {
	e := setup(t, open)
	now := Epoch.Add(time.Minute)
	e.bring("d", queue.StateRunning)
	res := e.create("x", Epoch, withDeps("x", "d"), withRequires(queue.RequiresAllResolved))
	require.Equal(t, queue.StateUnscheduled, res.Task.State())

	res = e.mustApply("d", now, report(queue.StateCompleted, 0, now))
	require.Equal(t, []string{"d"}, changedIDs(res.Changes))
	require.Equal(t, queue.StateUnscheduled, e.get("x").State())

	deps, _, err := e.s.ListDependents(e.ctx, "x", store.Page{})
	require.NoError(t, err)
	require.Equal(t, []string{"x"}, ids(deps))

	e.mustApply("x", now, schedule(now))
	e.claim("x", now)
	res = e.mustApply("x", now, report(queue.StateFailed, 0, now))
	require.Equal(t, []string{"x"}, changedIDs(res.Changes))
	got := e.get("x")
	require.Len(t, got.Runs, 1)
	require.Equal(t, queue.StateFailed, got.State())
}

// testDependencyScheduledEarly: once scheduleTask gave a dependent its run,
// the later satisfaction of its dependencies is a no-op.
func testDependencyScheduledEarly(t *testing.T, open Opener) {
	e := setup(t, open)
	now := Epoch.Add(time.Minute)
	e.bring("d", queue.StateRunning)
	e.create("x", Epoch, withDeps("d"))
	e.mustApply("x", now, schedule(now))
	e.claim("x", now)
	res := e.mustApply("d", now, report(queue.StateCompleted, 0, now))
	require.Equal(t, []string{"d"}, changedIDs(res.Changes))
	got := e.get("x")
	require.Len(t, got.Runs, 1)
	require.Equal(t, queue.StateRunning, got.State())

	// A dependent past its deadline is not scheduled by its dependency.
	e.bring("d2", queue.StateRunning, withDeadline(Epoch.Add(time.Hour)))
	e.create("late", Epoch, withDeps("d2"), withDeadline(Epoch.Add(10*time.Minute)))
	res = e.mustApply("d2", Epoch.Add(11*time.Minute), report(queue.StateCompleted, 0, Epoch.Add(11*time.Minute)))
	require.Equal(t, []string{"d2"}, changedIDs(res.Changes))
	require.Equal(t, queue.StateUnscheduled, e.get("late").State())
}

func testDependencyErrors(t *testing.T, open Opener) {
	tests := []struct {
		name         string
		deps         []string
		wantMissing  []string
		wantExpiring []string
	}{
		{"missing", []string{"ok", "gone1", "gone2"}, []string{"gone1", "gone2"}, nil},
		{"expiring", []string{"short", "ok"}, nil, []string{"short"}},
		{"both", []string{"gone1", "short", "ok"}, []string{"gone1"}, []string{"short"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, open)
			e.create("ok", Epoch)
			// "short" expires before the new task's deadline (Epoch+1h).
			e.create("short", Epoch, withDeadline(Epoch.Add(10*time.Minute)), withExpires(Epoch.Add(30*time.Minute)))

			_, err := e.s.CreateTask(e.ctx, store.CreateTaskParams{
				TaskID: "x", Task: NewTask(testQueue, Epoch, withDeps(tc.deps...), withGroup("xg")), Now: Epoch,
			})
			qe := requireQueueError(t, err, queue.KindInput)
			want := map[string]any{}
			if tc.wantMissing != nil {
				want["missingTaskDependencies"] = tc.wantMissing
				require.Contains(t, qe.Message, "non-existing")
			}
			if tc.wantExpiring != nil {
				want["expiringTaskDependencies"] = tc.wantExpiring
				require.Contains(t, qe.Message, "expire")
			}
			require.Equal(t, want, qe.Details)

			// Nothing was written: no task, no group, no dependency edge.
			_, err = e.s.GetTask(e.ctx, "x")
			require.ErrorIs(t, err, store.ErrNotFound)
			_, err = e.s.GetTaskGroup(e.ctx, "xg")
			require.ErrorIs(t, err, store.ErrNotFound)
			for _, dep := range []string{"ok", "short"} {
				deps, _, err := e.s.ListDependents(e.ctx, dep, store.Page{})
				require.NoError(t, err)
				require.Empty(t, deps)
			}
		})
	}
}
