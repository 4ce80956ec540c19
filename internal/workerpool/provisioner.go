package workerpool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hopper-ci/hopper/internal/clock"
	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/workermanager"
	"github.com/hopper-ci/hopper/internal/workerprovider"
)

// Defaults of the worker-pool duties.
const (
	DefaultProvisionTick = 5 * time.Second
	// DefaultLeaseFor is how long a replica holds the provisioner's (or the
	// scanner's) lease without renewing it: a killed replica's lease
	// frees itself after this.
	DefaultLeaseFor = 30 * time.Second
)

// Lease names of the worker-pool duties.
const (
	ProvisionerLease = "provisioner"
	ScannerLease     = "worker-scanner"
)

// PoolStore is what the worker-pool duties need of the store: the Worker
// Manager's records, the queue's counts and worker records, and the
// queue's tasks (to see what a worker last worked on).
type PoolStore interface {
	store.WorkerManagerStore
	TaskQueueCounts(ctx context.Context, taskQueueID string, now time.Time) (pending, claimed int, err error)
	ListWorkers(ctx context.Context, now time.Time, filter store.WorkerFilter, page store.Page) ([]store.Worker, string, error)
	ListHeldRuns(ctx context.Context, q store.HeldRunsQuery, now time.Time) ([]store.HeldRun, error)
	GetTask(ctx context.Context, taskID string) (*queue.TaskState, error)
}

// PoolProvider is a provider the duties run workers with.
type PoolProvider struct {
	Type     string
	Provider workerprovider.Provider
}

// WorkerEvents publishes the Worker Manager's worker-* messages (nil: none).
type WorkerEvents func(ctx context.Context, exchange string, w *workermanager.Worker, reason string, now time.Time)

// ErrorEvents publishes the Worker Manager's worker-pool-error message of
// an error the duties recorded (nil: none).
type ErrorEvents func(ctx context.Context, pool *workermanager.Pool, e *workermanager.PoolError)

// Provisioner keeps each dynamic pool's capacity between its minimum and
// maximum for the work pending in its task queue. One replica at a time
// provisions, holding a lease it renews every pass; every worker it
// requests is recorded under that lease before its container starts, so a
// replica that lost the lease (killed, or stalled past it) cannot add to
// what the next holder already counted, and a pool never exceeds its
// maxCapacity however many replicas run.
type Provisioner struct {
	Store     PoolStore
	Providers map[string]PoolProvider // by providerId
	// RootURL is where started workers register.
	RootURL string
	// Holder names this replica in the lease (unique per process).
	Holder string
	Events WorkerEvents
	// ErrorEvents announces the errors it records, as Taskcluster's
	// providers do.
	ErrorEvents ErrorEvents
	Clock       clock.Clock
	Logger      *slog.Logger
	// LeaseFor is the lease's length (default DefaultLeaseFor).
	LeaseFor time.Duration
}

// Pass provisions once (RunOnce), as maintenance.Every schedules it.
func (p *Provisioner) Pass(ctx context.Context) error {
	_, err := p.RunOnce(ctx)
	return err
}

// allPools lists every pool.
func allPools(ctx context.Context, st store.WorkerManagerStore) ([]workermanager.Pool, error) {
	var out []workermanager.Pool
	page := store.Page{}
	for {
		pools, next, err := st.ListWorkerPools(ctx, page)
		if err != nil {
			return nil, err
		}
		out = append(out, pools...)
		if next == "" {
			return out, nil
		}
		page.ContinuationToken = next
	}
}

