package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

func testClaimWork(t *testing.T, open Opener) {
	e := setup(t, open)
	for i, id := range []string{"t1", "t2", "t3"} {
		e.create(id, Epoch.Add(time.Duration(i)*time.Millisecond))
	}
	e.create("other", Epoch, withQueue("prov/other"))
	now := Epoch.Add(time.Minute)

	res := e.claimWork(testQueue, 2, now)
	require.Len(t, res.Claims, 2)
	for i, c := range res.Claims {
		require.Equal(t, []string{"t1", "t2"}[i], c.Task.TaskID)
		require.Equal(t, 0, c.RunID)
		require.Equal(t, []queue.Run{{RunID: 0, State: queue.StateRunning, ReasonCreated: queue.ReasonScheduled,
			WorkerGroup: workerGroup, WorkerID: workerID, TakenUntil: qt(now.Add(claimTimeout)),
			Scheduled: queue.NewTime(Epoch.Add(time.Duration(i) * time.Millisecond)), Started: qt(now)}}, c.Task.Runs)
		require.Equal(t, c.Task, e.get(c.Task.TaskID))
		require.Equal(t, c.Task, res.Changes[i].Task)
		require.Len(t, res.Changes[i].Events, 1)
		got := res.Changes[i].Events[0]
		got.Status = nil
		require.Equal(t, queue.Event{Kind: queue.EventTaskRunning, RunID: 0, WorkerGroup: workerGroup, WorkerID: workerID, TakenUntil: qt(now.Add(claimTimeout))}, got)
	}
	pending, claimed := e.counts(now)
	require.Equal(t, 1, pending)
	require.Equal(t, 2, claimed)

	// Fewer pending than asked: what there is; then nothing, without error.
	res = e.claimWork(testQueue, 32, now)
	require.Equal(t, []string{"t3"}, changedIDs(res.Changes))
	require.Empty(t, e.claimWork(testQueue, 32, now).Claims)
	require.Empty(t, e.claimWork("prov/unknown", 32, now).Claims)

	// Each queue only hands out its own tasks.
	res = e.claimWork("prov/other", 32, now)
	require.Equal(t, []string{"other"}, changedIDs(res.Changes))
}

func testClaimTask(t *testing.T, open Opener) {
	e := setup(t, open)
	now := Epoch.Add(time.Minute)
	e.create("t", Epoch)
	res := e.claim("t", now)
	requireEvents(t, res.Changes, ev("t", queue.EventTaskRunning, 0))
	require.Equal(t, qt(now.Add(claimTimeout)), res.Task.Runs[0].TakenUntil)
	require.Equal(t, qt(now), res.Task.Runs[0].Started)

	// Claimed this way the run has left the pending queue.
	pending, claimed := e.counts(now)
	require.Zero(t, pending)
	require.Equal(t, 1, claimed)
	require.Empty(t, e.claimWork(testQueue, 1, now).Claims)
	entries, _, err := e.s.ListPending(e.ctx, testQueue, now, store.Page{})
	require.NoError(t, err)
	require.Empty(t, entries)

	// Its worker may repeat the claim (a lost answer): the same run comes
	// back unchanged, with no event, and it stays out of the pending queue.
	later := now.Add(time.Minute)
	res, err = e.apply("t", later, func(ts *queue.TaskState, tr *queue.Transition) error {
		return ts.Claim(0, workerGroup, workerID, later, later.Add(claimTimeout), tr)
	})
	require.NoError(t, err)
	for _, ch := range res.Changes {
		require.Empty(t, ch.Events)
	}
	require.Equal(t, qt(now.Add(claimTimeout)), res.Task.Runs[0].TakenUntil)
	require.Equal(t, qt(now.Add(claimTimeout)), e.get("t").Runs[0].TakenUntil)
	require.Equal(t, workerID, e.get("t").Runs[0].WorkerID)
	pending, claimed = e.counts(later)
	require.Zero(t, pending)
	require.Equal(t, 1, claimed)
	require.Empty(t, e.claimWork(testQueue, 1, later).Claims)

	errs := []struct {
		name  string
		runID int
		group string
		kind  queue.ErrorKind
	}{
		{"other worker", 0, "other-group", queue.KindConflict},
		{"unknown run", 1, workerGroup, queue.KindNotFound},
	}
	for _, tc := range errs {
		_, err := e.apply("t", later, func(ts *queue.TaskState, tr *queue.Transition) error {
			return ts.Claim(tc.runID, tc.group, workerID, later, later.Add(claimTimeout), tr)
		})
		requireQueueError(t, err, tc.kind)
	}

	// Not the last run, and past the deadline.
	e.mustApply("t", later, report(queue.ReasonWorkerShutdown, 0, later))
	_, err = e.apply("t", later, func(ts *queue.TaskState, tr *queue.Transition) error {
		return ts.Claim(0, workerGroup, workerID, later, later.Add(claimTimeout), tr)
	})
	requireQueueError(t, err, queue.KindConflict)
	deadline := Epoch.Add(time.Hour)
	_, err = e.apply("t", deadline, func(ts *queue.TaskState, tr *queue.Transition) error {
		return ts.Claim(1, workerGroup, workerID, deadline, deadline.Add(claimTimeout), tr)
	})
	requireQueueError(t, err, queue.KindConflict)
	require.Equal(t, queue.StatePending, e.get("t").State())
}

