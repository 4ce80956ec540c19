package queue_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
)

// TestTransitions walks every row of docs/contract/queue.md §4.4 and checks the runs,
// retry budget and events each one leaves behind.
func TestTransitions(t *testing.T) {
	t.Parallel()

	const now = 2 * time.Hour
	afterDeadline := taskLife + time.Minute
	run0 := pendingRun(0, queue.ReasonScheduled, 0)
	running0 := claimed(run0, time.Minute)

	tests := []struct {
		name        string
		retries     int
		setup       []step
		act         func(t *testing.T, ts *queue.TaskState, tr *queue.Transition)
		wantState   string
		wantRetries int
		wantRuns    []queue.Run
		wantEvents  []queue.Event
	}{
		{
			name:    "#1 scheduleTask gives an unscheduled task run 0 pending/scheduled",
			retries: 5,
			act: func(t *testing.T, ts *queue.TaskState, tr *queue.Transition) {
				require.NoError(t, ts.Schedule(at(now), tr))
			},
			wantState:   queue.StatePending,
			wantRetries: 5,
			wantRuns:    []queue.Run{pendingRun(0, queue.ReasonScheduled, now)},
			wantEvents:  []queue.Event{runEv(queue.EventTaskPending, 0)},
		},
		{
			name:    "#1 last dependency satisfied gives run 0 pending/scheduled",
			retries: 5,
			act: func(t *testing.T, ts *queue.TaskState, tr *queue.Transition) {
				require.True(t, ts.DependenciesSatisfied(at(now), tr))
			},
			wantState:   queue.StatePending,
			wantRetries: 5,
			wantRuns:    []queue.Run{pendingRun(0, queue.ReasonScheduled, now)},
			wantEvents:  []queue.Event{runEv(queue.EventTaskPending, 0)},
		},
		{
			name:    "#2 rerunTask on an unscheduled task gives run 0 pending/rerun",
			retries: 3,
			act: func(t *testing.T, ts *queue.TaskState, tr *queue.Transition) {
				require.NoError(t, ts.Rerun(at(now), tr))
			},
			wantState:   queue.StatePending,
			wantRetries: 3,
			wantRuns:    []queue.Run{pendingRun(0, queue.ReasonRerun, now)},
			wantEvents:  []queue.Event{runEv(queue.EventTaskPending, 0)},
		},
		{
			name:    "#3 cancelTask on an unscheduled task adds run 0 exception/canceled",
			retries: 5,
			act: func(t *testing.T, ts *queue.TaskState, tr *queue.Transition) {
				require.NoError(t, ts.Cancel(at(now), tr))
			},
			wantState:   queue.StateException,
			wantRetries: 5,
			wantRuns: []queue.Run{resolvedRun(pendingRun(0, queue.ReasonException, now),
				queue.StateException, queue.ReasonCanceled, now)},
			wantEvents: []queue.Event{runEv(queue.EventTaskException, 0)},
		},
		{
			name:    "#4 deadline passes on an unscheduled task: run 0 exception/deadline-exceeded",
			retries: 5,
			act: func(t *testing.T, ts *queue.TaskState, tr *queue.Transition) {
				require.True(t, ts.ExpireDeadline(at(afterDeadline), tr))
			},
			wantState:   queue.StateException,
			wantRetries: 5,
			wantRuns: []queue.Run{resolvedRun(pendingRun(0, queue.ReasonException, afterDeadline),
				queue.StateException, queue.ReasonDeadlineExceeded, afterDeadline)},
			wantEvents: []queue.Event{runEv(queue.EventTaskException, 0)},
		},
		{
			name:    "#5 claim makes the pending run running with worker, started and takenUntil",
			retries: 5,
			setup:   []step{scheduleAt(0)},
			act: func(t *testing.T, ts *queue.TaskState, tr *queue.Transition) {
				require.NoError(t, ts.Claim(0, testGroup, testWorker, at(now), at(now+claimTimeout), tr))
			},
			wantState:   queue.StateRunning,
			wantRetries: 5,
			wantRuns:    []queue.Run{claimed(run0, now)},
			wantEvents: []queue.Event{{
				Kind: queue.EventTaskRunning, RunID: 0, WorkerGroup: testGroup, WorkerID: testWorker,
				TakenUntil: qtp(now + claimTimeout),
			}},
		},
		{
			name:    "#6 reclaim moves takenUntil forward and nothing else",
			retries: 5,
			setup:   []step{scheduleAt(0), claimAt(0, time.Minute)},
			act: func(t *testing.T, ts *queue.TaskState, _ *queue.Transition) {
				require.NoError(t, ts.Reclaim(0, at(now), at(now+claimTimeout)))
			},
			wantState:   queue.StateRunning,
			wantRetries: 5,
			wantRuns: func() []queue.Run {
				r := running0
				r.TakenUntil = qtp(now + claimTimeout)
				return []queue.Run{r}
			}(),
		},
		{
			name:    "#7 reportCompleted resolves the run completed",
			retries: 5,
			setup:   []step{scheduleAt(0), claimAt(0, time.Minute)},
			act: func(t *testing.T, ts *queue.TaskState, tr *queue.Transition) {
				require.NoError(t, ts.ReportCompleted(0, at(now), tr))
			},
			wantState:   queue.StateCompleted,
			wantRetries: 5,
			wantRuns:    []queue.Run{resolvedRun(running0, queue.StateCompleted, queue.ReasonCompleted, now)},
			wantEvents:  []queue.Event{workerEv(queue.EventTaskCompleted, 0)},
		},
		{
			name:    "#8 reportFailed resolves the run failed",
			retries: 5,
			setup:   []step{scheduleAt(0), claimAt(0, time.Minute)},
			act: func(t *testing.T, ts *queue.TaskState, tr *queue.Transition) {
				require.NoError(t, ts.ReportFailed(0, at(now), tr))
			},
			wantState:   queue.StateFailed,
			wantRetries: 5,
			wantRuns:    []queue.Run{resolvedRun(running0, queue.StateFailed, queue.ReasonFailed, now)},
			wantEvents:  []queue.Event{workerEv(queue.EventTaskFailed, 0)},
		},
		{
			name:    "#9 reportException worker-shutdown with budget adds a retry run",
			retries: 5,
			setup:   []step{scheduleAt(0), claimAt(0, time.Minute)},
			act: func(t *testing.T, ts *queue.TaskState, tr *queue.Transition) {
				require.NoError(t, ts.ReportException(0, queue.ReasonWorkerShutdown, at(now), tr))
			},
			wantState:   queue.StatePending,
			wantRetries: 4,
			wantRuns: []queue.Run{
				resolvedRun(running0, queue.StateException, queue.ReasonWorkerShutdown, now),
				pendingRun(1, queue.ReasonRetry, now),
			},
			wantEvents: []queue.Event{workerEv(queue.EventTaskException, 0), runEv(queue.EventTaskPending, 1)},
		},
		{
			name:    "#9 reportException intermittent-task with budget adds a task-retry run",
			retries: 1,
			setup:   []step{scheduleAt(0), claimAt(0, time.Minute)},
			act: func(t *testing.T, ts *queue.TaskState, tr *queue.Transition) {
				require.NoError(t, ts.ReportException(0, queue.ReasonIntermittentTask, at(now), tr))
			},
			wantState:   queue.StatePending,
			wantRetries: 0,
			wantRuns: []queue.Run{
				resolvedRun(running0, queue.StateException, queue.ReasonIntermittentTask, now),
				pendingRun(1, queue.ReasonTaskRetry, now),
			},
			wantEvents: []queue.Event{workerEv(queue.EventTaskException, 0), runEv(queue.EventTaskPending, 1)},
		},
		{
			name:    "#9 reportException malformed-payload resolves the task",
			retries: 5,
			setup:   []step{scheduleAt(0), claimAt(0, time.Minute)},
			act: func(t *testing.T, ts *queue.TaskState, tr *queue.Transition) {
				require.NoError(t, ts.ReportException(0, queue.ReasonMalformedPayload, at(now), tr))
			},
			wantState:   queue.StateException,
			wantRetries: 5,
			wantRuns:    []queue.Run{resolvedRun(running0, queue.StateException, queue.ReasonMalformedPayload, now)},
			wantEvents:  []queue.Event{workerEv(queue.EventTaskException, 0)},
		},
		{
			name:    "#10 claim expiry resolves claim-expired and retries",
			retries: 5,
			setup:   []step{scheduleAt(0), claimAt(0, time.Minute)},
			act: func(t *testing.T, ts *queue.TaskState, tr *queue.Transition) {
				require.True(t, ts.ExpireClaim(at(time.Minute+claimTimeout), at(now), tr))
			},
			wantState:   queue.StatePending,
			wantRetries: 4,
			wantRuns: []queue.Run{
				resolvedRun(running0, queue.StateException, queue.ReasonClaimExpired, now),
				pendingRun(1, queue.ReasonRetry, now),
			},
			wantEvents: []queue.Event{workerEv(queue.EventTaskException, 0), runEv(queue.EventTaskPending, 1)},
		},
		{
			name:    "#11 cancelTask on a pending run resolves it canceled without worker fields",
			retries: 5,
			setup:   []step{scheduleAt(0)},
			act: func(t *testing.T, ts *queue.TaskState, tr *queue.Transition) {
				require.NoError(t, ts.Cancel(at(now), tr))
			},
			wantState:   queue.StateException,
			wantRetries: 5,
			wantRuns:    []queue.Run{resolvedRun(run0, queue.StateException, queue.ReasonCanceled, now)},
			wantEvents:  []queue.Event{runEv(queue.EventTaskException, 0)},
		},
		{
			name:    "#11 cancelTask on a running run keeps its claim fields and is not retried",
			retries: 5,
			setup:   []step{scheduleAt(0), claimAt(0, time.Minute)},
			act: func(t *testing.T, ts *queue.TaskState, tr *queue.Transition) {
				require.NoError(t, ts.Cancel(at(now), tr))
			},
			wantState:   queue.StateException,
			wantRetries: 5,
			wantRuns:    []queue.Run{resolvedRun(running0, queue.StateException, queue.ReasonCanceled, now)},
			wantEvents:  []queue.Event{workerEv(queue.EventTaskException, 0)},
		},
		{
			name:    "#12 deadline passes on a pending run",
			retries: 5,
			setup:   []step{scheduleAt(0)},
			act: func(t *testing.T, ts *queue.TaskState, tr *queue.Transition) {
				require.True(t, ts.ExpireDeadline(at(afterDeadline), tr))
			},
			wantState:   queue.StateException,
			wantRetries: 5,
			wantRuns:    []queue.Run{resolvedRun(run0, queue.StateException, queue.ReasonDeadlineExceeded, afterDeadline)},
			wantEvents:  []queue.Event{runEv(queue.EventTaskException, 0)},
		},
		{
			name:    "#12 deadline passes on a running run: never retried, event names no worker",
			retries: 5,
			setup:   []step{scheduleAt(0), claimAt(0, time.Minute)},
			act: func(t *testing.T, ts *queue.TaskState, tr *queue.Transition) {
				require.True(t, ts.ExpireDeadline(at(afterDeadline), tr))
			},
			wantState:   queue.StateException,
			wantRetries: 5,
			wantRuns:    []queue.Run{resolvedRun(running0, queue.StateException, queue.ReasonDeadlineExceeded, afterDeadline)},
			wantEvents:  []queue.Event{runEv(queue.EventTaskException, 0)},
		},
		{
			name:    "#13 rerunTask after completed adds a pending rerun run",
			retries: 5,
			setup:   []step{scheduleAt(0), claimAt(0, time.Minute), completeAt(0, 30*time.Minute)},
			act: func(t *testing.T, ts *queue.TaskState, tr *queue.Transition) {
				require.NoError(t, ts.Rerun(at(now), tr))
			},
			wantState:   queue.StatePending,
			wantRetries: 5,
			wantRuns: []queue.Run{
				resolvedRun(running0, queue.StateCompleted, queue.ReasonCompleted, 30*time.Minute),
				pendingRun(1, queue.ReasonRerun, now),
			},
			wantEvents: []queue.Event{runEv(queue.EventTaskPending, 1)},
		},
		{
			name:    "#13 rerunTask after failed adds a pending rerun run",
			retries: 5,
			setup:   []step{scheduleAt(0), claimAt(0, time.Minute), failAt(0, 30*time.Minute)},
			act: func(t *testing.T, ts *queue.TaskState, tr *queue.Transition) {
				require.NoError(t, ts.Rerun(at(now), tr))
			},
			wantState:   queue.StatePending,
			wantRetries: 5,
			wantRuns: []queue.Run{
				resolvedRun(running0, queue.StateFailed, queue.ReasonFailed, 30*time.Minute),
				pendingRun(1, queue.ReasonRerun, now),
			},
			wantEvents: []queue.Event{runEv(queue.EventTaskPending, 1)},
		},
		{
			name:    "#13 rerunTask after an exhausted exception resets the retry budget",
			retries: 1,
			setup: []step{
				scheduleAt(0), claimAt(0, time.Minute),
				exceptionAt(0, queue.ReasonWorkerShutdown, 10*time.Minute),
				claimAt(1, 11*time.Minute),
				exceptionAt(1, queue.ReasonWorkerShutdown, 30*time.Minute),
			},
			act: func(t *testing.T, ts *queue.TaskState, tr *queue.Transition) {
				require.Zero(t, ts.RetriesLeft)
				require.NoError(t, ts.Rerun(at(now), tr))
			},
			wantState:   queue.StatePending,
			wantRetries: 1,
			wantRuns: []queue.Run{
				resolvedRun(running0, queue.StateException, queue.ReasonWorkerShutdown, 10*time.Minute),
				resolvedRun(claimed(pendingRun(1, queue.ReasonRetry, 10*time.Minute), 11*time.Minute),
					queue.StateException, queue.ReasonWorkerShutdown, 30*time.Minute),
				pendingRun(2, queue.ReasonRerun, now),
			},
			wantEvents: []queue.Event{runEv(queue.EventTaskPending, 2)},
		},
		{
			name:    "#13 rerunTask after a cancel adds a pending rerun run",
			retries: 5,
			setup:   []step{cancelAt(time.Minute)},
			act: func(t *testing.T, ts *queue.TaskState, tr *queue.Transition) {
				require.NoError(t, ts.Rerun(at(now), tr))
			},
			wantState:   queue.StatePending,
			wantRetries: 5,
			wantRuns: []queue.Run{
				resolvedRun(pendingRun(0, queue.ReasonException, time.Minute), queue.StateException, queue.ReasonCanceled, time.Minute),
				pendingRun(1, queue.ReasonRerun, now),
			},
			wantEvents: []queue.Event{runEv(queue.EventTaskPending, 1)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := build(t, tt.retries, tt.setup...)
			var tr queue.Transition
			tt.act(t, ts, &tr)
			require.Equal(t, tt.wantState, ts.State())
			require.Equal(t, tt.wantRetries, ts.RetriesLeft)
			require.Equal(t, tt.wantRuns, ts.Runs)
			require.Equal(t, tt.wantEvents, tr.Events)
			for i, r := range ts.Runs {
				require.Equal(t, i, r.RunID, "runs are numbered without gaps")
				if i < len(ts.Runs)-1 {
					require.True(t, r.IsResolved(), "only the last run may be unresolved")
				}
			}
		})
	}
}