// RunOnce provisions every dynamic pool once, if this replica holds (or
// takes) the lease, and returns how many workers it started.
func (p *Provisioner) RunOnce(ctx context.Context) (int, error) {
	now := p.Clock.Now()
	ok, err := p.Store.TakeLease(ctx, store.TakeLeaseParams{Name: ProvisionerLease, Holder: p.Holder, Now: now, Until: now.Add(cmp.Or(p.LeaseFor, DefaultLeaseFor))})
	if err != nil || !ok {
		return 0, err
	}
	pools, err := allPools(ctx, p.Store)
	if err != nil {
		return 0, err
	}
	var ids []string
	for _, pool := range pools {
		if _, ok := p.Providers[pool.ProviderID]; ok {
			ids = append(ids, pool.WorkerPoolID)
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	counts, err := p.Store.WorkerPoolCounts(ctx, ids)
	if err != nil {
		return 0, err
	}
	started := 0
	for i := range pools {
		pool := &pools[i]
		prov, ok := p.Providers[pool.ProviderID]
		if !ok {
			continue
		}
		n, err := p.provision(ctx, pool, prov, counts[pool.WorkerPoolID])
		started += n
		if errors.Is(err, store.ErrLeaseLost) {
			return started, nil
		}
		if err != nil {
			return started, err
		}
	}
	return started, nil
}

// Decide says how many workers a pool needs started now.
func Decide(pool *workermanager.Pool, c workermanager.Counts, pending, claimed int) int {
	capacity := pool.Capacity()
	spawn := workermanager.ToSpawn(capacity, workermanager.Demand{Pending: pending, Claimed: claimed,
		Requested: c.RequestedCapacity, Running: c.RunningCapacity, Stopping: c.StoppingCapacity})
	// Whole workers only, never past the maximum.
	room := capacity.Max - c.RequestedCapacity - c.RunningCapacity - c.StoppingCapacity
	return min(workermanager.WorkersFor(spawn, capacity.PerWorker), max(0, room/capacity.PerWorker))
}

func (p *Provisioner) provision(ctx context.Context, pool *workermanager.Pool, prov PoolProvider, c workermanager.Counts) (int, error) {
	now := p.Clock.Now()
	pending, claimed, err := p.Store.TaskQueueCounts(ctx, pool.WorkerPoolID, now)
	if err != nil {
		return 0, fmt.Errorf("counting the tasks of %s: %w", pool.WorkerPoolID, err)
	}
	n := Decide(pool, c, pending, claimed)
	log := logger(p.Logger)
	for i := range n {
		secret := ident.NewSlugID() + ident.NewSlugID()
		w := workermanager.NewRequestedWorker(pool, pool.ProviderID, "w"+ident.NewSlugID()[:21], pool.Capacity().PerWorker, p.Clock.Now())
		w.StaticSecretHash = workermanager.HashSecret(secret)
		if err := p.Store.RequestPoolWorker(ctx, store.RequestPoolWorkerParams{Worker: w, Lease: ProvisionerLease, Holder: p.Holder, Now: p.Clock.Now()}); err != nil {
			return i, err
		}
		data, err := prov.Provider.Start(ctx, pool, w, workerprovider.Registration{RootURL: p.RootURL, StaticSecret: secret})
		if err != nil {
			// Nothing runs it: out of the pool's accounting at once.
			if _, uerr := p.Store.UpdatePoolWorker(ctx, w.Key(), func(w *workermanager.Worker) error {
				if data != nil {
					w.ProviderData = data
				}
				w.Stopped(p.Clock.Now())
				return nil
			}); uerr != nil {
				return i, uerr
			}
			reportPoolError(ctx, p.Store, p.ErrorEvents, log, p.Clock.Now(), pool, "provisioning-error", "Could not start a worker", err.Error(), w)
			return i, nil
		}
		recorded, err := p.Store.UpdatePoolWorker(ctx, w.Key(), func(w *workermanager.Worker) error {
			w.ProviderData = data
			return nil
		})
		if err != nil {
			return i, err
		}
		if recorded.Removed() {
			// Removed while it started (removeWorker, or a registration
			// deadline shorter than the start): what was started must go
			// too, or it would run outside the pool's accounting.
			if err := prov.Provider.Stop(ctx, pool, recorded); err != nil {
				log.Warn("stopping a worker removed while it started", "worker", w.Key().String(), "error", err)
			}
			continue
		}
		if p.Events != nil {
			p.Events(ctx, "worker-requested", w, "", p.Clock.Now())
		}
		log.Info("worker requested", "workerPoolId", pool.WorkerPoolID, "workerId", w.WorkerID, "pending", pending)
	}
	return n, nil
}

// reportPoolError records an error about a pool (a worker that could not
// start, died or never registered) and announces it on worker-pool-error;
// a failure to record it is logged.
func reportPoolError(ctx context.Context, st store.WorkerManagerStore, announce ErrorEvents, log *slog.Logger, now time.Time, pool *workermanager.Pool, kind, title, description string, w *workermanager.Worker) {
	e := &workermanager.PoolError{WorkerPoolID: pool.WorkerPoolID, ErrorID: ident.NewSlugID(), Reported: now,
		Kind: kind, Title: title, Description: description, Extra: map[string]any{}}
	if w != nil {
		e.Extra["workerGroup"], e.Extra["workerId"] = w.WorkerGroup, w.WorkerID
		e.LaunchConfigID = w.LaunchConfigID
	}
	log.Warn("worker pool error", "workerPoolId", pool.WorkerPoolID, "title", title, "description", description)
	if err := st.AddWorkerPoolError(ctx, e); err != nil {
		log.Error("recording a worker pool error", "workerPoolId", pool.WorkerPoolID, "error", err)
		return
	}
	if announce != nil {
		announce(ctx, pool, e)
	}
}

// NewErrorEventsPublisher publishes the pool errors the duties record on
// pub, built by build (the Worker Manager API's message builder).
func NewErrorEventsPublisher(pub events.Publisher, build func(pool *workermanager.Pool, e *workermanager.PoolError) (events.Message, error), log *slog.Logger) ErrorEvents {
	if pub == nil {
		return nil
	}
	return func(ctx context.Context, pool *workermanager.Pool, e *workermanager.PoolError) {
		msg, err := build(pool, e)
		if err == nil {
			err = pub.Publish(ctx, msg)
		}
		if err != nil {
			logger(log).Warn("publishing a worker-manager event", "exchange", "worker-pool-error", "error", err)
		}
	}
}

// NewEventsPublisher publishes worker events on pub, built by build (the
// Worker Manager API's message builder).
func NewEventsPublisher(pub events.Publisher, build func(exchange string, w *workermanager.Worker, reason string, now time.Time) (events.Message, error), log *slog.Logger) WorkerEvents {
	if pub == nil {
		return nil
	}
	return func(ctx context.Context, exchange string, w *workermanager.Worker, reason string, now time.Time) {
		msg, err := build(exchange, w, reason, now)
		if err == nil {
			err = pub.Publish(ctx, msg)
		}
		if err != nil {
			logger(log).Warn("publishing a worker-manager event", "exchange", exchange, "error", err)
		}
	}
}
