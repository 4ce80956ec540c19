package queue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// Identities shared by the state-machine tests.
const (
	testTaskID   = "fN1SbArXTPSVFNUvaOlinQ"
	testGroup    = "us-east-1"
	testWorker   = "i-0123456789"
	claimTimeout = 20 * time.Minute
	// taskLife is the distance from epoch to the deadline of newState's task.
	taskLife = 24 * time.Hour
)

// newClock is the explicit test clock: it moves only when a test advances
// it, so every timestamp a transition records is known in advance.
func newClock() *testclock.Clock { return testclock.New(epoch()) }

// epoch is the fixed instant all tests count from.
func epoch() time.Time { return time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC) }

// at is epoch + d.
func at(d time.Duration) time.Time { return epoch().Add(d) }

// qt is epoch + d as a queue.Time.
func qt(d time.Duration) queue.Time { return queue.NewTime(at(d)) }

// qtp is a pointer to epoch + d as a queue.Time.
func qtp(d time.Duration) *queue.Time {
	v := qt(d)
	return &v
}

// newState returns an unscheduled task created at epoch whose deadline is
// epoch + taskLife.
func newState(retries int) *queue.TaskState {
	return queue.NewTaskState(testTaskID, queue.Task{
		ProvisionerID: "prov",
		WorkerType:    "wt",
		TaskQueueID:   "prov/wt",
		SchedulerID:   "-",
		ProjectID:     "none",
		TaskGroupID:   testTaskID,
		Requires:      queue.RequiresAllCompleted,
		Priority:      "lowest",
		Retries:       retries,
		Created:       qt(0),
		Deadline:      qt(taskLife),
		Expires:       qt(taskLife + 365*24*time.Hour),
	})
}

// step drives a task during a test's setup; its events are discarded.
type step func(t *testing.T, ts *queue.TaskState)

func scheduleAt(d time.Duration) step {
	return func(t *testing.T, ts *queue.TaskState) {
		t.Helper()
		require.NoError(t, ts.Schedule(at(d), &queue.Transition{}))
	}
}

func claimAt(runID int, d time.Duration) step {
	return func(t *testing.T, ts *queue.TaskState) {
		t.Helper()
		require.NoError(t, ts.Claim(runID, testGroup, testWorker, at(d), at(d+claimTimeout), &queue.Transition{}))
	}
}

func completeAt(runID int, d time.Duration) step {
	return func(t *testing.T, ts *queue.TaskState) {
		t.Helper()
		require.NoError(t, ts.ReportCompleted(runID, at(d), &queue.Transition{}))
	}
}

func failAt(runID int, d time.Duration) step {
	return func(t *testing.T, ts *queue.TaskState) {
		t.Helper()
		require.NoError(t, ts.ReportFailed(runID, at(d), &queue.Transition{}))
	}
}

func exceptionAt(runID int, reason string, d time.Duration) step {
	return func(t *testing.T, ts *queue.TaskState) {
		t.Helper()
		require.NoError(t, ts.ReportException(runID, reason, at(d), &queue.Transition{}))
	}
}

func rerunAt(d time.Duration) step {
	return func(t *testing.T, ts *queue.TaskState) {
		t.Helper()
		require.NoError(t, ts.Rerun(at(d), &queue.Transition{}))
	}
}

func cancelAt(d time.Duration) step {
	return func(t *testing.T, ts *queue.TaskState) {
		t.Helper()
		require.NoError(t, ts.Cancel(at(d), &queue.Transition{}))
	}
}

// build returns a task with the given retries after running steps.
func build(t *testing.T, retries int, steps ...step) *queue.TaskState {
	t.Helper()
	ts := newState(retries)
	for _, s := range steps {
		s(t, ts)
	}
	return ts
}

// pendingRun is a run as created at epoch + scheduled.
func pendingRun(id int, reasonCreated string, scheduled time.Duration) queue.Run {
	return queue.Run{RunID: id, State: queue.StatePending, ReasonCreated: reasonCreated, Scheduled: qt(scheduled)}
}

// claimed is r after testGroup/testWorker claimed it at epoch + started.
func claimed(r queue.Run, started time.Duration) queue.Run {
	r.State = queue.StateRunning
	r.WorkerGroup = testGroup
	r.WorkerID = testWorker
	r.Started = qtp(started)
	r.TakenUntil = qtp(started + claimTimeout)
	return r
}

// resolvedRun is r resolved in state with reason at epoch + d.
func resolvedRun(r queue.Run, state, reason string, d time.Duration) queue.Run {
	r.State = state
	r.ReasonResolved = reason
	r.Resolved = qtp(d)
	return r
}

// runEv is an event about a run that names no worker.
func runEv(kind string, runID int) queue.Event {
	return queue.Event{Kind: kind, RunID: runID}
}

// workerEv is an event about a run claimed by testGroup/testWorker.
func workerEv(kind string, runID int) queue.Event {
	return queue.Event{Kind: kind, RunID: runID, WorkerGroup: testGroup, WorkerID: testWorker}
}

// requireKind asserts err is a *queue.Error of the given kind.
func requireKind(t *testing.T, err error, kind queue.ErrorKind) {
	t.Helper()
	var qe *queue.Error
	require.True(t, errors.As(err, &qe), "want *queue.Error, got %T: %v", err, err)
	require.Equal(t, kind, qe.Kind, "error: %v", err)
}

// requireUnchanged asserts that a refused or idempotent call left the task as
// it was. It compares through Status so that a nil and an empty run list are
// the same "no runs".
func requireUnchanged(t *testing.T, before, after *queue.TaskState) {
	t.Helper()
	require.Equal(t, before.Task, after.Task, "definition unchanged")
	require.Equal(t, before.Status(), after.Status(), "status unchanged")
}