func testReclaimTask(t *testing.T, open Opener) {
	e := setup(t, open)
	e.bring("t", queue.StateRunning) // takenUntil Epoch+20m
	reclaim := func(now, until time.Time) func(*queue.TaskState, *queue.Transition) error {
		return func(ts *queue.TaskState, tr *queue.Transition) error { return ts.Reclaim(0, now, until) }
	}
	t1 := Epoch.Add(10 * time.Minute)
	res := e.mustApply("t", t1, reclaim(t1, t1.Add(claimTimeout)))
	requireEvents(t, res.Changes)
	require.Equal(t, qt(t1.Add(claimTimeout)), e.get("t").Runs[0].TakenUntil)

	// Never backwards.
	e.mustApply("t", t1, reclaim(t1, Epoch.Add(claimTimeout)))
	require.Equal(t, qt(t1.Add(claimTimeout)), e.get("t").Runs[0].TakenUntil)

	// The original claim no longer expires; the extended one does.
	exp, err := e.s.ExpireClaims(e.ctx, Epoch.Add(claimTimeout), 100)
	require.NoError(t, err)
	require.Empty(t, exp.Changes)
	_, claimed := e.counts(Epoch.Add(claimTimeout))
	require.Equal(t, 1, claimed)

	// A reclaim after takenUntil but before any sweep still succeeds.
	t2 := t1.Add(claimTimeout + time.Minute)
	e.mustApply("t", t2, reclaim(t2, t2.Add(claimTimeout)))
	require.Equal(t, qt(t2.Add(claimTimeout)), e.get("t").Runs[0].TakenUntil)

	exp, err = e.s.ExpireClaims(e.ctx, t2.Add(claimTimeout), 100)
	require.NoError(t, err)
	require.Equal(t, []string{"t"}, changedIDs(exp.Changes))

	// Run 0 is resolved now: reclaiming it conflicts; run 1 is pending.
	_, err = e.apply("t", t2, reclaim(t2, t2.Add(claimTimeout)))
	requireQueueError(t, err, queue.KindConflict)
	_, err = e.apply("t", t2, func(ts *queue.TaskState, tr *queue.Transition) error { return ts.Reclaim(1, t2, t2.Add(claimTimeout)) })
	requireQueueError(t, err, queue.KindConflict)
	_, err = e.apply("t", t2, func(ts *queue.TaskState, tr *queue.Transition) error { return ts.Reclaim(7, t2, t2.Add(claimTimeout)) })
	requireQueueError(t, err, queue.KindNotFound)
}

