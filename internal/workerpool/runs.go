package workerpool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// WorkerRunStore is what resolving a removed worker's runs needs of the
// queue's store.
type WorkerRunStore interface {
	ListHeldRuns(ctx context.Context, q store.HeldRunsQuery, now time.Time) ([]store.HeldRun, error)
	UpdateTask(ctx context.Context, p store.UpdateTaskParams) (*store.Result, error)
}

// WorkerRunResolver resolves the runs a worker had claimed when the worker
// manager removes it (removeWorker, or a container its provider saw die):
// each run is resolved exception/worker-shutdown at once, with a retry
// run while the task has retries left, as Taskcluster's worker-removed
// resolver does, instead of waiting for the claim to expire. Each task
// changes in a transaction of its own; a run the worker resolved (or
// that was claimed again) meanwhile is left alone, so resolving again is
// harmless: the worker scanner does it for every stopped worker that
// still holds runs, whichever call stopped it (a removeWorker cut short
// between its two steps leaves them to it).
type WorkerRunResolver struct {
	Store     WorkerRunStore
	Publisher Publisher
}

// errRunMoved says a run is no longer the worker's to resolve.
var errRunMoved = errors.New("the run is no longer claimed by the worker")

// ResolveWorkerRuns resolves the worker's claimed runs and returns how
// many it resolved.
func (r *WorkerRunResolver) ResolveWorkerRuns(ctx context.Context, key store.WorkerKey, now time.Time) (int, error) {
	held, err := r.Store.ListHeldRuns(ctx, store.HeldRunsQuery{Worker: &key}, now)
	if err != nil {
		return 0, fmt.Errorf("listing the runs %s/%s holds in %s: %w", key.WorkerGroup, key.WorkerID, key.TaskQueueID, err)
	}
	return r.resolve(ctx, key, held, now)
}

// resolve resolves the runs of held that are still the worker's.
func (r *WorkerRunResolver) resolve(ctx context.Context, key store.WorkerKey, runs []store.HeldRun, now time.Time) (int, error) {
	n := 0
	for _, c := range runs {
		res, err := r.Store.UpdateTask(ctx, store.UpdateTaskParams{TaskID: c.TaskID, Now: now,
			Apply: func(t *queue.TaskState, tr *queue.Transition) error {
				if c.RunID >= len(t.Runs) {
					return errRunMoved
				}
				run := t.Runs[c.RunID]
				if run.State != queue.StateRunning || run.WorkerGroup != key.WorkerGroup || run.WorkerID != key.WorkerID {
					return errRunMoved
				}
				return t.ReportException(c.RunID, queue.ReasonWorkerShutdown, now, tr)
			}})
		if errors.Is(err, errRunMoved) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("resolving run %d of %s: %w", c.RunID, c.TaskID, err)
		}
		if r.Publisher != nil {
			r.Publisher.Publish(ctx, res.Changes)
		}
		n++
	}
	return n, nil
}
