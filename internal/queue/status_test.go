package queue_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
)

func TestNormalizeExceptionReason(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"resources-unavailable", queue.ReasonResourceUnavailable},
		{queue.ReasonResourceUnavailable, queue.ReasonResourceUnavailable},
		{queue.ReasonWorkerShutdown, queue.ReasonWorkerShutdown},
		{queue.ReasonSuperseded, queue.ReasonSuperseded},
		{"something-else", "something-else"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, queue.NormalizeExceptionReason(tt.in))
		})
	}
}

func TestExceptionReasons(t *testing.T) {
	t.Parallel()
	require.ElementsMatch(t, []string{
		"worker-shutdown", "malformed-payload", "resource-unavailable",
		"internal-error", "intermittent-task", "superseded",
	}, queue.ExceptionReasons)
}

// TestTaskStateViews checks State, LastRun and IsResolved through a task's
// life.
func TestTaskStateViews(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		setup        []step
		wantState    string
		wantLast     int // -1 for no run
		wantResolved bool
	}{
		{"unscheduled", nil, queue.StateUnscheduled, -1, false},
		{"pending", []step{scheduleAt(0)}, queue.StatePending, 0, false},
		{"running", []step{scheduleAt(0), claimAt(0, time.Minute)}, queue.StateRunning, 0, false},
		{"completed", []step{scheduleAt(0), claimAt(0, time.Minute), completeAt(0, time.Hour)}, queue.StateCompleted, 0, true},
		{"failed", []step{scheduleAt(0), claimAt(0, time.Minute), failAt(0, time.Hour)}, queue.StateFailed, 0, true},
		{"exception", []step{cancelAt(time.Minute)}, queue.StateException, 0, true},
		{"pending retry", []step{scheduleAt(0), claimAt(0, time.Minute), exceptionAt(0, queue.ReasonWorkerShutdown, time.Hour)},
			queue.StatePending, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts := build(t, 5, tt.setup...)
			require.Equal(t, tt.wantState, ts.State())
			require.Equal(t, tt.wantResolved, ts.IsResolved())
			if tt.wantLast < 0 {
				require.Nil(t, ts.LastRun())
				return
			}
			require.Equal(t, tt.wantLast, ts.LastRun().RunID)
			require.Same(t, &ts.Runs[tt.wantLast], ts.LastRun(), "LastRun points into the task")
			require.Equal(t, tt.wantResolved, ts.LastRun().IsResolved())
		})
	}
}

// TestStatusJSON checks the status structure of docs/contract/queue.md §4.1-4.2:
// fields copied from the definition, runs rendered with only the fields
// they have, timestamps canonical.
func TestStatusJSON(t *testing.T) {
	t.Parallel()
	ts := build(t, 2, scheduleAt(0), claimAt(0, time.Minute), exceptionAt(0, queue.ReasonWorkerShutdown, 90*time.Second))
	out, err := json.Marshal(ts.Status())
	require.NoError(t, err)
	require.JSONEq(t, `{
		"taskId": "`+testTaskID+`",
		"provisionerId": "prov", "workerType": "wt", "taskQueueId": "prov/wt",
		"schedulerId": "-", "projectId": "none", "taskGroupId": "`+testTaskID+`",
		"priority": "lowest",
		"deadline": "2024-05-02T12:00:00.000Z", "expires": "2025-05-02T12:00:00.000Z",
		"retriesLeft": 1, "state": "pending",
		"runs": [
			{"runId": 0, "state": "exception", "reasonCreated": "scheduled", "reasonResolved": "worker-shutdown",
			 "workerGroup": "`+testGroup+`", "workerId": "`+testWorker+`",
			 "takenUntil": "2024-05-01T12:21:00.000Z", "scheduled": "2024-05-01T12:00:00.000Z",
			 "started": "2024-05-01T12:01:00.000Z", "resolved": "2024-05-01T12:01:30.000Z"},
			{"runId": 1, "state": "pending", "reasonCreated": "retry", "scheduled": "2024-05-01T12:01:30.000Z"}
		]
	}`, string(out))

	// A task without runs renders an empty list, not null.
	out, err = json.Marshal(newState(5).Status())
	require.NoError(t, err)
	require.Contains(t, string(out), `"runs":[]`)
	require.Contains(t, string(out), `"state":"unscheduled"`)
}

// TestStatusIsACopy checks that a rendered status and a clone do not change
// when the task moves on.
func TestStatusIsACopy(t *testing.T) {
	t.Parallel()
	ts := build(t, 5, scheduleAt(0))
	status := ts.Status()
	clone := ts.Clone()
	require.NoError(t, ts.Claim(0, testGroup, testWorker, at(time.Minute), at(time.Minute+claimTimeout), &queue.Transition{}))
	require.NoError(t, ts.ReportException(0, queue.ReasonWorkerShutdown, at(time.Hour), &queue.Transition{}))

	require.Equal(t, queue.StatePending, status.State)
	require.Equal(t, []queue.Run{pendingRun(0, queue.ReasonScheduled, 0)}, status.Runs)
	require.Equal(t, []queue.Run{pendingRun(0, queue.ReasonScheduled, 0)}, clone.Runs)
	require.Equal(t, 5, clone.RetriesLeft)
	require.Len(t, ts.Runs, 2)
	require.Equal(t, 4, ts.RetriesLeft)
}

func TestErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err      *queue.Error
		wantKind queue.ErrorKind
		wantMsg  string
	}{
		{queue.Conflictf("Run %d of task %s is %s", 2, "abc", "pending"), queue.KindConflict, "Run 2 of task abc is pending"},
		{queue.NotFoundf("Run %d not found", 7), queue.KindNotFound, "Run 7 not found"},
		{queue.InputErrorf("bad %q", "x"), queue.KindInput, `bad "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.wantMsg, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.wantKind, tt.err.Kind)
			require.Equal(t, tt.wantMsg, tt.err.Error())
			require.Nil(t, tt.err.Details)

			// Wrapped with context, the kind is still found.
			wrapped := fmt.Errorf("handling request: %w", tt.err)
			var qe *queue.Error
			require.True(t, errors.As(wrapped, &qe))
			require.Equal(t, tt.wantKind, qe.Kind)
		})
	}
	require.NotEqual(t, queue.KindConflict, queue.ErrorKind(0), "the zero kind means no kind")
}
