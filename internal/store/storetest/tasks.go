package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

func testCreateTask(t *testing.T, open Opener) {
	e := setup(t, open)
	now := Epoch
	res := e.create("t1", now, withGroup("g1"))

	require.Equal(t, "t1", res.Task.TaskID)
	require.Equal(t, queue.StatePending, res.Task.State())
	require.Equal(t, 5, res.Task.RetriesLeft)
	require.Equal(t, []queue.Run{{RunID: 0, State: queue.StatePending, ReasonCreated: queue.ReasonScheduled, Scheduled: queue.NewTime(now)}}, res.Task.Runs)
	requireEvents(t, res.Changes, ev("t1", queue.EventTaskDefined, -1), ev("t1", queue.EventTaskPending, 0))
	require.Equal(t, "g1", res.Changes[0].Events[0].Status.TaskGroupID)
	require.Nil(t, res.Changes[0].GroupResolved)

	// What was stored is what was returned, definition included.
	stored := e.get("t1")
	require.Equal(t, res.Task, stored)
	require.True(t, queue.SameDefinition(NewTask(testQueue, now, withGroup("g1")), &stored.Task))

	// The group is created with the task's schedulerId and expires an hour
	// after the task; a later-expiring member pushes it forward, an earlier
	// one does not pull it back.
	g, err := e.s.GetTaskGroup(e.ctx, "g1")
	require.NoError(t, err)
	require.Equal(t, store.TaskGroup{TaskGroupID: "g1", SchedulerID: "-", Expires: now.Add(49 * time.Hour)}, *g)
	e.create("t2", now, withGroup("g1"), withExpires(now.Add(72*time.Hour)))
	e.create("t3", now, withGroup("g1"), withExpires(now.Add(24*time.Hour)))
	g, err = e.s.GetTaskGroup(e.ctx, "g1")
	require.NoError(t, err)
	require.Equal(t, now.Add(73*time.Hour), g.Expires)

	_, err = e.s.GetTask(e.ctx, "unknown")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = e.s.GetTaskGroup(e.ctx, "unknown")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testCreateTaskIdempotency(t *testing.T, open Opener) {
	e := setup(t, open)
	now := Epoch
	def := NewTask(testQueue, now, withGroup("t1"), func(d *queue.Task) {
		d.Payload = json.RawMessage(`{"image": "alpine", "command": ["true"], "n": 1}`)
		d.Routes = []string{"index.a", "index.b"}
		d.Tags = map[string]string{"k": "v"}
	})
	first, err := e.s.CreateTask(e.ctx, store.CreateTaskParams{TaskID: "t1", Task: def, Now: now})
	require.NoError(t, err)
	e.claim("t1", now.Add(time.Second))
	running := e.get("t1")

	// The same definition, with JSON spelled differently and sub-millisecond
	// noise in a date, replies the current status and changes nothing.
	same := *def
	same.Payload = json.RawMessage(`{"n":1,"command":["true"],"image":"alpine"}`)
	same.Created = queue.Time{Time: def.Created.Add(400 * time.Microsecond)}
	again, err := e.s.CreateTask(e.ctx, store.CreateTaskParams{TaskID: "t1", Task: &same, Now: now.Add(2 * time.Second)})
	require.NoError(t, err)
	require.Empty(t, again.Changes)
	require.Equal(t, running, again.Task)
	require.Equal(t, queue.StateRunning, again.Task.State())
	require.NotEqual(t, first.Task.State(), again.Task.State())

	differ := []struct {
		name   string
		mutate func(*queue.Task)
	}{
		{"priority", withPriority("high")},
		{"payload", func(d *queue.Task) { d.Payload = json.RawMessage(`{"image":"debian","command":["true"],"n":1}`) }},
		{"routes order", func(d *queue.Task) { d.Routes = []string{"index.b", "index.a"} }},
		{"deadline", withDeadline(now.Add(2 * time.Hour))},
		{"tags", func(d *queue.Task) { d.Tags = map[string]string{"k": "w"} }},
		{"retries", withRetries(1)},
		{"group", withGroup("other")},
		{"queue", withQueue("prov/other")},
	}
	for _, tc := range differ {
		t.Run(tc.name, func(t *testing.T) {
			d := *def
			tc.mutate(&d)
			_, err := e.s.CreateTask(e.ctx, store.CreateTaskParams{TaskID: "t1", Task: &d, Now: now})
			requireQueueError(t, err, queue.KindConflict)
			require.Equal(t, running, e.get("t1"))
		})
	}
	_, err = e.s.GetTaskGroup(e.ctx, "other")
	require.ErrorIs(t, err, store.ErrNotFound, "a refused create must not create its group")
}

func testGetTasks(t *testing.T, open Opener) {
	e := setup(t, open)
	e.create("t1", Epoch)
	e.create("t2", Epoch)
	got, err := e.s.GetTasks(e.ctx, []string{"t2", "nope", "t1", "t2"})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"t1", "t2"}, uniq(ids(got)))
	got, err = e.s.GetTasks(e.ctx, nil)
	require.NoError(t, err)
	require.Empty(t, got)
}