// TestRetries covers docs/contract/queue.md §4.5: which exception reasons create a
// retry run, with and without budget.
func TestRetries(t *testing.T) {
	t.Parallel()

	const now = time.Hour
	reportWith := func(reason string) func(ts *queue.TaskState, tr *queue.Transition) error {
		return func(ts *queue.TaskState, tr *queue.Transition) error {
			return ts.ReportException(0, reason, at(now), tr)
		}
	}
	expireClaim := func(ts *queue.TaskState, tr *queue.Transition) error {
		if !ts.ExpireClaim(at(time.Minute+claimTimeout), at(now), tr) {
			return fmt.Errorf("claim did not expire")
		}
		return nil
	}
	cancel := func(ts *queue.TaskState, tr *queue.Transition) error { return ts.Cancel(at(now), tr) }
	expireDeadline := func(ts *queue.TaskState, tr *queue.Transition) error {
		if !ts.ExpireDeadline(at(taskLife+time.Minute), tr) {
			return fmt.Errorf("deadline did not expire")
		}
		return nil
	}

	tests := []struct {
		name         string
		retries      int
		resolve      func(ts *queue.TaskState, tr *queue.Transition) error
		wantResolved string // reasonResolved of run 0
		wantCreated  string // reasonCreated of the retry run; "" when none
	}{
		{"worker-shutdown with budget", 2, reportWith(queue.ReasonWorkerShutdown), queue.ReasonWorkerShutdown, queue.ReasonRetry},
		{"worker-shutdown without budget", 0, reportWith(queue.ReasonWorkerShutdown), queue.ReasonWorkerShutdown, ""},
		{"intermittent-task with budget", 2, reportWith(queue.ReasonIntermittentTask), queue.ReasonIntermittentTask, queue.ReasonTaskRetry},
		{"intermittent-task without budget", 0, reportWith(queue.ReasonIntermittentTask), queue.ReasonIntermittentTask, ""},
		{"claim-expired with budget", 2, expireClaim, queue.ReasonClaimExpired, queue.ReasonRetry},
		{"claim-expired without budget", 0, expireClaim, queue.ReasonClaimExpired, ""},
		{"malformed-payload never retries", 2, reportWith(queue.ReasonMalformedPayload), queue.ReasonMalformedPayload, ""},
		{"resource-unavailable never retries", 2, reportWith(queue.ReasonResourceUnavailable), queue.ReasonResourceUnavailable, ""},
		{"resources-unavailable alias is stored as resource-unavailable", 2, reportWith("resources-unavailable"), queue.ReasonResourceUnavailable, ""},
		{"internal-error never retries", 2, reportWith(queue.ReasonInternalError), queue.ReasonInternalError, ""},
		{"superseded never retries", 2, reportWith(queue.ReasonSuperseded), queue.ReasonSuperseded, ""},
		{"canceled never retries", 2, cancel, queue.ReasonCanceled, ""},
		{"deadline-exceeded never retries", 2, expireDeadline, queue.ReasonDeadlineExceeded, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := build(t, tt.retries, scheduleAt(0), claimAt(0, time.Minute))
			before := ts.Clone()
			var tr queue.Transition
			require.NoError(t, tt.resolve(ts, &tr))

			require.Equal(t, queue.StateException, ts.Runs[0].State)
			require.Equal(t, tt.wantResolved, ts.Runs[0].ReasonResolved)
			require.Equal(t, queue.EventTaskException, tr.Events[0].Kind)
			require.Equal(t, 0, tr.Events[0].RunID)

			if tt.wantCreated == "" {
				require.Len(t, ts.Runs, 1)
				require.Equal(t, queue.StateException, ts.State())
				require.Equal(t, tt.retries, ts.RetriesLeft, "no retry, no budget spent")
				require.Len(t, tr.Events, 1)
				require.True(t, queue.BecameResolved(before, ts))
				return
			}
			require.Len(t, ts.Runs, 2)
			require.Equal(t, pendingRun(1, tt.wantCreated, now), ts.Runs[1])
			require.Equal(t, queue.StatePending, ts.State(), "a retried task never shows exception")
			require.Equal(t, tt.retries-1, ts.RetriesLeft)
			require.Equal(t, []string{queue.EventTaskException, queue.EventTaskPending},
				[]string{tr.Events[0].Kind, tr.Events[1].Kind}, "exception first, then pending")
			require.Equal(t, 1, tr.Events[1].RunID)
			require.False(t, queue.BecameResolved(before, ts))

			// The retry run is immediately claimable.
			require.NoError(t, ts.Claim(1, testGroup, "another-worker", at(now+time.Second),
				at(now+time.Second+claimTimeout), &queue.Transition{}))
			require.Equal(t, queue.StateRunning, ts.State())
		})
	}
}

