package workerpool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hopper-ci/hopper/internal/clock"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/workermanager"
)

// DefaultScanTick is how often the worker scanner looks at every worker.
const DefaultScanTick = 10 * time.Second

// PoolErrorRetention is how long pool errors are kept.
const PoolErrorRetention = 7 * 24 * time.Hour

// WorkerScanner watches the workers of every pool, one replica at a time
// (a lease, as the provisioner's): a worker whose container died, or
// that missed its registration or reregistration deadline, or that sat
// idle past its pool's queueInactivityTimeout while the pool is above its
// minimum, is stopped, its claimed runs resolved exception/worker-shutdown
// and retried at once, and (but for an idle stop) a pool error recorded;
// a stopping worker's container is removed; stopped workers and errors
// past their time are deleted, and so is a deleted pool once its workers
// are gone. The provisioner then replaces what the pool still needs.
type WorkerScanner struct {
	Store     PoolStore
	Providers map[string]PoolProvider // by providerId
	Resolver  *WorkerRunResolver
	Holder    string
	Events    WorkerEvents
	// ErrorEvents announces the errors it records.
	ErrorEvents ErrorEvents
	Clock       clock.Clock
	Logger      *slog.Logger
	// LeaseFor is the lease's length (default DefaultLeaseFor).
	LeaseFor time.Duration
}

// Pass scans once (RunOnce), as maintenance.Every schedules it.
func (s *WorkerScanner) Pass(ctx context.Context) error {
	_, err := s.RunOnce(ctx)
	return err
}

// RunOnce scans every pool's workers once (if this replica holds the
// lease) and returns how many workers it stopped.
func (s *WorkerScanner) RunOnce(ctx context.Context) (int, error) {
	now := s.Clock.Now()
	ok, err := s.Store.TakeLease(ctx, store.TakeLeaseParams{Name: ScannerLease, Holder: s.Holder, Now: now, Until: now.Add(cmp.Or(s.LeaseFor, DefaultLeaseFor))})
	if err != nil || !ok {
		return 0, err
	}
	pools, err := allPools(ctx, s.Store)
	if err != nil {
		return 0, err
	}
	stopped := 0
	for i := range pools {
		n, err := s.scanPool(ctx, &pools[i])
		stopped += n
		if err != nil {
			return stopped, err
		}
		if pools[i].ProviderID == workermanager.NullProvider {
			if _, err := s.Store.DeleteWorkerPool(ctx, pools[i].WorkerPoolID); err != nil {
				return stopped, err
			}
		}
	}
	if _, _, err := s.Store.ExpireWorkerManager(ctx, now, now.Add(-PoolErrorRetention)); err != nil {
		return stopped, err
	}
	return stopped, nil
}

func (s *WorkerScanner) scanPool(ctx context.Context, pool *workermanager.Pool) (int, error) {
	workers, err := s.poolWorkers(ctx, pool.WorkerPoolID)
	if err != nil {
		return 0, err
	}
	seen, err := s.queueWorkers(ctx, pool.WorkerPoolID)
	if err != nil {
		return 0, err
	}
	held, err := s.heldRuns(ctx, pool.WorkerPoolID)
	if err != nil {
		return 0, err
	}
	ps := &poolScan{pool: pool, seen: seen, held: held, lifecycle: pool.Lifecycle(), minCapacity: pool.Capacity().Min}
	for _, w := range workers {
		if w.State == workermanager.StateRunning && w.ProviderID == pool.ProviderID {
			ps.running += w.Capacity
		}
	}
	stopped := 0
	for i := range workers {
		w := &workers[i]
		wasRunning := w.State == workermanager.StateRunning
		gone, err := s.scanWorker(ctx, ps, w)
		if err != nil {
			return stopped, err
		}
		if gone {
			if wasRunning {
				ps.running -= w.Capacity
			}
			stopped++
		}
	}
	return stopped, nil
}

// poolScan is one pass over a pool's workers.
type poolScan struct {
	pool *workermanager.Pool
	// seen holds the queue's records of the pool's workers.
	seen map[string]*store.Worker
	// held holds the runs the pool's workers hold in the queue, by worker.
	held        map[string][]store.HeldRun
	lifecycle   workermanager.Lifecycle
	minCapacity int
	// running is the capacity of the pool's running workers, less those
	// the pass has stopped.
	running int
}

