package store

import (
	"sync"
	"sync/atomic"
	"time"
)

// Hub tells the claimWork calls waiting on a task queue in this process
// that runs became pending there. It wakes as many waiters as it takes to
// claim the runs made pending, longest-waiting first, not every waiter: a woken waiter claims,
// and waking all of them for one task would cost one empty claim
// transaction per extra waiter. Two rules keep that from stranding work:
// a waiter that leaves holding a wake-up it did not act on passes it on,
// and a claim that took as many runs as it asked for wakes the next waiter
// (there may be more; see ClaimWork).
//
// The hub also remembers, per task queue with waiters, that the queue is
// known to be empty: a claim found fewer runs than it asked for and no
// notification came since it began. An idle fleet's claimWork calls then
// wait without touching the database at all (ClaimWorkParams.SkipKnownEmpty),
// and one backup timer per queue, not one per waiter, covers a wake-up
// that was lost.
type Hub struct {
	mu     sync.Mutex
	queues map[string]*waiters
	// backupEvery is how often a queue with waiters forgets that it is
	// empty and wakes one waiter to look (DefaultHubBackup).
	backupEvery time.Duration
	// observers are told of every announcement (OnPending).
	observers atomic.Pointer[[]func(taskQueueID string)]
}

// DefaultHubBackup is how often a task queue with waiters has one of them
// look for work it was not woken for: a process that died between its
// commit and its announcement, a woken call that failed before claiming.
// A listener that reconnects wakes the queues itself.
const DefaultHubBackup = 5 * time.Second

// waiters are one task queue's subscribers, oldest first, in a list
// linked through the waiters themselves: a fleet of thousands on one queue
// joins, leaves and is woken in constant time per waiter, with no slice to
// scan or copy.
type waiters struct {
	first, last *waiter
	// generation counts the notifications of this queue; empty is set by a
	// claim that found the queue drained, if none came since it began.
	generation uint64
	empty      bool
	backup     *time.Timer
	// exact says this process knows every run pending in the queue: it was
	// known to be empty, and every run made pending since came with its
	// task's state (NotifyOffers). offers are those runs not yet handed to
	// a claim, highest priority first, then oldest (handover.go).
	exact  bool
	offers []offer
	// reserved counts waiters out of the list while a create claims runs
	// for them (direct.go); the queue's entry stays while any are.
	reserved int
}

type waiter struct {
	ch         chan struct{} // holds at most one wake-up
	capacity   int           // runs the waiter claims at once
	woken      func()        // if set, called (in a goroutine of its own) when a wake-up is put in ch
	prev, next *waiter

	// A waiter with a claimant may have runs claimed for it by a create
	// while it is armed (direct.go).
	claimant *Claimant
	armed    bool
	noDirect bool          // a create's claim for it failed: it claims for itself
	reserved chan struct{} // set while a create claims for it; closed when that settles
	claimed  *ClaimResult  // runs claimed for it, not yet taken
}

// push appends w to the back of the list.
func (q *waiters) push(w *waiter) {
	w.prev, w.next = q.last, nil
	if q.last != nil {
		q.last.next = w
	} else {
		q.first = w
	}
	q.last = w
}

// remove unlinks w, which is in the list.
func (q *waiters) remove(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.first = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.last = w.prev
	}
	w.prev, w.next = nil, nil
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{queues: map[string]*waiters{}, backupEvery: DefaultHubBackup} }

// Subscribe registers a waiter on a task queue that claims up to capacity
// runs when woken. The channel receives a value when the waiter is woken;
// cancel unsubscribes, passing on a wake-up received but not taken from
// the channel.
func (h *Hub) Subscribe(taskQueueID string, capacity int) (<-chan struct{}, func()) {
	return h.SubscribeFunc(taskQueueID, capacity, nil)
}

// SubscribeFunc is Subscribe for a waiter that has no goroutine of its own
// blocked on the channel: woken, if not nil, is started in a new goroutine
// each time a wake-up is put in the channel.
func (h *Hub) SubscribeFunc(taskQueueID string, capacity int, woken func()) (<-chan struct{}, func()) {
	wt := h.Wait(taskQueueID, capacity, nil, woken)
	return wt.C, func() { wt.Leave() }
}

// subscribe adds a waiter to the back of the queue's list.
func (h *Hub) subscribe(taskQueueID string, w *waiter) *waiters {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.queues[taskQueueID]
	if q == nil {
		q = &waiters{}
		h.queues[taskQueueID] = q
		q.backup = time.AfterFunc(h.backupEvery, func() { h.backup(taskQueueID, q) })
	}
	q.push(w)
	return q
}

// leave unsubscribes w from q, once any claim a create is making for it
// has settled. It returns the runs claimed for w that it had not taken;
// otherwise a wake-up w received but did not act on is passed on.
func (h *Hub) leave(taskQueueID string, q *waiters, w *waiter) *ClaimResult {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w.reserved != nil {
		settled := w.reserved
		h.mu.Unlock()
		<-settled
		h.mu.Lock()
	}
	// w is in q until now, so q is still the queue's list.
	q.remove(w)
	if q.first == nil && q.reserved == 0 {
		q.backup.Stop()
		delete(h.queues, taskQueueID)
	}
	if claimed := w.claimed; claimed != nil {
		w.claimed = nil
		select {
		case <-w.ch: // the wake-up that came with them
		default:
		}
		return claimed
	}
	select {
	case <-w.ch: // woken but leaving: someone else takes the work
		if h.wakeLocked(taskQueueID, 1) > 0 {
			h.forgetEmptyLocked(taskQueueID)
		}
	default:
	}
	return nil
}