func testReports(t *testing.T, open Opener) {
	now := Epoch.Add(5 * time.Minute)
	tests := []struct {
		name       string
		report     string // completed, failed, or an exception reason
		retries    int
		wantState  string // state of run 0
		wantReason string
		retryAs    string // reasonCreated of the retry run, "" if none
		wantEvents []string
	}{
		{"completed", queue.StateCompleted, 5, queue.StateCompleted, queue.ReasonCompleted, "", []string{queue.EventTaskCompleted}},
		{"failed", queue.StateFailed, 5, queue.StateFailed, queue.ReasonFailed, "", []string{queue.EventTaskFailed}},
		{"worker-shutdown", queue.ReasonWorkerShutdown, 5, queue.StateException, queue.ReasonWorkerShutdown, queue.ReasonRetry, []string{queue.EventTaskException, queue.EventTaskPending}},
		{"worker-shutdown without retries", queue.ReasonWorkerShutdown, 0, queue.StateException, queue.ReasonWorkerShutdown, "", []string{queue.EventTaskException}},
		{"intermittent-task", queue.ReasonIntermittentTask, 2, queue.StateException, queue.ReasonIntermittentTask, queue.ReasonTaskRetry, []string{queue.EventTaskException, queue.EventTaskPending}},
		{"malformed-payload", queue.ReasonMalformedPayload, 5, queue.StateException, queue.ReasonMalformedPayload, "", []string{queue.EventTaskException}},
		{"resource-unavailable", queue.ReasonResourceUnavailable, 5, queue.StateException, queue.ReasonResourceUnavailable, "", []string{queue.EventTaskException}},
		{"resources-unavailable (seed spelling)", "resources-unavailable", 5, queue.StateException, queue.ReasonResourceUnavailable, "", []string{queue.EventTaskException}},
		{"internal-error", queue.ReasonInternalError, 5, queue.StateException, queue.ReasonInternalError, "", []string{queue.EventTaskException}},
		{"superseded", queue.ReasonSuperseded, 5, queue.StateException, queue.ReasonSuperseded, "", []string{queue.EventTaskException}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, open)
			e.bring("t", queue.StateRunning, withRetries(tc.retries))
			res := e.mustApply("t", now, report(tc.report, 0, now))
			got := e.get("t")
			require.Equal(t, res.Task, got)

			run0 := got.Runs[0]
			require.Equal(t, tc.wantState, run0.State)
			require.Equal(t, tc.wantReason, run0.ReasonResolved)
			require.Equal(t, qt(now), run0.Resolved)
			require.Equal(t, workerGroup, run0.WorkerGroup)
			require.Equal(t, workerID, run0.WorkerID)

			require.Len(t, res.Changes, 1)
			var kinds []string
			for i, ev := range res.Changes[0].Events {
				kinds = append(kinds, ev.Kind)
				if i == 0 {
					require.Equal(t, 0, ev.RunID)
					require.Equal(t, workerGroup, ev.WorkerGroup)
					require.Equal(t, workerID, ev.WorkerID)
				} else {
					require.Equal(t, 1, ev.RunID)
				}
			}
			require.Equal(t, tc.wantEvents, kinds)

			pending, claimed := e.counts(now)
			require.Zero(t, claimed)
			if tc.retryAs == "" {
				require.Len(t, got.Runs, 1)
				require.Equal(t, tc.retries, got.RetriesLeft)
				require.Zero(t, pending)
				require.NotNil(t, res.Changes[0].GroupResolved, "the task's own group resolves with it")
				return
			}
			// The retry replaces the exception atomically: the task is
			// pending, one retry poorer, and claimable.
			require.Equal(t, queue.StatePending, got.State())
			require.Equal(t, tc.retries-1, got.RetriesLeft)
			require.Equal(t, queue.Run{RunID: 1, State: queue.StatePending, ReasonCreated: tc.retryAs, Scheduled: queue.NewTime(now)}, got.Runs[1])
			require.Nil(t, res.Changes[0].GroupResolved)
			require.Equal(t, 1, pending)
			claims := e.claimWork(testQueue, 1, now)
			require.Len(t, claims.Claims, 1)
			require.Equal(t, 1, claims.Claims[0].RunID)
		})
	}
}

