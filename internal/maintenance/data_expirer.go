package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/hopper-ci/hopper/internal/artifacts"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// DefaultAuditRetention is how long audit entries are kept, as on
// Taskcluster (its auth service's default).
const DefaultAuditRetention = 30 * 24 * time.Hour

// DataStore is the store as DataExpirer uses it.
type DataStore interface {
	ExpireData(ctx context.Context, now time.Time) (*store.ExpireDataResult, error)
	ExpireAuditHistory(ctx context.Context, cutoff time.Time) (int, error)
}

// DataExpirer deletes what has expired: tasks with their dependency edges
// and artifacts (and the artifacts' stored data), task groups, task queues,
// workers (kept while quarantined), clients marked deleteOnExpiration,
// hook fire records older than a year, and audit entries older than
// AuditRetention.
// It runs once at Start, then every Interval.
type DataExpirer struct {
	Store DataStore
	// Blobs holds the data of s3 artifacts (nil: nothing to delete there).
	Blobs  artifacts.Backend
	Clock  queue.Clock
	Logger *slog.Logger
	// Interval is the cadence (default DefaultExpireEvery).
	Interval time.Duration
	// AuditRetention is how long the audit log of client and role changes
	// is kept (default DefaultAuditRetention).
	AuditRetention time.Duration

	loop // its Stop is the duty's
}

var _ Service = (*DataExpirer)(nil)

// Start implements Service.
func (e *DataExpirer) Start(ctx context.Context) {
	e.loop.start(ctx, e.Logger, "expiring data", interval(e.Interval, DefaultExpireEvery), true, e.RunOnce)
}

// RunOnce deletes what has expired now. A blob that cannot be deleted is
// logged and left (its row is gone, so nothing serves it any more).
func (e *DataExpirer) RunOnce(ctx context.Context) error {
	log := logger(e.Logger)
	res, err := e.Store.ExpireData(ctx, e.Clock.Now())
	if err != nil {
		return err
	}
	for _, b := range res.Blobs {
		if b.StorageType != "s3" || e.Blobs == nil {
			continue
		}
		if err := e.Blobs.Delete(ctx, artifacts.BlobKey(b.TaskID, b.RunID, b.Name)); err != nil {
			log.Warn("deleting expired artifact data", "taskId", b.TaskID, "runId", b.RunID, "name", b.Name, "error", err)
		}
	}
	retention := e.AuditRetention
	if retention <= 0 {
		retention = DefaultAuditRetention
	}
	audits, err := e.Store.ExpireAuditHistory(ctx, e.Clock.Now().Add(-retention))
	if err != nil {
		return err
	}
	if audits > 0 {
		log.Info("expired audit history", "entries", audits)
	}
	if res.Tasks+res.Artifacts+res.TaskGroups+res.TaskQueues+res.Workers+res.Clients+res.IndexedTasks+res.IndexNamespaces+res.Secrets+res.HookFires > 0 {
		log.Info("expired data", "tasks", res.Tasks, "artifacts", res.Artifacts, "taskGroups", res.TaskGroups,
			"taskQueues", res.TaskQueues, "workers", res.Workers, "clients", res.Clients,
			"indexedTasks", res.IndexedTasks, "indexNamespaces", res.IndexNamespaces, "secrets", res.Secrets, "hookFires", res.HookFires)
	}
	return nil
}
