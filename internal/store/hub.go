package store

import "sync"

// Hub tells the claimWork calls waiting on a task queue in this process
// that runs became pending there. It wakes as many waiters as it takes to
// claim the runs made pending, longest-waiting first, not every waiter: a woken waiter claims,
// and waking all of them for one task would cost one empty claim
// transaction per extra waiter. Two rules keep that from stranding work:
// a waiter that leaves holding a wake-up it did not act on passes it on,
// and a claim that took as many runs as it asked for wakes the next waiter
// (there may be more; see ClaimWork).
type Hub struct {
	mu     sync.Mutex
	queues map[string]*waiters
}

// waiters are one task queue's subscribers, oldest first.
type waiters struct {
	list []*waiter
}

type waiter struct {
	ch       chan struct{} // holds at most one wake-up
	capacity int           // runs the waiter claims at once
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{queues: map[string]*waiters{}} }

// Subscribe registers a waiter on a task queue that claims up to capacity
// runs when woken. The channel receives a value when the waiter is woken;
// cancel unsubscribes, passing on a wake-up received but not taken from
// the channel.
func (h *Hub) Subscribe(taskQueueID string, capacity int) (<-chan struct{}, func()) {
	w := &waiter{ch: make(chan struct{}, 1), capacity: max(capacity, 1)}
	h.mu.Lock()
	q := h.queues[taskQueueID]
	if q == nil {
		q = &waiters{}
		h.queues[taskQueueID] = q
	}
	q.list = append(q.list, w)
	h.mu.Unlock()
	var once sync.Once
	return w.ch, func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if q := h.queues[taskQueueID]; q != nil {
				for i, other := range q.list {
					if other == w {
						q.list = append(q.list[:i], q.list[i+1:]...)
						break
					}
				}
				if len(q.list) == 0 {
					delete(h.queues, taskQueueID)
				}
			}
			select {
			case <-w.ch: // woken but leaving: someone else takes the work
				h.wakeLocked(taskQueueID, 1)
			default:
			}
		})
	}
}

// Notify tells that n runs became pending in the task queue: it wakes
// waiters not already woken, longest-waiting first, until their capacities
// add up to n.
func (h *Hub) Notify(taskQueueID string, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wakeLocked(taskQueueID, n)
}

// NotifyAll wakes every waiter of every task queue: for when wake-ups may
// have been missed (a database listener that reconnected).
func (h *Hub) NotifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, q := range h.queues {
		for _, w := range q.list {
			select {
			case w.ch <- struct{}{}:
			default:
			}
		}
	}
}

func (h *Hub) wakeLocked(taskQueueID string, n int) {
	q := h.queues[taskQueueID]
	if q == nil || n <= 0 {
		return
	}
	var woken, rest []*waiter
	for _, w := range q.list {
		if n > 0 {
			select {
			case w.ch <- struct{}{}:
				woken = append(woken, w)
				n -= w.capacity
				continue
			default: // already holds a wake-up
			}
		}
		rest = append(rest, w)
	}
	// Woken waiters go to the back: if one claims nothing and waits again,
	// the next wake-up goes to another.
	q.list = append(rest, woken...)
}
