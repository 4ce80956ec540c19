// Package storetest is the conformance suite every store driver runs: the
// same behaviour, checked the same way, on SQLite and PostgreSQL.
package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// Opener returns a fresh, empty, migrated store for one test.
type Opener func(t *testing.T) store.Store

// Epoch is the fake "now" every test starts from.
var Epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// NewTask returns a valid definition for the task queue, created at now.
func NewTask(taskQueueID string, now time.Time, mutate ...func(*queue.Task)) *queue.Task {
	p, w := queue.SplitTaskQueueID(taskQueueID)
	t := &queue.Task{
		ProvisionerID: p, WorkerType: w, TaskQueueID: taskQueueID,
		SchedulerID: "-", ProjectID: "none", Requires: queue.RequiresAllCompleted,
		Dependencies: []string{}, Routes: []string{}, Scopes: []string{},
		Priority: "lowest", Retries: 5,
		Created:  queue.NewTime(now),
		Deadline: queue.NewTime(now.Add(time.Hour)),
		Expires:  queue.NewTime(now.Add(48 * time.Hour)),
		Payload:  json.RawMessage(`{}`), Extra: json.RawMessage(`{}`),
		Metadata: queue.Metadata{Name: "t", Description: "d", Owner: "o@example.com", Source: "https://example.com"},
		Tags:     map[string]string{},
	}
	for _, m := range mutate {
		m(t)
	}
	return t
}

// Run runs the whole suite against the driver.
func Run(t *testing.T, open Opener) {
	t.Run("CreateClaimComplete", func(t *testing.T) { t.Parallel(); testCreateClaimComplete(t, open) })
}

func testCreateClaimComplete(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	now := Epoch
	res, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: "aaaaaaaaQaaaaaaaaaaaaQ", Task: NewTask("p/w", now), Now: now})
	require.NoError(t, err)
	require.Equal(t, queue.StatePending, res.Task.State())
	require.Len(t, res.Changes, 1)
	kinds := []string{}
	for _, e := range res.Changes[0].Events {
		kinds = append(kinds, e.Kind)
	}
	require.Equal(t, []string{queue.EventTaskDefined, queue.EventTaskPending}, kinds)

	claims, err := s.ClaimWork(ctx, store.ClaimWorkParams{TaskQueueID: "p/w", WorkerGroup: "g", WorkerID: "w", Count: 4, Now: now, TakenUntil: now.Add(time.Minute)})
	require.NoError(t, err)
	require.Len(t, claims.Claims, 1)
	require.Equal(t, queue.StateRunning, claims.Claims[0].Task.State())

	done, err := s.UpdateTask(ctx, store.UpdateTaskParams{TaskID: "aaaaaaaaQaaaaaaaaaaaaQ", Now: now, Apply: func(ts *queue.TaskState, tr *queue.Transition) error {
		return ts.ReportCompleted(0, now, tr)
	}})
	require.NoError(t, err)
	require.Equal(t, queue.StateCompleted, done.Task.State())
	require.NotNil(t, done.Changes[0].GroupResolved)
}