// TestRetryBudgetExhaustion spends a budget of two retries across the three
// retrying reasons; the third exception resolves the task.
func TestRetryBudgetExhaustion(t *testing.T) {
	t.Parallel()
	clk := newClock()
	ts := newState(2)
	var tr queue.Transition

	require.NoError(t, ts.Schedule(clk.Now(), &tr))
	claimRun := func(runID int) time.Time {
		now := clk.Advance(time.Minute)
		until := now.Add(claimTimeout)
		require.NoError(t, ts.Claim(runID, testGroup, testWorker, now, until, &tr))
		return until
	}

	claimRun(0)
	require.NoError(t, ts.ReportException(0, queue.ReasonWorkerShutdown, clk.Advance(time.Minute), &tr))
	require.Equal(t, 1, ts.RetriesLeft)

	until := claimRun(1)
	clk.Advance(claimTimeout)
	require.True(t, ts.ExpireClaim(until, clk.Now(), &tr))
	require.Equal(t, 0, ts.RetriesLeft)

	claimRun(2)
	require.NoError(t, ts.ReportException(2, queue.ReasonIntermittentTask, clk.Advance(time.Minute), &tr))

	require.Equal(t, queue.StateException, ts.State())
	require.Equal(t, 0, ts.RetriesLeft)
	require.Len(t, ts.Runs, 3)
	require.Equal(t, []string{queue.ReasonScheduled, queue.ReasonRetry, queue.ReasonRetry},
		[]string{ts.Runs[0].ReasonCreated, ts.Runs[1].ReasonCreated, ts.Runs[2].ReasonCreated})
	require.Equal(t, []string{queue.ReasonWorkerShutdown, queue.ReasonClaimExpired, queue.ReasonIntermittentTask},
		[]string{ts.Runs[0].ReasonResolved, ts.Runs[1].ReasonResolved, ts.Runs[2].ReasonResolved})

	var kinds []string
	for _, e := range tr.Events {
		kinds = append(kinds, fmt.Sprintf("%s/%d", e.Kind, e.RunID))
	}
	require.Equal(t, []string{
		"task-pending/0", "task-running/0", "task-exception/0", "task-pending/1",
		"task-running/1", "task-exception/1", "task-pending/2",
		"task-running/2", "task-exception/2",
	}, kinds)
}

