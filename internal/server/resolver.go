package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/artifacts"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// Resolver runs the background work of the queue: claim expiry and deadline
// resolution on a fine-grained tick (so both happen within about a second of
// their due time), and data expiration on a slow one. Every step re-checks
// each task under its row lock, so several hopper processes sharing one
// PostgreSQL database may all run it.
type Resolver struct {
	API           *api.Server
	Store         store.Store
	Blobs         artifacts.Backend
	Clock         queue.Clock
	Log           *slog.Logger
	DeadlineDelay time.Duration
	// Tick is the claim/deadline cadence (default 250ms).
	Tick time.Duration
	// ExpireEvery is the data expiration cadence (default 10 min).
	ExpireEvery time.Duration

	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

// Start runs the loops until Stop or ctx ends.
func (r *Resolver) Start(ctx context.Context) {
	if r.Tick <= 0 {
		r.Tick = 250 * time.Millisecond
	}
	if r.ExpireEvery <= 0 {
		r.ExpireEvery = 10 * time.Minute
	}
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		tick := time.NewTicker(r.Tick)
		defer tick.Stop()
		expire := time.NewTicker(r.ExpireEvery)
		defer expire.Stop()
		r.expireData(ctx)
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if _, err := r.API.ResolveBackground(ctx, r.DeadlineDelay); err != nil && ctx.Err() == nil {
					r.Log.Error("resolving claims and deadlines", "error", err)
				}
			case <-expire.C:
				r.expireData(ctx)
			}
		}
	}()
}

// Stop ends the loops and waits for them; safe to call twice.
func (r *Resolver) Stop() {
	r.stopOnce.Do(func() {
		if r.cancel != nil {
			r.cancel()
			<-r.done
		}
	})
}

func (r *Resolver) expireData(ctx context.Context) {
	res, err := r.Store.ExpireData(ctx, r.Clock.Now())
	if err != nil {
		if ctx.Err() == nil {
			r.Log.Error("expiring data", "error", err)
		}
		return
	}
	for _, b := range res.Blobs {
		if b.StorageType != "s3" || r.Blobs == nil {
			continue
		}
		if err := r.Blobs.Delete(ctx, api.BlobKey(b.TaskID, b.RunID, b.Name)); err != nil {
			r.Log.Warn("deleting expired artifact data", "taskId", b.TaskID, "runId", b.RunID, "name", b.Name, "error", err)
		}
	}
	if res.Tasks+res.Artifacts+res.TaskGroups+res.TaskQueues+res.Workers+res.Clients+res.IndexedTasks+res.IndexNamespaces+res.Secrets > 0 {
		r.Log.Info("expired data", "tasks", res.Tasks, "artifacts", res.Artifacts, "taskGroups", res.TaskGroups,
			"taskQueues", res.TaskQueues, "workers", res.Workers, "clients", res.Clients,
			"indexedTasks", res.IndexedTasks, "indexNamespaces", res.IndexNamespaces, "secrets", res.Secrets)
	}
}
