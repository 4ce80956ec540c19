package api

import (
	"context"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/store"
)

// touchFlushDelay is how long a worker's routine bookkeeping waits to be
// written with others' in one transaction.
const touchFlushDelay = time.Second

// touches collects claimWork's bookkeeping (the worker and its task queue
// seen at a time) and writes it in batches: an idle fleet of thousands of
// workers re-polling costs a transaction a second, not two commits a poll.
type touches struct {
	flushing sync.Mutex // one flush at a time; later ones take what is left
	mu       sync.Mutex
	pending  map[store.WorkerKey]time.Time
	timer    *time.Timer
}

// touchWorker records the worker and its task queue as seen, at most once
// per touchInterval per process, in the next batch (touchFlushDelay): an
// idle poll waits for no write. (Each claim reads the worker's quarantine
// afresh, so one set through another replica applies at once.)
func (s *Server) touchWorker(key store.WorkerKey, now time.Time) {
	if last, seen := s.touched.Load(key); seen && now.Sub(last.(time.Time)) < touchInterval {
		return
	}
	s.touched.Store(key, now)
	s.touches.add(key, now, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.flushTouches(ctx); err != nil {
			s.log.Warn("recording workers as seen", "error", err)
		}
	})
}

// recordNewWorker records the recent tasks of a claim made before the
// worker's first record was written (its touch still queued): the record
// is written now, then the tasks.
func (s *Server) recordNewWorker(ctx context.Context, key store.WorkerKey, res *store.ClaimResult) {
	if !res.WorkerUnknown || len(res.Claims) == 0 {
		return
	}
	if err := s.flushTouches(ctx); err != nil {
		s.log.Warn("recording workers as seen", "error", err)
		return
	}
	recent := make([]store.RecentTask, len(res.Claims))
	for i, cl := range res.Claims {
		recent[i] = store.RecentTask{TaskID: cl.Task.TaskID, RunID: cl.RunID}
	}
	if err := s.store.AddRecentTasks(ctx, key, recent); err != nil {
		s.log.Warn("recording recent tasks", "error", err)
	}
}

// add queues a touch; the first queued arms a flush after touchFlushDelay.
func (t *touches) add(key store.WorkerKey, now time.Time, flush func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending == nil {
		t.pending = map[store.WorkerKey]time.Time{}
	}
	t.pending[key] = now
	if t.timer == nil {
		t.timer = time.AfterFunc(touchFlushDelay, flush)
	}
}

// take empties the queue.
func (t *touches) take() map[store.WorkerKey]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.pending
	t.pending = nil
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	return p
}

// flushTouches writes every queued touch in one transaction. A caller
// that arrives while another flush runs waits for it and then writes
// what queued up meanwhile (usually its own touch with many others).
func (s *Server) flushTouches(ctx context.Context) error {
	s.touches.flushing.Lock()
	defer s.touches.flushing.Unlock()
	pending := s.touches.take()
	if len(pending) == 0 {
		return nil
	}
	workers := make([]store.TouchWorkerParams, 0, len(pending))
	queues := make([]store.TouchTaskQueueParams, 0, 1)
	seenQueue := map[string]bool{}
	for key, at := range pending {
		workers = append(workers, store.TouchWorkerParams{Key: key, Now: at, Expires: at.Add(workerRecordLifetime)})
		if !seenQueue[key.TaskQueueID] {
			seenQueue[key.TaskQueueID] = true
			queues = append(queues, store.TouchTaskQueueParams{TaskQueueID: key.TaskQueueID, Now: at, Expires: at.Add(taskQueueRecordLifetime)})
		}
	}
	if err := s.store.TouchMany(ctx, queues, workers); err != nil {
		// Put them back for the next flush, unless newer ones came.
		s.touches.mu.Lock()
		for key, at := range pending {
			if _, ok := s.touches.pending[key]; !ok {
				if s.touches.pending == nil {
					s.touches.pending = map[store.WorkerKey]time.Time{}
				}
				s.touches.pending[key] = at
			}
		}
		s.touches.mu.Unlock()
		return err
	}
	return nil
}

// settleTouches writes the queued touches before a read of task queues or
// workers, so that a reply shows every claimWork this process served.
func (s *Server) settleTouches(ctx context.Context) {
	if err := s.flushTouches(ctx); err != nil {
		s.log.Warn("recording workers as seen", "error", err)
	}
}