// TestMaxRuns checks that 49 retries fill exactly 50 runs and that a rerun of
// such a task is refused.
func TestMaxRuns(t *testing.T) {
	t.Parallel()
	clk := newClock()
	ts := newState(queue.MaxRetries)
	require.NoError(t, ts.Schedule(clk.Now(), &queue.Transition{}))
	for runID := range queue.MaxRuns {
		now := clk.Advance(time.Second)
		require.NoError(t, ts.Claim(runID, testGroup, testWorker, now, now.Add(claimTimeout), &queue.Transition{}))
		require.NoError(t, ts.ReportException(runID, queue.ReasonWorkerShutdown, clk.Advance(time.Second), &queue.Transition{}))
	}
	require.Len(t, ts.Runs, queue.MaxRuns)
	require.Equal(t, 0, ts.RetriesLeft)
	require.Equal(t, queue.StateException, ts.State())

	before := ts.Clone()
	var tr queue.Transition
	err := ts.Rerun(clk.Advance(time.Second), &tr)
	requireKind(t, err, queue.KindConflict)
	require.Contains(t, err.Error(), "Maximum number of runs reached (50)")
	requireUnchanged(t, before, ts)
	require.Empty(t, tr.Events)
}

// TestRetryNeverExceedsMaxRuns covers a budget that would overflow the run
// cap (only reachable by hand): the 50th run's exception is final and the
// budget is left untouched.
func TestRetryNeverExceedsMaxRuns(t *testing.T) {
	t.Parallel()
	ts := newState(5)
	ts.Runs = completedRuns(queue.MaxRuns - 1)
	ts.Runs = append(ts.Runs, claimed(pendingRun(queue.MaxRuns-1, queue.ReasonRerun, 0), time.Minute))
	ts.RetriesLeft = 3

	var tr queue.Transition
	require.NoError(t, ts.ReportException(queue.MaxRuns-1, queue.ReasonWorkerShutdown, at(time.Hour), &tr))
	require.Len(t, ts.Runs, queue.MaxRuns)
	require.Equal(t, 3, ts.RetriesLeft)
	require.Equal(t, queue.StateException, ts.State())
	require.Equal(t, []queue.Event{workerEv(queue.EventTaskException, queue.MaxRuns-1)}, tr.Events)
}

// completedRuns returns n completed runs scheduled and resolved at epoch.
func completedRuns(n int) []queue.Run {
	runs := make([]queue.Run, n)
	for i := range runs {
		runs[i] = resolvedRun(claimed(pendingRun(i, queue.ReasonRerun, 0), 0), queue.StateCompleted, queue.ReasonCompleted, 0)
	}
	return runs
}

// TestRerunRetriesReset checks retriesLeft := min(retries, 48 - lastRunId).
func TestRerunRetriesReset(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		retries     int
		runs        int // resolved runs before the rerun
		spent       int // retries already used
		wantRetries int
		wantErr     bool
	}{
		{name: "unscheduled, default retries", retries: 5, runs: 0, wantRetries: 5},
		{name: "unscheduled, maximum retries (lastRunId -1)", retries: queue.MaxRetries, runs: 0, wantRetries: 49},
		{name: "one run, maximum retries", retries: queue.MaxRetries, runs: 1, wantRetries: 48},
		{name: "budget fully restored", retries: 5, runs: 3, spent: 5, wantRetries: 5},
		{name: "zero retries stays zero", retries: 0, runs: 2, wantRetries: 0},
		{name: "cap not yet binding (lastRunId 43)", retries: 5, runs: 44, wantRetries: 5},
		{name: "cap binds (lastRunId 44)", retries: 5, runs: 45, wantRetries: 4},
		{name: "cap binds (lastRunId 47)", retries: 5, runs: 48, wantRetries: 1},
		{name: "new run is the 50th (lastRunId 48)", retries: 5, runs: 49, wantRetries: 0},
		{name: "fifty runs already", retries: 5, runs: 50, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := newState(tt.retries)
			ts.Runs = completedRuns(tt.runs)
			ts.RetriesLeft = tt.retries - tt.spent
			var tr queue.Transition
			err := ts.Rerun(at(time.Hour), &tr)
			if tt.wantErr {
				requireKind(t, err, queue.KindConflict)
				require.Len(t, ts.Runs, tt.runs)
				require.Empty(t, tr.Events)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantRetries, ts.RetriesLeft)
			require.Len(t, ts.Runs, tt.runs+1)
			require.Equal(t, pendingRun(tt.runs, queue.ReasonRerun, time.Hour), ts.Runs[tt.runs])
			require.Equal(t, []queue.Event{runEv(queue.EventTaskPending, tt.runs)}, tr.Events)
			require.LessOrEqual(t, len(ts.Runs)+ts.RetriesLeft, queue.MaxRuns, "retries can never exceed the run cap")
		})
	}
}