func testReportConflicts(t *testing.T, open Opener) {
	e := setup(t, open)
	now := Epoch.Add(5 * time.Minute)

	// Repeating a report is a no-op; contradicting it conflicts.
	e.bring("done", queue.StateCompleted)
	before := e.get("done")
	res := e.mustApply("done", now, report(queue.StateCompleted, 0, now))
	require.Empty(t, res.Changes)
	for _, r := range []string{queue.StateFailed, queue.ReasonInternalError} {
		_, err := e.apply("done", now, report(r, 0, now))
		requireQueueError(t, err, queue.KindConflict)
	}
	require.Equal(t, before, e.get("done"))

	e.bring("retried", queue.StateRunning)
	e.mustApply("retried", now, report(queue.ReasonWorkerShutdown, 0, now))
	before = e.get("retried")
	res = e.mustApply("retried", now, report(queue.ReasonWorkerShutdown, 0, now))
	require.Empty(t, res.Changes)
	_, err := e.apply("retried", now, report(queue.ReasonInternalError, 0, now))
	requireQueueError(t, err, queue.KindConflict)
	require.Equal(t, before, e.get("retried"))

	// A pending run cannot be reported; an unknown run is not found.
	for _, r := range []string{queue.StateCompleted, queue.StateFailed, queue.ReasonWorkerShutdown} {
		_, err := e.apply("retried", now, report(r, 1, now))
		requireQueueError(t, err, queue.KindConflict)
		_, err = e.apply("retried", now, report(r, 2, now))
		requireQueueError(t, err, queue.KindNotFound)
	}
	require.Equal(t, before, e.get("retried"))

	// Reports are not deadline-checked: a running run can still be
	// resolved after its deadline, until the deadline sweep gets to it.
	e.bring("late", queue.StateRunning, withDeadline(Epoch.Add(10*time.Minute)))
	res = e.mustApply("late", Epoch.Add(11*time.Minute), report(queue.StateCompleted, 0, Epoch.Add(11*time.Minute)))
	require.Equal(t, queue.StateCompleted, res.Task.State())

	_, err = e.apply("unknown", now, report(queue.StateCompleted, 0, now))
	require.ErrorIs(t, err, store.ErrNotFound)
	var qe *queue.Error
	require.False(t, errors.As(err, &qe))
}

func testExpireClaims(t *testing.T, open Opener) {
	e := setup(t, open)
	e.bring("t", queue.StateRunning, withRetries(1)) // takenUntil Epoch+20m
	due := Epoch.Add(claimTimeout)

	// Not a millisecond early.
	res, err := e.s.ExpireClaims(e.ctx, due.Add(-time.Millisecond), 100)
	require.NoError(t, err)
	require.Empty(t, res.Changes)
	require.Equal(t, queue.StateRunning, e.get("t").State())

	res, err = e.s.ExpireClaims(e.ctx, due, 100)
	require.NoError(t, err)
	requireStatusFilled(t, res.Changes)
	requireEvents(t, res.Changes, ev("t", queue.EventTaskException, 0), ev("t", queue.EventTaskPending, 1))
	require.Equal(t, workerGroup, res.Changes[0].Events[0].WorkerGroup)
	got := e.get("t")
	require.Equal(t, []queue.Run{
		{RunID: 0, State: queue.StateException, ReasonCreated: queue.ReasonScheduled, ReasonResolved: queue.ReasonClaimExpired,
			WorkerGroup: workerGroup, WorkerID: workerID, TakenUntil: qt(due), Scheduled: queue.NewTime(Epoch), Started: qt(Epoch), Resolved: qt(due)},
		{RunID: 1, State: queue.StatePending, ReasonCreated: queue.ReasonRetry, Scheduled: queue.NewTime(due)},
	}, got.Runs)
	require.Zero(t, got.RetriesLeft)

	// Exactly once.
	res, err = e.s.ExpireClaims(e.ctx, due.Add(time.Minute), 100)
	require.NoError(t, err)
	require.Empty(t, res.Changes)

	// The retry run is claimable; when its claim expires with no retries
	// left, the task resolves and its dependents and group are processed.
	e.create("dep", Epoch, withDeps("t"), withRequires(queue.RequiresAllResolved))
	claimAt := due.Add(time.Minute)
	require.Len(t, e.claimWork(testQueue, 1, claimAt).Claims, 1)
	res, err = e.s.ExpireClaims(e.ctx, claimAt.Add(claimTimeout), 100)
	require.NoError(t, err)
	requireStatusFilled(t, res.Changes)
	requireEvents(t, res.Changes, ev("t", queue.EventTaskException, 1), ev("dep", queue.EventTaskPending, 0))
	require.NotNil(t, res.Changes[0].GroupResolved)
	require.Equal(t, "t", res.Changes[0].GroupResolved.TaskGroupID)
	got = e.get("t")
	require.Equal(t, queue.StateException, got.State())
	require.Len(t, got.Runs, 2)
	require.Equal(t, queue.StatePending, e.get("dep").State())

	// A claim that runs out after the deadline is left to the deadline
	// sweep.
	e.bring("late", queue.StateRunning, withDeadline(Epoch.Add(10*time.Minute)))
	res, err = e.s.ExpireClaims(e.ctx, Epoch.Add(30*time.Minute), 100)
	require.NoError(t, err)
	require.Empty(t, res.Changes)
	require.Equal(t, queue.StateRunning, e.get("late").State())
}