// poolWorkers lists every worker of the pool.
func (s *WorkerScanner) poolWorkers(ctx context.Context, poolID string) ([]workermanager.Worker, error) {
	var workers []workermanager.Worker
	page := store.Page{}
	for {
		ws, next, err := s.Store.ListPoolWorkers(ctx, store.PoolWorkerFilter{WorkerPoolID: poolID}, page)
		if err != nil {
			return nil, err
		}
		workers = append(workers, ws...)
		if next == "" {
			return workers, nil
		}
		page.ContinuationToken = next
	}
}

// scanWorker settles one worker: one stopping is stopped for good, one
// its engine no longer runs is stopped (an error recorded unless it ended
// cleanly), and one past its lifecycle's limits is removed. It reports
// whether it stopped the worker in this pass.
func (s *WorkerScanner) scanWorker(ctx context.Context, ps *poolScan, w *workermanager.Worker) (bool, error) {
	log := logger(s.Logger)
	now := s.Clock.Now()
	prov, dynamic := s.Providers[w.ProviderID]
	if w.State == workermanager.StateStopped || w.State == workermanager.StateStopping {
		// Whatever stopped the worker, the runs it still holds are resolved
		// here too: the call that stopped it may have ended before it
		// resolved them (a replica killed inside removeWorker), and a
		// claim that was in flight as it stopped may have landed since.
		if err := s.resolveHeld(ctx, ps, w); err != nil {
			return false, err
		}
	}
	switch w.State {
	case workermanager.StateStopped:
		return false, nil // expiry deletes it (ExpireWorkerManager)
	case workermanager.StateStopping:
		if dynamic {
			if err := prov.Provider.Stop(ctx, ps.pool, w); err != nil {
				log.Warn("stopping a worker", "worker", w.Key().String(), "error", err)
				return false, nil
			}
		}
		return false, s.markStopped(ctx, w, "")
	}
	if dynamic {
		st, err := prov.Provider.Check(ctx, ps.pool, w)
		if err != nil {
			// The engine cannot be reached: say so once a pass, keep the
			// worker counted (it may still run).
			reportPoolError(ctx, s.Store, s.ErrorEvents, log, now, ps.pool, "provider-error", "Could not check a worker", err.Error(), w)
			return false, nil
		}
		if st.NotStarted && w.State == workermanager.StateRequested {
			// Its start is under way (the provisioner records a worker
			// before starting it) or its provisioner died first: its
			// registration deadline decides, below. Judging it dead now
			// stopped a worker whose container then started unaccounted.
		} else if !st.Running {
			quiet := st.Exited && st.ExitCode == 0 && w.State == workermanager.StateRunning
			if !quiet {
				reportPoolError(ctx, s.Store, s.ErrorEvents, log, now, ps.pool, "worker-died", "A worker stopped unexpectedly", st.Detail, w)
			}
			if err := s.stop(ctx, ps.pool, prov, w, "worker container is no longer running: "+st.Detail); err != nil {
				return false, err
			}
			return true, nil
		}
	}
	act, err := s.activity(ctx, w, ps.seen)
	if err != nil {
		return false, err
	}
	providerType := workermanager.ProviderTypeStatic
	if dynamic {
		providerType = prov.Type
	}
	keep := w.State == workermanager.StateRunning && ps.running-w.Capacity < ps.minCapacity
	v := workermanager.Scan(w, providerType, ps.lifecycle, act, keep, now)
	if !v.Remove {
		return false, nil
	}
	if w.State == workermanager.StateRequested {
		reportPoolError(ctx, s.Store, s.ErrorEvents, log, now, ps.pool, "registration-timeout", "A worker did not register in time", v.Reason, w)
	}
	if dynamic {
		err = s.stop(ctx, ps.pool, prov, w, v.Reason)
	} else {
		err = s.markStopped(ctx, w, v.Reason)
	}
	if err != nil {
		return false, err
	}
	log.Info("worker stopped", "worker", w.Key().String(), "reason", v.Reason)
	return true, nil
}

// queueWorkers reads the queue's records of a pool's workers, one
// listing for the whole pool, by worker.
func (s *WorkerScanner) queueWorkers(ctx context.Context, poolID string) (map[string]*store.Worker, error) {
	out := map[string]*store.Worker{}
	page := store.Page{}
	for {
		ws, next, err := s.Store.ListWorkers(ctx, s.Clock.Now(), store.WorkerFilter{TaskQueueID: poolID}, page)
		if err != nil {
			return nil, fmt.Errorf("listing the queue's workers of %s: %w", poolID, err)
		}
		for i := range ws {
			out[ws[i].WorkerGroup+"/"+ws[i].WorkerID] = &ws[i]
		}
		if next == "" {
			return out, nil
		}
		page.ContinuationToken = next
	}
}