// TestIdempotentRepeats checks the calls that succeed without change when
// repeated (docs/contract/queue.md §5.5, §5.6).
func TestIdempotentRepeats(t *testing.T) {
	t.Parallel()
	const later = 3 * time.Hour
	tests := []struct {
		name  string
		setup []step
		act   func(ts *queue.TaskState, tr *queue.Transition) error
	}{
		{
			name:  "reportCompleted twice",
			setup: []step{scheduleAt(0), claimAt(0, time.Minute), completeAt(0, time.Hour)},
			act:   func(ts *queue.TaskState, tr *queue.Transition) error { return ts.ReportCompleted(0, at(later), tr) },
		},
		{
			name:  "reportFailed twice",
			setup: []step{scheduleAt(0), claimAt(0, time.Minute), failAt(0, time.Hour)},
			act:   func(ts *queue.TaskState, tr *queue.Transition) error { return ts.ReportFailed(0, at(later), tr) },
		},
		{
			name:  "reportException same reason without retry",
			setup: []step{scheduleAt(0), claimAt(0, time.Minute), exceptionAt(0, queue.ReasonInternalError, time.Hour)},
			act: func(ts *queue.TaskState, tr *queue.Transition) error {
				return ts.ReportException(0, queue.ReasonInternalError, at(later), tr)
			},
		},
		{
			name:  "reportException same reason after the retry run exists",
			setup: []step{scheduleAt(0), claimAt(0, time.Minute), exceptionAt(0, queue.ReasonWorkerShutdown, time.Hour)},
			act: func(ts *queue.TaskState, tr *queue.Transition) error {
				return ts.ReportException(0, queue.ReasonWorkerShutdown, at(later), tr)
			},
		},
		{
			name:  "reportException repeated after the retry run was claimed",
			setup: []step{scheduleAt(0), claimAt(0, time.Minute), exceptionAt(0, queue.ReasonIntermittentTask, time.Hour), claimAt(1, 2*time.Hour)},
			act: func(ts *queue.TaskState, tr *queue.Transition) error {
				return ts.ReportException(0, queue.ReasonIntermittentTask, at(later), tr)
			},
		},
		{
			name:  "reportException repeated with the seed spelling of resource-unavailable",
			setup: []step{scheduleAt(0), claimAt(0, time.Minute), exceptionAt(0, queue.ReasonResourceUnavailable, time.Hour)},
			act: func(ts *queue.TaskState, tr *queue.Transition) error {
				return ts.ReportException(0, "resources-unavailable", at(later), tr)
			},
		},
		{
			name:  "cancelTask on a completed task",
			setup: []step{scheduleAt(0), claimAt(0, time.Minute), completeAt(0, time.Hour)},
			act:   func(ts *queue.TaskState, tr *queue.Transition) error { return ts.Cancel(at(later), tr) },
		},
		{
			name:  "cancelTask twice",
			setup: []step{scheduleAt(0), cancelAt(time.Hour)},
			act:   func(ts *queue.TaskState, tr *queue.Transition) error { return ts.Cancel(at(later), tr) },
		},
		{
			name:  "scheduleTask on a pending task",
			setup: []step{scheduleAt(0)},
			act:   func(ts *queue.TaskState, tr *queue.Transition) error { return ts.Schedule(at(later), tr) },
		},
		{
			name:  "scheduleTask on a resolved task",
			setup: []step{scheduleAt(0), claimAt(0, time.Minute), failAt(0, time.Hour)},
			act:   func(ts *queue.TaskState, tr *queue.Transition) error { return ts.Schedule(at(later), tr) },
		},
		{
			name:  "rerunTask on a pending task",
			setup: []step{scheduleAt(0)},
			act:   func(ts *queue.TaskState, tr *queue.Transition) error { return ts.Rerun(at(later), tr) },
		},
		{
			name:  "rerunTask on a running task",
			setup: []step{scheduleAt(0), claimAt(0, time.Minute)},
			act:   func(ts *queue.TaskState, tr *queue.Transition) error { return ts.Rerun(at(later), tr) },
		},
		{
			name:  "reclaimTask never moves takenUntil backwards",
			setup: []step{scheduleAt(0), claimAt(0, time.Hour)},
			act: func(ts *queue.TaskState, _ *queue.Transition) error {
				return ts.Reclaim(0, at(time.Hour), at(time.Hour+time.Minute))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := build(t, 5, tt.setup...)
			before := ts.Clone()
			var tr queue.Transition
			require.NoError(t, tt.act(ts, &tr))
			requireUnchanged(t, before, ts)
			require.Empty(t, tr.Events)
			require.False(t, queue.BecameResolved(before, ts))
		})
	}
}

// TestClaimRepeatedByItsWorker checks that the worker holding a run may
// repeat claimTask (its first answer lost): nothing changes, no event, and
// takenUntil stays; every other worker is refused.
func TestClaimRepeatedByItsWorker(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		group, id   string
		wantErrKind queue.ErrorKind
	}{
		{"same worker", testGroup, testWorker, 0},
		{"other worker id", testGroup, "another-worker", queue.KindConflict},
		{"other worker group", "another-group", testWorker, queue.KindConflict},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := build(t, 5, scheduleAt(0), claimAt(0, time.Minute))
			before := ts.Clone()
			var tr queue.Transition
			err := ts.Claim(0, tc.group, tc.id, at(time.Hour), at(time.Hour+claimTimeout), &tr)
			if tc.wantErrKind == 0 {
				require.NoError(t, err)
			} else {
				requireKind(t, err, tc.wantErrKind)
			}
			require.Empty(t, tr.Events)
			requireUnchanged(t, before, ts)
		})
	}
}

