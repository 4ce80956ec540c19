package store

import "sync"

// Hub fans out "a run became pending in task queue Q" to the claimWork calls
// waiting on Q in this process. Notifications coalesce: a waiter that has
// not yet consumed its signal gets no second one.
type Hub struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{subs: map[string]map[chan struct{}]struct{}{}} }

// Subscribe registers interest in a task queue.
func (h *Hub) Subscribe(taskQueueID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	set := h.subs[taskQueueID]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		h.subs[taskQueueID] = set
	}
	set[ch] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.subs[taskQueueID], ch)
			if len(h.subs[taskQueueID]) == 0 {
				delete(h.subs, taskQueueID)
			}
			h.mu.Unlock()
		})
	}
}

// Notify wakes every subscriber of the task queue.
func (h *Hub) Notify(taskQueueID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[taskQueueID] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
