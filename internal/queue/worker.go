package queue

import "time"

// WorkerLoad is what the queue can truthfully say of a worker: whether it
// is online, how many tasks it runs at once and how many it runs now.
type WorkerLoad struct {
	Online bool
	// Capacity is the most tasks the worker asked for in one claimWork
	// since it came online (an idle worker asks for all its slots), and at
	// least Busy; 0 when it never asked.
	Capacity int
	// Busy is how many runs it holds now: running on it, their claims not
	// run out.
	Busy int
}

// LoadOf judges a worker from when it was last seen (claimWork or
// reclaimTask), the most tasks it asked for at once (0: unknown) and how
// many runs it holds now.
//
// A worker seen within window (an idle worker asks again at least every
// long-poll) is online. So is one that holds a run, however long ago it
// asked: a worker whose slots are all busy does not ask, it reclaims each
// run before its claim runs out. A worker that stopped holds nothing once
// it resolved its runs (hopper's worker and generic-worker resolve them on
// shutdown) or, if it died, once their claims ran out: it then looks
// offline, never busy.
func LoadOf(lastSeen time.Time, capacity, held int, now time.Time, window time.Duration) WorkerLoad {
	return WorkerLoad{
		Online:   held > 0 || (!lastSeen.IsZero() && now.Sub(lastSeen) <= window),
		Capacity: max(capacity, held),
		Busy:     held,
	}
}
