package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hopper-ci/hopper/internal/artifacts"
	"github.com/hopper-ci/hopper/internal/clock"
	"github.com/hopper-ci/hopper/internal/store"
)

// DefaultAuditRetention is how long audit entries are kept, as on
// Taskcluster (its auth service's default).
const DefaultAuditRetention = 30 * 24 * time.Hour

// Expiry is one service's deletion of its expired rows. Each service's
// store interface has a method for it beside its rows (the queue's
// ExpireQueueData, store.SecretStore's ExpireSecrets, …), and the
// service's constructor in internal/server lists its Expiry; DataExpirer
// runs them all.
type Expiry struct {
	// Service names the service, for the log.
	Service string
	// Run deletes what has expired at now and says how many rows it
	// deleted.
	Run func(ctx context.Context, now time.Time) (int, error)
}

// DataExpirer runs every service's Expiry once at Start, then every
// Interval. Each runs in a transaction of its own, so one that fails does
// not keep the others from deleting.
type DataExpirer struct {
	Expiries []Expiry
	Clock    clock.Clock
	Logger   *slog.Logger
	// Interval is the cadence (default DefaultExpireEvery).
	Interval time.Duration

	loop // its Stop is the duty's
}

var _ Service = (*DataExpirer)(nil)

// Start implements Service.
func (e *DataExpirer) Start(ctx context.Context) {
	e.loop.start(ctx, e.Logger, "expiring data", interval(e.Interval, DefaultExpireEvery), true, e.RunOnce)
}

// RunOnce runs every expiry at the clock's time.
func (e *DataExpirer) RunOnce(ctx context.Context) error {
	log := logger(e.Logger)
	now := e.Clock.Now()
	var errs []error
	for _, x := range e.Expiries {
		n, err := x.Run(ctx, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("expiring the %s service's data: %w", x.Service, err))
			continue
		}
		if n > 0 {
			log.Info("expired data", "service", x.Service, "rows", n)
		}
	}
	return errors.Join(errs...)
}

// QueueDataStore is the store as the queue's expiry uses it.
type QueueDataStore interface {
	ExpireQueueData(ctx context.Context, now time.Time) (*store.ExpiredQueueData, error)
}

// QueueExpiry is the queue's Expiry: tasks with their dependency edges and
// artifacts, task groups, task queues and workers (kept while
// quarantined), and the stored data of the expired artifacts in blobs
// (nil: nothing to delete there). A blob that cannot be deleted is logged
// and left (its row is gone, so nothing serves it any more).
func QueueExpiry(st QueueDataStore, blobs artifacts.Backend, log *slog.Logger) Expiry {
	return Expiry{Service: "queue", Run: func(ctx context.Context, now time.Time) (int, error) {
		res, err := st.ExpireQueueData(ctx, now)
		if err != nil {
			return 0, err
		}
		for _, b := range res.Blobs {
			if b.StorageType != "s3" || blobs == nil {
				continue
			}
			if err := blobs.Delete(ctx, artifacts.BlobKey(b.TaskID, b.RunID, b.Name)); err != nil {
				logger(log).Warn("deleting expired artifact data", "taskId", b.TaskID, "runId", b.RunID, "name", b.Name, "error", err)
			}
		}
		return res.Tasks + res.Artifacts + res.TaskGroups + res.TaskQueues + res.Workers, nil
	}}
}

// AuditHistoryStore is the store as the audit log's expiry uses it.
type AuditHistoryStore interface {
	ExpireAuditHistory(ctx context.Context, cutoff time.Time) (int, error)
}

// AuditExpiry is the Auth service's audit log's Expiry: entries older
// than retention (0: DefaultAuditRetention) go.
func AuditExpiry(st AuditHistoryStore, retention time.Duration) Expiry {
	if retention <= 0 {
		retention = DefaultAuditRetention
	}
	return Expiry{Service: "auth audit", Run: func(ctx context.Context, now time.Time) (int, error) {
		return st.ExpireAuditHistory(ctx, now.Add(-retention))
	}}
}