// Notify tells that n runs became pending in the task queue: it wakes
// waiters not already woken, longest-waiting first, until their capacities
// add up to n.
//
// A queue known to be empty stays so when the waiters woken can take every
// run announced: those runs are theirs to claim, and a claimWork arriving
// meanwhile (SkipKnownEmpty) waits rather than racing them to the runs,
// which cost one empty claim transaction per run announced when workers
// came back for more as fast as tasks were created. The woken calls look
// whatever the mark says (ClaimWorkParams.Woken).
func (h *Hub) Notify(taskQueueID string, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if q := h.queues[taskQueueID]; q != nil {
		// Runs of unknown tasks: claims look in the database again.
		q.exact, q.offers = false, nil
	}
	if h.wakeLocked(taskQueueID, n) > 0 {
		h.forgetEmptyLocked(taskQueueID)
	}
}

// forgetEmpty clears the queue's empty mark: a woken call that did not
// claim (an error, a quarantine) may have left runs it was woken for.
func (h *Hub) forgetEmpty(taskQueueID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.forgetEmptyLocked(taskQueueID)
}

func (h *Hub) forgetEmptyLocked(taskQueueID string) {
	if q := h.queues[taskQueueID]; q != nil {
		q.empty, q.exact, q.offers = false, false, nil
	}
}

// NotifyAll is for when wake-ups may have been missed (a database
// listener that reconnected): every task queue forgets that it is empty
// and its longest-waiting waiter looks. A claim that takes all it asked
// for wakes the next (ClaimWork), so a queue with many runs is still
// drained by all its waiters, and an empty one costs one claim, not one
// per waiter.
func (h *Hub) NotifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range h.queues {
		h.wakeLocked(id, 1)
		h.forgetEmptyLocked(id)
	}
}

// backup is the queue's backup timer: as NotifyAll, for one queue, then
// again after backupEvery while the queue has waiters.
func (h *Hub) backup(taskQueueID string, q *waiters) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.queues[taskQueueID] != q {
		return // every waiter left; a new subscriber made a new timer
	}
	h.wakeLocked(taskQueueID, 1)
	q.empty, q.exact, q.offers = false, false, nil
	q.backup.Reset(h.backupEvery)
}

// knownEmpty returns the queue's notification count, and whether a claim
// found it empty since the last notification.
func (h *Hub) knownEmpty(taskQueueID string) (generation uint64, empty bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if q := h.queues[taskQueueID]; q != nil {
		return q.generation, q.empty
	}
	return 0, false
}

// markEmpty records that a claim which began at generation found the
// queue drained; a notification since then makes it moot. A queue without
// waiters keeps no such knowledge. Drained, the queue's pending runs are
// known exactly (none) until a run of a task this process does not know
// is announced.
func (h *Hub) markEmpty(taskQueueID string, generation uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if q := h.queues[taskQueueID]; q != nil && q.generation == generation {
		q.empty, q.exact, q.offers = true, true, nil
	}
}

// wakeLocked wakes waiters not already woken, longest-waiting first, until
// their capacities add up to n, and returns how many of the n runs no
// waiter was woken for. The caller decides whether the queue is still
// known to be empty.
func (h *Hub) wakeLocked(taskQueueID string, n int) (uncovered int) {
	q := h.queues[taskQueueID]
	if q == nil || n <= 0 {
		return n
	}
	q.generation++
	// Woken waiters go to the back: if one claims nothing and waits again,
	// the next wake-up goes to another.
	var woken []*waiter
	for w := q.first; w != nil && n > 0; {
		next := w.next
		select {
		case w.ch <- struct{}{}:
			q.remove(w)
			w.armed = false // it claims for itself now
			woken = append(woken, w)
			n -= w.capacity
			if w.woken != nil {
				go w.woken()
			}
		default: // already holds a wake-up
		}
		w = next
	}
	for _, w := range woken {
		q.push(w)
	}
	return max(n, 0)
}

// OnPending registers f to be told the task queue of every run made
// pending that this process learns of: its own, once committed, and,
// where the driver relays them (PostgreSQL's NOTIFY), other processes'.
// f is called with "" when announcements may have been missed (a
// listener that reconnected). Unlike a claimWork waiter, an observer
// is told of every announcement, whoever is waiting: the Worker Manager's
// provisioner, which holds its lease on one replica only, wakes on
// whichever replica a task became pending. f runs on the announcing
// goroutine and must not block.
func (h *Hub) OnPending(f func(taskQueueID string)) {
	for {
		old := h.observers.Load()
		var next []func(string)
		if old != nil {
			next = append(next, *old...)
		}
		next = append(next, f)
		if h.observers.CompareAndSwap(old, &next) {
			return
		}
	}
}

// Announced tells the observers (OnPending) that runs became pending in
// the task queue ("": perhaps in any). The store calls it after each
// commit that made runs pending; a driver calls it for other processes'
// announcements.
func (h *Hub) Announced(taskQueueID string) {
	if obs := h.observers.Load(); obs != nil {
		for _, f := range *obs {
			f(taskQueueID)
		}
	}
}
