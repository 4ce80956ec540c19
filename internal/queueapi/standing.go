package queueapi

import (
	"context"
	"fmt"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// WorkerStanding tells the queue whether the Worker Manager has stopped a
// worker (removeWorker, or its scanner): such a worker's credentials
// last until they expire (days), so the queue itself refuses it work.
type WorkerStanding interface {
	// WorkerStopped reports whether the worker of a pool is stopping or
	// stopped; a worker no pool knows is not.
	WorkerStopped(ctx context.Context, key store.WorkerKey) (bool, error)
}

// refuseStopped answers a conflict (409) for a worker its manager has
// stopped. Taskcluster's clients do not retry a 4xx; generic-worker logs
// a refused claimWork and asks shouldWorkerTerminate before it polls
// again, and a refused reclaimTask makes it abort the task; hopper's
// worker counts the refusal and its pool membership stops it.
func (s *Server) refuseStopped(ctx context.Context, key store.WorkerKey) error {
	if s.standing == nil {
		return nil
	}
	stopped, err := s.standing.WorkerStopped(ctx, key)
	if err != nil {
		return fmt.Errorf("asking whether worker %s/%s of %s was removed: %w", key.WorkerGroup, key.WorkerID, key.TaskQueueID, err)
	}
	if stopped {
		return queue.Conflictf("Worker %s/%s was removed from worker pool %s: it may take no more work", key.WorkerGroup, key.WorkerID, key.TaskQueueID)
	}
	return nil
}

// refuseStoppedHolder refuses reclaimTask for a run whose worker its
// manager has stopped. Removal resolves the worker's runs, so this is
// for a run that slipped past that (a claim that landed as the worker
// was removed), until the worker scanner resolves it.
func (s *Server) refuseStoppedHolder(c *api.Call) error {
	if s.standing == nil {
		return nil
	}
	t, err := s.store.GetTask(c.Context(), c.Params["taskId"])
	if err != nil {
		return nil // runCall answers the missing task
	}
	runID := c.IntParam("runId")
	if runID < 0 || runID >= len(t.Runs) || t.Runs[runID].State != queue.StateRunning {
		return nil // and the run's state
	}
	r := t.Runs[runID]
	return s.refuseStopped(c.Context(), store.WorkerKey{TaskQueueID: t.Task.TaskQueueID, WorkerGroup: r.WorkerGroup, WorkerID: r.WorkerID})
}