// TestConflicts checks refused calls: the error kind, and that nothing
// changed.
func TestConflicts(t *testing.T) {
	t.Parallel()
	const now = time.Hour
	past := taskLife + time.Second
	running := []step{scheduleAt(0), claimAt(0, time.Minute)}
	rerunAfterComplete := []step{scheduleAt(0), claimAt(0, time.Minute), completeAt(0, 10*time.Minute), rerunAt(20 * time.Minute)}
	claimWith := func(runID int, worker string, d time.Duration) func(ts *queue.TaskState, tr *queue.Transition) error {
		return func(ts *queue.TaskState, tr *queue.Transition) error {
			return ts.Claim(runID, testGroup, worker, at(d), at(d+claimTimeout), tr)
		}
	}
	reclaim := func(runID int, d time.Duration) func(ts *queue.TaskState, tr *queue.Transition) error {
		return func(ts *queue.TaskState, _ *queue.Transition) error {
			return ts.Reclaim(runID, at(d), at(d+claimTimeout))
		}
	}

	tests := []struct {
		name     string
		setup    []step
		act      func(ts *queue.TaskState, tr *queue.Transition) error
		wantKind queue.ErrorKind
	}{
		// A pending run is never reported by a worker.
		{"reportCompleted on a pending run", []step{scheduleAt(0)},
			func(ts *queue.TaskState, tr *queue.Transition) error { return ts.ReportCompleted(0, at(now), tr) }, queue.KindConflict},
		{"reportFailed on a pending run", []step{scheduleAt(0)},
			func(ts *queue.TaskState, tr *queue.Transition) error { return ts.ReportFailed(0, at(now), tr) }, queue.KindConflict},
		{"reportException on a pending run", []step{scheduleAt(0)},
			func(ts *queue.TaskState, tr *queue.Transition) error {
				return ts.ReportException(0, queue.ReasonWorkerShutdown, at(now), tr)
			}, queue.KindConflict},

		// Reports on a run other than the last.
		{"reportCompleted repeated on a run that is no longer last", rerunAfterComplete,
			func(ts *queue.TaskState, tr *queue.Transition) error { return ts.ReportCompleted(0, at(now), tr) }, queue.KindConflict},
		{"reportFailed on a non-last run", rerunAfterComplete,
			func(ts *queue.TaskState, tr *queue.Transition) error { return ts.ReportFailed(0, at(now), tr) }, queue.KindConflict},
		{"reportException on a non-last run", rerunAfterComplete,
			func(ts *queue.TaskState, tr *queue.Transition) error {
				return ts.ReportException(0, queue.ReasonInternalError, at(now), tr)
			}, queue.KindConflict},

		// A resolution is never overwritten.
		{"reportFailed on a completed run", []step{scheduleAt(0), claimAt(0, time.Minute), completeAt(0, 10*time.Minute)},
			func(ts *queue.TaskState, tr *queue.Transition) error { return ts.ReportFailed(0, at(now), tr) }, queue.KindConflict},
		{"reportCompleted on a failed run", []step{scheduleAt(0), claimAt(0, time.Minute), failAt(0, 10*time.Minute)},
			func(ts *queue.TaskState, tr *queue.Transition) error { return ts.ReportCompleted(0, at(now), tr) }, queue.KindConflict},
		{"reportCompleted on a canceled run", []step{scheduleAt(0), claimAt(0, time.Minute), cancelAt(10 * time.Minute)},
			func(ts *queue.TaskState, tr *queue.Transition) error { return ts.ReportCompleted(0, at(now), tr) }, queue.KindConflict},
		{"reportException with a different reason", []step{scheduleAt(0), claimAt(0, time.Minute), exceptionAt(0, queue.ReasonMalformedPayload, 10*time.Minute)},
			func(ts *queue.TaskState, tr *queue.Transition) error {
				return ts.ReportException(0, queue.ReasonInternalError, at(now), tr)
			}, queue.KindConflict},
		{"reportException with a different reason after a retry", []step{scheduleAt(0), claimAt(0, time.Minute), exceptionAt(0, queue.ReasonWorkerShutdown, 10*time.Minute)},
			func(ts *queue.TaskState, tr *queue.Transition) error {
				return ts.ReportException(0, queue.ReasonIntermittentTask, at(now), tr)
			}, queue.KindConflict},
		{"reportException on a canceled run", []step{scheduleAt(0), claimAt(0, time.Minute), cancelAt(10 * time.Minute)},
			func(ts *queue.TaskState, tr *queue.Transition) error {
				return ts.ReportException(0, queue.ReasonWorkerShutdown, at(now), tr)
			}, queue.KindConflict},
		{"reportException same reason with two runs after it", []step{
			scheduleAt(0), claimAt(0, time.Minute), exceptionAt(0, queue.ReasonWorkerShutdown, 10*time.Minute),
			claimAt(1, 11*time.Minute), exceptionAt(1, queue.ReasonWorkerShutdown, 20*time.Minute),
		},
			func(ts *queue.TaskState, tr *queue.Transition) error {
				return ts.ReportException(0, queue.ReasonWorkerShutdown, at(now), tr)
			}, queue.KindConflict},

		// Unknown runs.
		{"reportCompleted on an unknown run", running,
			func(ts *queue.TaskState, tr *queue.Transition) error { return ts.ReportCompleted(1, at(now), tr) }, queue.KindNotFound},
		{"reportFailed on an unknown run of an unscheduled task", nil,
			func(ts *queue.TaskState, tr *queue.Transition) error { return ts.ReportFailed(0, at(now), tr) }, queue.KindNotFound},
		{"reportException on a negative run", running,
			func(ts *queue.TaskState, tr *queue.Transition) error {
				return ts.ReportException(-1, queue.ReasonWorkerShutdown, at(now), tr)
			}, queue.KindNotFound},
		{"claimTask on an unknown run", []step{scheduleAt(0)}, claimWith(1, testWorker, now), queue.KindNotFound},
		{"reclaimTask on an unknown run", running, reclaim(1, now), queue.KindNotFound},
		{"reclaimTask on an unknown run past the deadline (404 before 409)", running, reclaim(1, past), queue.KindNotFound},

		// Claims.
		{"claimTask of a run held by another worker", running, claimWith(0, "other-worker", now), queue.KindConflict},
		{"claimTask of a run held by the same worker id in another group", running,
			func(ts *queue.TaskState, tr *queue.Transition) error {
				return ts.Claim(0, "other-group", testWorker, at(now), at(now+claimTimeout), tr)
			}, queue.KindConflict},
		{"claimTask of a resolved run", []step{scheduleAt(0), claimAt(0, time.Minute), completeAt(0, 10*time.Minute)},
			claimWith(0, testWorker, now), queue.KindConflict},
		{"claimTask of a non-last run", rerunAfterComplete, claimWith(0, testWorker, now), queue.KindConflict},
		{"claimTask of an unscheduled task", nil, claimWith(0, testWorker, now), queue.KindNotFound},

		// Reclaims.
		{"reclaimTask of a pending run", []step{scheduleAt(0)}, reclaim(0, now), queue.KindConflict},
		{"reclaimTask of a completed run", []step{scheduleAt(0), claimAt(0, time.Minute), completeAt(0, 10*time.Minute)},
			reclaim(0, now), queue.KindConflict},
		{"reclaimTask of a canceled run", []step{scheduleAt(0), claimAt(0, time.Minute), cancelAt(10 * time.Minute)},
			reclaim(0, now), queue.KindConflict},
		{"reclaimTask of a non-last run", rerunAfterComplete, reclaim(0, now), queue.KindConflict},
		{"reclaimTask of a run whose claim expired and was retried", []step{scheduleAt(0), claimAt(0, time.Minute),
			func(t *testing.T, ts *queue.TaskState) {
				require.True(t, ts.ExpireClaim(at(time.Minute+claimTimeout), at(time.Minute+claimTimeout), &queue.Transition{}))
			}}, reclaim(0, now), queue.KindConflict},

		// Past the deadline (deadline <= now) the lifecycle calls answer 409.
		{"scheduleTask past deadline", nil,
			func(ts *queue.TaskState, tr *queue.Transition) error { return ts.Schedule(at(past), tr) }, queue.KindConflict},
		{"scheduleTask exactly at the deadline", nil,
			func(ts *queue.TaskState, tr *queue.Transition) error { return ts.Schedule(at(taskLife), tr) }, queue.KindConflict},
		{"scheduleTask past deadline on a resolved task", []step{scheduleAt(0), claimAt(0, time.Minute), completeAt(0, 10*time.Minute)},
			func(ts *queue.TaskState, tr *queue.Transition) error { return ts.Schedule(at(past), tr) }, queue.KindConflict},
		{"rerunTask past deadline", []step{scheduleAt(0), claimAt(0, time.Minute), failAt(0, 10*time.Minute)},
			func(ts *queue.TaskState, tr *queue.Transition) error { return ts.Rerun(at(past), tr) }, queue.KindConflict},
		{"rerunTask past deadline on an unscheduled task", nil,
			func(ts *queue.TaskState, tr *queue.Transition) error { return ts.Rerun(at(past), tr) }, queue.KindConflict},
		{"cancelTask past deadline on a running task", running,
			func(ts *queue.TaskState, tr *queue.Transition) error { return ts.Cancel(at(past), tr) }, queue.KindConflict},
		{"cancelTask past deadline on a resolved task", []step{scheduleAt(0), claimAt(0, time.Minute), completeAt(0, 10*time.Minute)},
			func(ts *queue.TaskState, tr *queue.Transition) error { return ts.Cancel(at(past), tr) }, queue.KindConflict},
		{"claimTask past deadline", []step{scheduleAt(0)}, claimWith(0, testWorker, past), queue.KindConflict},
		{"claimTask exactly at the deadline", []step{scheduleAt(0)}, claimWith(0, testWorker, taskLife), queue.KindConflict},
		{"claimTask past deadline of an unknown run (409 before 404)", []step{scheduleAt(0)}, claimWith(3, testWorker, past), queue.KindConflict},
		{"reclaimTask past deadline", running, reclaim(0, past), queue.KindConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := build(t, 5, tt.setup...)
			before := ts.Clone()
			var tr queue.Transition
			err := tt.act(ts, &tr)
			requireKind(t, err, tt.wantKind)
			require.NotEmpty(t, err.Error())
			requireUnchanged(t, before, ts)
			require.Empty(t, tr.Events)
		})
	}
}

