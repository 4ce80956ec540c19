package queueapi

import (
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// refusal answers a conflict (409) for a worker its manager has stopped
// (Options.RefuseStopped). Taskcluster's clients do not retry a 4xx;
// generic-worker logs a refused claimWork and asks shouldWorkerTerminate
// before it polls again, and a refused reclaimTask makes it abort the
// task; hopper's worker counts the refusal and its pool membership stops
// it.
func refusal(key store.WorkerKey) error {
	return queue.Conflictf("Worker %s/%s was removed from worker pool %s: it may take no more work", key.WorkerGroup, key.WorkerID, key.TaskQueueID)
}