func uniq(s []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

func testScheduleTask(t *testing.T, open Opener) {
	e := setup(t, open)
	now := Epoch.Add(time.Minute)

	e.bring("u", queue.StateUnscheduled)
	res := e.mustApply("u", now, schedule(now))
	require.Equal(t, []queue.Run{{RunID: 0, State: queue.StatePending, ReasonCreated: queue.ReasonScheduled, Scheduled: queue.NewTime(now)}}, res.Task.Runs)
	requireEvents(t, res.Changes, ev("u", queue.EventTaskPending, 0))
	pending, _ := e.counts(now)
	require.Equal(t, 1, pending)

	// A task with runs is left alone.
	for _, state := range []string{queue.StatePending, queue.StateRunning, queue.StateCompleted} {
		before := e.bring("s-"+state, state)
		res = e.mustApply("s-"+state, now, schedule(now))
		requireEvents(t, res.Changes)
		require.Empty(t, res.Changes)
		require.Equal(t, before, e.get("s-"+state))
	}

	// Past the deadline even a no-op is refused.
	e.bring("late", queue.StateUnscheduled, withDeadline(Epoch.Add(10*time.Minute)))
	_, err := e.apply("late", Epoch.Add(10*time.Minute), schedule(Epoch.Add(10*time.Minute)))
	requireQueueError(t, err, queue.KindConflict)
	require.Equal(t, queue.StateUnscheduled, e.get("late").State())

	_, err = e.apply("unknown", now, schedule(now))
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testRerunTask(t *testing.T, open Opener) {
	now := Epoch.Add(time.Minute)
	tests := []struct {
		state       string
		retries     int
		wantRuns    int // runs after the rerun
		wantRetries int
		changed     bool
	}{
		{queue.StateUnscheduled, 5, 1, 5, true},
		{queue.StatePending, 5, 1, 5, false},
		{queue.StateRunning, 5, 1, 5, false},
		{queue.StateCompleted, 5, 2, 5, true},
		{queue.StateFailed, 3, 2, 3, true},
		{queue.StateException, 0, 2, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.state, func(t *testing.T) {
			t.Parallel()
			e := setup(t, open)
			before := e.bring("t", tc.state, withRetries(tc.retries))
			res := e.mustApply("t", now, rerun(now))
			got := e.get("t")
			require.Equal(t, res.Task, got)
			require.Len(t, got.Runs, tc.wantRuns)
			require.Equal(t, tc.wantRetries, got.RetriesLeft)
			if !tc.changed {
				require.Equal(t, before, got)
				requireEvents(t, res.Changes)
				return
			}
			last := got.LastRun()
			require.Equal(t, queue.Run{RunID: tc.wantRuns - 1, State: queue.StatePending, ReasonCreated: queue.ReasonRerun, Scheduled: queue.NewTime(now)}, *last)
			requireEvents(t, res.Changes, ev("t", queue.EventTaskPending, tc.wantRuns-1))
			claims := e.claimWork(testQueue, 1, now)
			require.Len(t, claims.Claims, 1)
			require.Equal(t, tc.wantRuns-1, claims.Claims[0].RunID)
		})
	}

	t.Run("past deadline", func(t *testing.T) {
		t.Parallel()
		e := setup(t, open)
		e.bring("t", queue.StateCompleted, withDeadline(Epoch.Add(10*time.Minute)))
		_, err := e.apply("t", Epoch.Add(10*time.Minute), rerun(Epoch.Add(10*time.Minute)))
		requireQueueError(t, err, queue.KindConflict)
		require.Len(t, e.get("t").Runs, 1)
	})
}

// testRerunRunCap drives a task to 50 runs by cancelling and rerunning it:
// the retry budget shrinks so retries can never pass the cap, and a 51st run
// is refused.
func testRerunRunCap(t *testing.T, open Opener) {
	e := setup(t, open)
	now := Epoch.Add(time.Minute)
	e.create("t", Epoch, withRetries(5))
	for runID := 0; runID < queue.MaxRuns; runID++ {
		if runID > 0 {
			res := e.mustApply("t", now, rerun(now))
			requireEvents(t, res.Changes, ev("t", queue.EventTaskPending, runID))
			// rerun resets retriesLeft to min(retries, 48 - lastRunId).
			require.Equal(t, min(5, 48-(runID-1)), res.Task.RetriesLeft, "after rerun creating run %d", runID)
		}
		e.mustApply("t", now, cancel(now))
	}
	got := e.get("t")
	require.Len(t, got.Runs, queue.MaxRuns)
	require.Equal(t, 0, got.RetriesLeft)
	_, err := e.apply("t", now, rerun(now))
	qe := requireQueueError(t, err, queue.KindConflict)
	require.Contains(t, qe.Message, "Maximum number of runs")
	require.Equal(t, got, e.get("t"))
	for i, r := range got.Runs {
		require.Equal(t, i, r.RunID)
		require.Equal(t, queue.ReasonCanceled, r.ReasonResolved)
	}
}

func testCancelTask(t *testing.T, open Opener) {
	now := Epoch.Add(time.Minute)
	tests := []struct {
		state string
		// want is run 0 after the cancel; nil means no change.
		want      *queue.Run
		wantEvent *queue.Event
	}{
		{
			state:     queue.StateUnscheduled,
			want:      &queue.Run{RunID: 0, State: queue.StateException, ReasonCreated: queue.ReasonException, ReasonResolved: queue.ReasonCanceled, Scheduled: queue.NewTime(now), Resolved: qt(now)},
			wantEvent: &queue.Event{Kind: queue.EventTaskException, RunID: 0},
		},
		{
			state:     queue.StatePending,
			want:      &queue.Run{RunID: 0, State: queue.StateException, ReasonCreated: queue.ReasonScheduled, ReasonResolved: queue.ReasonCanceled, Scheduled: queue.NewTime(Epoch), Resolved: qt(now)},
			wantEvent: &queue.Event{Kind: queue.EventTaskException, RunID: 0},
		},
		{
			state: queue.StateRunning,
			want: &queue.Run{RunID: 0, State: queue.StateException, ReasonCreated: queue.ReasonScheduled, ReasonResolved: queue.ReasonCanceled,
				WorkerGroup: workerGroup, WorkerID: workerID, TakenUntil: qt(Epoch.Add(claimTimeout)),
				Scheduled: queue.NewTime(Epoch), Started: qt(Epoch), Resolved: qt(now)},
			wantEvent: &queue.Event{Kind: queue.EventTaskException, RunID: 0, WorkerGroup: workerGroup, WorkerID: workerID},
		},
		{state: queue.StateCompleted},
		{state: queue.StateFailed},
		{state: queue.StateException},
	}
	for _, tc := range tests {
		t.Run(tc.state, func(t *testing.T) {
			t.Parallel()
			e := setup(t, open)
			before := e.bring("t", tc.state)
			res := e.mustApply("t", now, cancel(now))
			got := e.get("t")
			require.Equal(t, res.Task, got)
			if tc.want == nil {
				require.Equal(t, before, got)
				require.Empty(t, res.Changes)
				return
			}
			require.Equal(t, []queue.Run{*tc.want}, got.Runs)
			require.Len(t, res.Changes, 1)
			require.Len(t, res.Changes[0].Events, 1)
			gotEvent := res.Changes[0].Events[0]
			gotEvent.Status = nil
			require.Equal(t, *tc.wantEvent, gotEvent)
			// A cancelled task is nobody's work any more.
			pending, claimed := e.counts(now)
			require.Zero(t, pending)
			require.Zero(t, claimed)
			require.Empty(t, e.claimWork(testQueue, 1, now).Claims)
			_, err := e.apply("t", now, report(queue.StateCompleted, 0, now))
			requireQueueError(t, err, queue.KindConflict)
		})
	}

	t.Run("past deadline", func(t *testing.T) {
		t.Parallel()
		e := setup(t, open)
		e.bring("t", queue.StatePending, withDeadline(Epoch.Add(10*time.Minute)))
		_, err := e.apply("t", Epoch.Add(10*time.Minute), cancel(Epoch.Add(10*time.Minute)))
		requireQueueError(t, err, queue.KindConflict)
		require.Equal(t, queue.StatePending, e.get("t").State())
	})
}