func testExpireClaimsLimit(t *testing.T, open Opener) {
	e := setup(t, open)
	for _, id := range []string{"a", "b", "c"} {
		e.bring(id, queue.StateRunning)
	}
	now := Epoch.Add(time.Hour - time.Minute)
	res, err := e.s.ExpireClaims(e.ctx, now, 2)
	require.NoError(t, err)
	require.Len(t, res.Changes, 2)
	res2, err := e.s.ExpireClaims(e.ctx, now, 2)
	require.NoError(t, err)
	require.Len(t, res2.Changes, 1)
	require.ElementsMatch(t, []string{"a", "b", "c"}, append(changedIDs(res.Changes), changedIDs(res2.Changes)...))
	pending, claimed := e.counts(now)
	require.Equal(t, 3, pending)
	require.Zero(t, claimed)
}

func testExpireDeadlines(t *testing.T, open Opener) {
	deadline := Epoch.Add(30 * time.Minute)
	sweep := deadline.Add(time.Minute)
	tests := []struct {
		state string
		// want is the last run after the sweep; nil means no change.
		want      *queue.Run
		wantEvent *queue.Event
	}{
		{
			state:     queue.StateUnscheduled,
			want:      &queue.Run{RunID: 0, State: queue.StateException, ReasonCreated: queue.ReasonException, ReasonResolved: queue.ReasonDeadlineExceeded, Scheduled: queue.NewTime(sweep), Resolved: qt(sweep)},
			wantEvent: &queue.Event{Kind: queue.EventTaskException, RunID: 0},
		},
		{
			state:     queue.StatePending,
			want:      &queue.Run{RunID: 0, State: queue.StateException, ReasonCreated: queue.ReasonScheduled, ReasonResolved: queue.ReasonDeadlineExceeded, Scheduled: queue.NewTime(Epoch), Resolved: qt(sweep)},
			wantEvent: &queue.Event{Kind: queue.EventTaskException, RunID: 0},
		},
		{
			// The run keeps its worker, but the event names none: no worker
			// resolved it.
			state: queue.StateRunning,
			want: &queue.Run{RunID: 0, State: queue.StateException, ReasonCreated: queue.ReasonScheduled, ReasonResolved: queue.ReasonDeadlineExceeded,
				WorkerGroup: workerGroup, WorkerID: workerID, TakenUntil: qt(Epoch.Add(claimTimeout)), Scheduled: queue.NewTime(Epoch), Started: qt(Epoch), Resolved: qt(sweep)},
			wantEvent: &queue.Event{Kind: queue.EventTaskException, RunID: 0},
		},
		{state: queue.StateCompleted},
		{state: queue.StateFailed},
		{state: queue.StateException},
	}
	for _, tc := range tests {
		t.Run(tc.state, func(t *testing.T) {
			t.Parallel()
			e := setup(t, open)
			before := e.bring("t", tc.state, withDeadline(deadline))

			// Nothing before the deadline.
			res, err := e.s.ExpireDeadlines(e.ctx, deadline.Add(-time.Millisecond), deadline.Add(-time.Millisecond), 100)
			require.NoError(t, err)
			require.Empty(t, res.Changes)

			res, err = e.s.ExpireDeadlines(e.ctx, deadline, sweep, 100)
			require.NoError(t, err)
			requireStatusFilled(t, res.Changes)
			got := e.get("t")
			if tc.want == nil {
				require.Empty(t, res.Changes)
				require.Equal(t, before, got)
				return
			}
			require.Equal(t, []queue.Run{*tc.want}, got.Runs)
			require.Len(t, res.Changes, 1)
			require.Equal(t, got, res.Changes[0].Task)
			require.Len(t, res.Changes[0].Events, 1)
			gotEvent := res.Changes[0].Events[0]
			gotEvent.Status = nil
			require.Equal(t, *tc.wantEvent, gotEvent)
			require.NotNil(t, res.Changes[0].GroupResolved)

			pending, claimed := e.counts(Epoch)
			require.Zero(t, pending)
			require.Zero(t, claimed)
			entries, _, err := e.s.ListClaimed(e.ctx, testQueue, sweep, store.Page{})
			require.NoError(t, err)
			require.Empty(t, entries)

			// Exactly once.
			res, err = e.s.ExpireDeadlines(e.ctx, sweep, sweep.Add(time.Minute), 100)
			require.NoError(t, err)
			require.Empty(t, res.Changes)
		})
	}
}
