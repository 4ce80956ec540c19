package queueapi

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/store"
)

// touchFlushDelay is how long a worker's routine bookkeeping waits to be
// written with others' in one transaction.
const touchFlushDelay = time.Second

// touches collects claimWork's bookkeeping (the worker and its task queue
// seen at a time, the runs the worker claimed) and writes it in batches:
// an idle fleet of thousands of workers re-polling costs a transaction a
// second, not two commits a poll, and a busy worker's recent tasks are
// written once a second, not once a claim.
type touches struct {
	flushing sync.Mutex // one flush at a time; later ones take what is left
	mu       sync.Mutex
	pending  map[store.WorkerKey]touch
	recent   map[store.WorkerKey][]store.RecentTask
	timer    *time.Timer
}

// touch is a worker seen at a time, asking for a number of tasks (0: a
// reclaim, which asks for none).
type touch struct {
	at    time.Time
	asked int
}

// touchWorker records the worker and its task queue as seen, asking for
// asked tasks, at most once per touchInterval per process unless it asks
// for more than when last recorded (a worker's capacity is the most it
// asked for), in the next batch (touchFlushDelay): an idle poll waits for
// no write. (Each claim reads the worker's quarantine afresh, so one set
// through another replica applies at once.)
func (s *Server) touchWorker(key store.WorkerKey, now time.Time, asked int) {
	if v, seen := s.touched.Load(key); seen {
		if last := v.(touch); now.Sub(last.at) < touchInterval && asked <= last.asked {
			return
		}
	}
	s.touched.Store(key, touch{at: now, asked: asked})
	s.touches.add(key, touch{at: now, asked: asked}, s.flushTouchesLater)
}

// recordRecentTasks queues a claim's runs for the worker's recent tasks,
// written with the next batch of touches (after the worker's record, which
// a first claim's touch creates in the same batch).
func (s *Server) recordRecentTasks(key store.WorkerKey, res *store.ClaimResult) {
	if len(res.Claims) == 0 {
		return
	}
	recent := make([]store.RecentTask, len(res.Claims))
	for i, cl := range res.Claims {
		recent[i] = store.RecentTask{TaskID: cl.Task.TaskID, RunID: cl.RunID}
	}
	s.touches.addRecent(key, recent, s.flushTouchesLater)
}

func (s *Server) flushTouchesLater() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.flushTouches(ctx); err != nil {
		s.log.Warn("recording workers as seen", "error", err)
	}
}

// add queues a touch; the first queued arms a flush after touchFlushDelay.
// Of two touches of a worker queued, the later time and the larger ask
// are kept.
func (t *touches) add(key store.WorkerKey, seen touch, flush func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending == nil {
		t.pending = map[store.WorkerKey]touch{}
	}
	t.pending[key] = mergeTouches(t.pending[key], seen)
	t.armLocked(flush)
}

func mergeTouches(a, b touch) touch {
	if b.at.After(a.at) {
		a.at = b.at
	}
	a.asked = max(a.asked, b.asked)
	return a
}

// addRecent queues runs for a worker's recent tasks.
func (t *touches) addRecent(key store.WorkerKey, runs []store.RecentTask, flush func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.recent == nil {
		t.recent = map[store.WorkerKey][]store.RecentTask{}
	}
	t.recent[key] = append(t.recent[key], runs...)
	t.armLocked(flush)
}

func (t *touches) armLocked(flush func()) {
	if t.timer == nil {
		t.timer = time.AfterFunc(touchFlushDelay, flush)
	}
}

// take empties the queue.
func (t *touches) take() (map[store.WorkerKey]touch, map[store.WorkerKey][]store.RecentTask) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, r := t.pending, t.recent
	t.pending, t.recent = nil, nil
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	return p, r
}

// flushTouches writes every queued touch in one transaction. A caller
// that arrives while another flush runs waits for it and then writes
// what queued up meanwhile (usually its own touch with many others).
func (s *Server) flushTouches(ctx context.Context) error {
	s.touches.flushing.Lock()
	defer s.touches.flushing.Unlock()
	pending, recent := s.touches.take()
	if len(pending) == 0 && len(recent) == 0 {
		return nil
	}
	workers := make([]store.TouchWorkerParams, 0, len(pending))
	queues := make([]store.TouchTaskQueueParams, 0, 1)
	seenQueue := map[string]bool{}
	for key, seen := range pending {
		at := seen.at
		workers = append(workers, store.TouchWorkerParams{Key: key, Now: at, Expires: at.Add(workerRecordLifetime), Capacity: seen.asked})
		if !seenQueue[key.TaskQueueID] {
			seenQueue[key.TaskQueueID] = true
			queues = append(queues, store.TouchTaskQueueParams{TaskQueueID: key.TaskQueueID, Now: at, Expires: at.Add(taskQueueRecordLifetime)})
		}
	}
	runs := make([]store.RecentTasksParams, 0, len(recent))
	for key, tasks := range recent {
		runs = append(runs, store.RecentTasksParams{Key: key, Tasks: tasks})
	}
	if err := s.store.TouchMany(ctx, queues, workers, runs); err != nil {
		// Put them back for the next flush: touches merged with newer
		// ones, runs before those claimed since.
		s.touches.mu.Lock()
		for key, seen := range pending {
			if s.touches.pending == nil {
				s.touches.pending = map[store.WorkerKey]touch{}
			}
			s.touches.pending[key] = mergeTouches(s.touches.pending[key], seen)
		}
		for key, tasks := range recent {
			if s.touches.recent == nil {
				s.touches.recent = map[store.WorkerKey][]store.RecentTask{}
			}
			s.touches.recent[key] = append(tasks, s.touches.recent[key]...)
		}
		s.touches.mu.Unlock()
		return err
	}
	return nil
}

// Flush writes the worker bookkeeping still queued (workers and task
// queues seen, runs claimed) at once rather than at the next batch. A
// process that stops calls it once its HTTP server has shut down and
// before its store closes: the last second's claims would otherwise not
// be in the workers' records, and the batch's timer would fire on a
// closed store.
func (s *Server) Flush(ctx context.Context) error {
	if err := s.flushTouches(ctx); err != nil {
		return fmt.Errorf("recording workers as seen: %w", err)
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
