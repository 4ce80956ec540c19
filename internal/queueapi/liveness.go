package queueapi

import (
	"context"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// liveness judges whether workers are online and busy (queue.LoadOf) with
// the queue's settings.
type liveness struct {
	// window is how long after it was last seen a worker is online: an
	// idle worker asks again at least every long-poll, and its record is
	// rewritten at most once per touchInterval (plus a little slack for
	// the batch's delay and the worker's gap between calls).
	window time.Duration
	// holdersSeen is how far back a worker holding a run was last seen:
	// it claimed or reclaimed the run within the claim timeout, and its
	// record says so within touchInterval.
	holdersSeen time.Duration
}

func newLiveness(cfg Config) liveness {
	return liveness{window: cfg.LongPoll + touchInterval + 10*time.Second, holdersSeen: cfg.ClaimTimeout + touchInterval}
}

func defaultLiveness() liveness {
	return newLiveness(Config{LongPoll: DefaultLongPoll, ClaimTimeout: DefaultClaimTimeout})
}

// load judges one worker from its record (nil: none) and the runs it holds.
func (l liveness) load(w *store.Worker, held int, now time.Time) queue.WorkerLoad {
	if w == nil {
		return queue.LoadOf(time.Time{}, 0, held, now, l.window)
	}
	return queue.LoadOf(w.LastDateActive, w.Capacity, held, now, l.window)
}

// heldBy groups held runs by the worker holding them.
func heldBy(runs []store.HeldRun) map[store.WorkerKey][]store.HeldRun {
	out := map[store.WorkerKey][]store.HeldRun{}
	for _, r := range runs {
		out[r.Worker] = append(out[r.Worker], r)
	}
	return out
}

// queueLoad sums the online workers of a task queue.
type queueLoad struct{ online, capacity, busy int }

// queueLoads sums, per task queue, the workers online, their capacity and
// their busy slots: two reads, the workers recently seen and the runs held
// now, whatever the number of queues.
func (l liveness) queueLoads(ctx context.Context, st store.LivenessStore, now time.Time) (map[string]queueLoad, error) {
	seen, err := st.ListWorkersSeen(ctx, now.Add(-max(l.window, l.holdersSeen)))
	if err != nil {
		return nil, err
	}
	runs, err := st.ListHeldRuns(ctx, store.HeldRunsQuery{}, now)
	if err != nil {
		return nil, err
	}
	held := map[store.WorkerKey]int{}
	for _, r := range runs {
		held[r.Worker]++
	}
	out := map[string]queueLoad{}
	add := func(key store.WorkerKey, wl queue.WorkerLoad) {
		if !wl.Online {
			return
		}
		q := out[key.TaskQueueID]
		q.online++
		q.capacity += wl.Capacity
		q.busy += wl.Busy
		out[key.TaskQueueID] = q
	}
	for _, w := range seen {
		add(w.WorkerKey, queue.LoadOf(w.LastDateActive, w.Capacity, held[w.WorkerKey], now, l.window))
		delete(held, w.WorkerKey)
	}
	// Holders without a recent record: a run claimed through claimTask,
	// which records no worker.
	for key, n := range held {
		add(key, queue.LoadOf(time.Time{}, 0, n, now, l.window))
	}
	return out, nil
}