// TestReportsIgnoreDeadline checks that worker reports keep working on a
// still-running run after the deadline (docs/contract/queue.md §4.3), until the
// deadline sweep resolves the task.
func TestReportsIgnoreDeadline(t *testing.T) {
	t.Parallel()
	past := taskLife + 30*time.Second
	tests := []struct {
		name      string
		report    func(ts *queue.TaskState, tr *queue.Transition) error
		wantState string
	}{
		{"reportCompleted", func(ts *queue.TaskState, tr *queue.Transition) error { return ts.ReportCompleted(0, at(past), tr) }, queue.StateCompleted},
		{"reportFailed", func(ts *queue.TaskState, tr *queue.Transition) error { return ts.ReportFailed(0, at(past), tr) }, queue.StateFailed},
		{"reportException without retry", func(ts *queue.TaskState, tr *queue.Transition) error {
			return ts.ReportException(0, queue.ReasonMalformedPayload, at(past), tr)
		}, queue.StateException},
		{"reportException with retry", func(ts *queue.TaskState, tr *queue.Transition) error {
			return ts.ReportException(0, queue.ReasonWorkerShutdown, at(past), tr)
		}, queue.StatePending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := build(t, 5, scheduleAt(0), claimAt(0, time.Minute))
			var tr queue.Transition
			require.NoError(t, tt.report(ts, &tr))
			require.Equal(t, tt.wantState, ts.State())
			require.Equal(t, qtp(past), ts.Runs[0].Resolved)

			// The deadline sweep then finishes whatever is left unresolved,
			// without retrying.
			var sweep queue.Transition
			changed := ts.ExpireDeadline(at(past+time.Minute), &sweep)
			require.Equal(t, tt.wantState == queue.StatePending, changed)
			require.True(t, ts.IsResolved())
			if changed {
				require.Equal(t, resolvedRun(pendingRun(1, queue.ReasonRetry, past), queue.StateException,
					queue.ReasonDeadlineExceeded, past+time.Minute), ts.Runs[1])
				require.Equal(t, []queue.Event{runEv(queue.EventTaskException, 1)}, sweep.Events)
			}
		})
	}
}

// TestExpireClaim covers docs/contract/queue.md §6.1: only the exact, due claim of a
// running last run before the deadline expires.
func TestExpireClaim(t *testing.T) {
	t.Parallel()
	claimedAt := time.Minute
	takenUntil := claimedAt + claimTimeout
	tests := []struct {
		name       string
		setup      []step
		takenUntil time.Time
		now        time.Duration
		want       bool
	}{
		{"exactly at takenUntil", []step{scheduleAt(0), claimAt(0, claimedAt)}, at(takenUntil), takenUntil, true},
		{"after takenUntil", []step{scheduleAt(0), claimAt(0, claimedAt)}, at(takenUntil), takenUntil + time.Hour, true},
		{"takenUntil given with sub-millisecond noise", []step{scheduleAt(0), claimAt(0, claimedAt)},
			at(takenUntil + 300*time.Microsecond), takenUntil, true},
		{"one millisecond before takenUntil", []step{scheduleAt(0), claimAt(0, claimedAt)}, at(takenUntil), takenUntil - time.Millisecond, false},
		{"stale check after a reclaim", []step{scheduleAt(0), claimAt(0, claimedAt), func(t *testing.T, ts *queue.TaskState) {
			require.NoError(t, ts.Reclaim(0, at(10*time.Minute), at(10*time.Minute+claimTimeout)))
		}}, at(takenUntil), takenUntil + time.Hour, false},
		{"takenUntil one millisecond off", []step{scheduleAt(0), claimAt(0, claimedAt)}, at(takenUntil + time.Millisecond), takenUntil + time.Hour, false},
		{"past the deadline: left to the deadline sweep", []step{scheduleAt(0), claimAt(0, taskLife-time.Minute)},
			at(taskLife - time.Minute + claimTimeout), taskLife - time.Minute + claimTimeout, false},
		{"exactly at the deadline", []step{scheduleAt(0), claimAt(0, taskLife-claimTimeout)}, at(taskLife), taskLife, false},
		{"run already completed", []step{scheduleAt(0), claimAt(0, claimedAt), completeAt(0, 5*time.Minute)}, at(takenUntil), takenUntil, false},
		{"run still pending", []step{scheduleAt(0)}, at(takenUntil), takenUntil, false},
		{"task unscheduled", nil, at(takenUntil), takenUntil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := build(t, 5, tt.setup...)
			before := ts.Clone()
			var tr queue.Transition
			got := ts.ExpireClaim(tt.takenUntil, at(tt.now), &tr)
			require.Equal(t, tt.want, got)
			if !tt.want {
				requireUnchanged(t, before, ts)
				require.Empty(t, tr.Events)
				return
			}
			require.Equal(t, queue.ReasonClaimExpired, ts.Runs[0].ReasonResolved)
			require.Equal(t, qtp(tt.now), ts.Runs[0].Resolved)
			require.Equal(t, qtp(takenUntil), ts.Runs[0].TakenUntil, "takenUntil is the last claim deadline")
			require.Equal(t, []queue.Event{workerEv(queue.EventTaskException, 0), runEv(queue.EventTaskPending, 1)}, tr.Events)
		})
	}
}

// TestExpireDeadline covers docs/contract/queue.md §6.2 for every state.
func TestExpireDeadline(t *testing.T) {
	t.Parallel()
	past := taskLife + time.Minute
	tests := []struct {
		name  string
		setup []step
		now   time.Duration
		want  bool
	}{
		{"unscheduled past deadline", nil, past, true},
		{"unscheduled exactly at deadline", nil, taskLife, true},
		{"unscheduled before deadline", nil, taskLife - time.Millisecond, false},
		{"pending past deadline", []step{scheduleAt(0)}, past, true},
		{"pending before deadline", []step{scheduleAt(0)}, taskLife - time.Second, false},
		{"running past deadline", []step{scheduleAt(0), claimAt(0, time.Minute)}, past, true},
		{"running before deadline", []step{scheduleAt(0), claimAt(0, time.Minute)}, time.Hour, false},
		{"completed", []step{scheduleAt(0), claimAt(0, time.Minute), completeAt(0, time.Hour)}, past, false},
		{"failed", []step{scheduleAt(0), claimAt(0, time.Minute), failAt(0, time.Hour)}, past, false},
		{"exception", []step{scheduleAt(0), claimAt(0, time.Minute), exceptionAt(0, queue.ReasonInternalError, time.Hour)}, past, false},
		{"canceled while unscheduled", []step{cancelAt(time.Hour)}, past, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := build(t, 5, tt.setup...)
			before := ts.Clone()
			var tr queue.Transition
			require.Equal(t, tt.want, ts.ExpireDeadline(at(tt.now), &tr))
			if !tt.want {
				requireUnchanged(t, before, ts)
				require.Empty(t, tr.Events)
				return
			}
			require.Len(t, ts.Runs, max(1, len(before.Runs)), "a run is added only to an unscheduled task")
			last := ts.LastRun()
			require.Equal(t, queue.StateException, last.State)
			require.Equal(t, queue.ReasonDeadlineExceeded, last.ReasonResolved)
			require.Equal(t, qtp(tt.now), last.Resolved)
			require.Equal(t, 5, ts.RetriesLeft)
			require.Equal(t, []queue.Event{runEv(queue.EventTaskException, 0)}, tr.Events)
			require.True(t, queue.BecameResolved(before, ts))
			if len(before.Runs) == 0 {
				require.Equal(t, queue.ReasonException, last.ReasonCreated)
				require.Equal(t, qt(tt.now), last.Scheduled)
			}
		})
	}
}