// heldRuns lists the runs the pool's workers hold, by worker.
func (s *WorkerScanner) heldRuns(ctx context.Context, poolID string) (map[string][]store.HeldRun, error) {
	runs, err := s.Store.ListHeldRuns(ctx, store.HeldRunsQuery{TaskQueueID: poolID}, s.Clock.Now())
	if err != nil {
		return nil, fmt.Errorf("listing the runs held in %s: %w", poolID, err)
	}
	out := map[string][]store.HeldRun{}
	for _, r := range runs {
		k := r.Worker.WorkerGroup + "/" + r.Worker.WorkerID
		out[k] = append(out[k], r)
	}
	return out, nil
}

// resolveHeld resolves the runs a stopped or stopping worker still holds.
func (s *WorkerScanner) resolveHeld(ctx context.Context, ps *poolScan, w *workermanager.Worker) error {
	runs := ps.held[w.WorkerGroup+"/"+w.WorkerID]
	if len(runs) == 0 || s.Resolver == nil {
		return nil
	}
	key := store.WorkerKey{TaskQueueID: w.WorkerPoolID, WorkerGroup: w.WorkerGroup, WorkerID: w.WorkerID}
	n, err := s.Resolver.resolve(ctx, key, runs, s.Clock.Now())
	if err != nil {
		return err
	}
	if n > 0 {
		logger(s.Logger).Info("resolved the runs a stopped worker still held exception/worker-shutdown", "worker", w.Key().String(), "state", string(w.State), "runs", n)
	}
	return nil
}

// activity is what the worker last did: when it last held a claimed run
// (a run it holds now counts as now). The queue's lastDateActive moves
// with every claimWork poll, so an idle worker is told by its work, not
// its polls.
func (s *WorkerScanner) activity(ctx context.Context, w *workermanager.Worker, seen map[string]*store.Worker) (workermanager.Activity, error) {
	now := s.Clock.Now()
	qw, ok := seen[w.WorkerGroup+"/"+w.WorkerID]
	if !ok {
		return workermanager.Activity{}, nil
	}
	act := workermanager.Activity{FirstClaim: qw.FirstClaim}
	if len(qw.RecentTasks) == 0 {
		act.FirstClaim = time.Time{}
		return act, nil
	}
	last := qw.RecentTasks[len(qw.RecentTasks)-1]
	t, err := s.Store.GetTask(ctx, last.TaskID)
	if errors.Is(err, store.ErrNotFound) {
		return act, nil
	}
	if err != nil {
		return act, fmt.Errorf("reading task %s: %w", last.TaskID, err)
	}
	if last.RunID < len(t.Runs) {
		r := t.Runs[last.RunID]
		switch {
		case r.State == queue.StateRunning && r.WorkerID == w.WorkerID && r.WorkerGroup == w.WorkerGroup:
			act.LastDateActive = now
		case r.Resolved != nil:
			act.LastDateActive = r.Resolved.Time
		case r.Started != nil:
			act.LastDateActive = r.Started.Time
		}
	}
	return act, nil
}

// stop removes what runs a dynamic worker and marks it stopped.
func (s *WorkerScanner) stop(ctx context.Context, pool *workermanager.Pool, prov PoolProvider, w *workermanager.Worker, reason string) error {
	if err := prov.Provider.Stop(ctx, pool, w); err != nil {
		logger(s.Logger).Warn("stopping a worker", "worker", w.Key().String(), "error", err)
	}
	return s.markStopped(ctx, w, reason)
}

// markStopped records a worker stopped, resolves its claimed runs and
// announces its removal.
func (s *WorkerScanner) markStopped(ctx context.Context, w *workermanager.Worker, reason string) error {
	now := s.Clock.Now()
	updated, err := s.Store.UpdatePoolWorker(ctx, w.Key(), func(w *workermanager.Worker) error {
		w.Stopped(now)
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.Resolver != nil {
		if _, err := s.Resolver.ResolveWorkerRuns(ctx, store.WorkerKey{TaskQueueID: w.WorkerPoolID, WorkerGroup: w.WorkerGroup, WorkerID: w.WorkerID}, now); err != nil {
			return err
		}
	}
	if s.Events != nil {
		if reason != "" {
			s.Events(ctx, "worker-removed", updated, reason, now)
		}
		s.Events(ctx, "worker-stopped", updated, "", now)
	}
	return nil
}