// TestDependenciesSatisfied checks the automatic scheduling of a dependent.
func TestDependenciesSatisfied(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup []step
		now   time.Duration
		want  bool
	}{
		{"unscheduled before deadline", nil, time.Hour, true},
		{"unscheduled at deadline", nil, taskLife, false},
		{"unscheduled past deadline", nil, taskLife + time.Hour, false},
		{"already scheduled by scheduleTask", []step{scheduleAt(0)}, time.Hour, false},
		{"canceled", []step{cancelAt(time.Minute)}, time.Hour, false},
		{"rerun while unscheduled", []step{rerunAt(time.Minute)}, time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := build(t, 5, tt.setup...)
			before := ts.Clone()
			var tr queue.Transition
			require.Equal(t, tt.want, ts.DependenciesSatisfied(at(tt.now), &tr))
			if !tt.want {
				requireUnchanged(t, before, ts)
				require.Empty(t, tr.Events)
				return
			}
			require.Equal(t, []queue.Run{pendingRun(0, queue.ReasonScheduled, tt.now)}, ts.Runs)
			require.Equal(t, []queue.Event{runEv(queue.EventTaskPending, 0)}, tr.Events)
		})
	}
}

// TestDependencySatisfied is the §6.3 table of which dependency states
// satisfy which requires rule.
func TestDependencySatisfied(t *testing.T) {
	t.Parallel()
	states := []string{queue.StateUnscheduled, queue.StatePending, queue.StateRunning,
		queue.StateCompleted, queue.StateFailed, queue.StateException}
	want := map[string]map[string]bool{
		queue.RequiresAllCompleted: {queue.StateCompleted: true},
		queue.RequiresAllResolved:  {queue.StateCompleted: true, queue.StateFailed: true, queue.StateException: true},
	}
	for requires, satisfied := range want {
		for _, state := range states {
			t.Run(requires+"/"+state, func(t *testing.T) {
				t.Parallel()
				require.Equal(t, satisfied[state], queue.DependencySatisfied(requires, state))
			})
		}
	}
}

// TestBecameResolved checks when a change resolves a task anew.
func TestBecameResolved(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		before []step
		change step
		want   bool
	}{
		{"running → completed", []step{scheduleAt(0), claimAt(0, time.Minute)}, completeAt(0, time.Hour), true},
		{"running → failed", []step{scheduleAt(0), claimAt(0, time.Minute)}, failAt(0, time.Hour), true},
		{"running → exception without retry", []step{scheduleAt(0), claimAt(0, time.Minute)}, exceptionAt(0, queue.ReasonSuperseded, time.Hour), true},
		{"running → exception with retry", []step{scheduleAt(0), claimAt(0, time.Minute)}, exceptionAt(0, queue.ReasonWorkerShutdown, time.Hour), false},
		{"unscheduled → canceled", nil, cancelAt(time.Hour), true},
		{"pending → canceled", []step{scheduleAt(0)}, cancelAt(time.Hour), true},
		{"unscheduled → pending", nil, scheduleAt(time.Hour), false},
		{"pending → running", []step{scheduleAt(0)}, claimAt(0, time.Hour), false},
		{"completed → completed again", []step{scheduleAt(0), claimAt(0, time.Minute), completeAt(0, time.Hour)}, completeAt(0, 2*time.Hour), false},
		{"completed → rerun", []step{scheduleAt(0), claimAt(0, time.Minute), completeAt(0, time.Hour)}, rerunAt(2 * time.Hour), false},
		{"rerun run → failed", []step{scheduleAt(0), claimAt(0, time.Minute), completeAt(0, time.Hour), rerunAt(2 * time.Hour), claimAt(1, 3*time.Hour)},
			failAt(1, 4*time.Hour), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := build(t, 5, tt.before...)
			before := ts.Clone()
			tt.change(t, ts)
			require.Equal(t, tt.want, queue.BecameResolved(before, ts))
		})
	}

	t.Run("resolved before and after with more runs", func(t *testing.T) {
		t.Parallel()
		before := build(t, 5, cancelAt(time.Minute))
		after := before.Clone()
		after.Runs = append(after.Runs, resolvedRun(pendingRun(1, queue.ReasonRerun, time.Hour),
			queue.StateException, queue.ReasonCanceled, time.Hour))
		require.True(t, queue.BecameResolved(before, after))
	})
}

// TestArtifactUploadAllowed checks the upload window of docs/contract/queue.md §5.7:
// running, or up to 25 minutes after an exception; never after completed or
// failed.
func TestArtifactUploadAllowed(t *testing.T) {
	t.Parallel()
	resolvedAt := 2 * time.Hour
	running := claimed(pendingRun(0, queue.ReasonScheduled, 0), time.Minute)
	exception := resolvedRun(running, queue.StateException, queue.ReasonWorkerShutdown, resolvedAt)
	tests := []struct {
		name string
		run  queue.Run
		now  time.Duration
		want bool
	}{
		{"pending", pendingRun(0, queue.ReasonScheduled, 0), time.Hour, false},
		{"running", running, time.Hour, true},
		{"running long past takenUntil", running, 20 * time.Hour, true},
		{"exception, at resolution", exception, resolvedAt, true},
		{"exception, 24m59.999s later", exception, resolvedAt + 25*time.Minute - time.Millisecond, true},
		{"exception, exactly 25m later", exception, resolvedAt + 25*time.Minute, false},
		{"exception, an hour later", exception, resolvedAt + time.Hour, false},
		{"exception without a resolved time", func() queue.Run { r := exception; r.Resolved = nil; return r }(), resolvedAt, false},
		{"completed, at resolution", resolvedRun(running, queue.StateCompleted, queue.ReasonCompleted, resolvedAt), resolvedAt, false},
		{"failed, at resolution", resolvedRun(running, queue.StateFailed, queue.ReasonFailed, resolvedAt), resolvedAt, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, queue.ArtifactUploadAllowed(&tt.run, at(tt.now)))
		})
	}
}
