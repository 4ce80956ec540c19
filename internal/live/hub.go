// Package live feeds hopper's web UI by push: a server-sent event stream
// (GET /api/live/v1/events) of the queue's task events, the same messages
// the Pulse exchanges carry, taken from the in-process events.Bus.
//
// Across replicas on PostgreSQL a Relay carries every event to every
// replica with LISTEN/NOTIFY, so a browser connected to one replica sees
// tasks another replica resolved. The relay costs nothing while nobody
// watches: a replica with stream subscribers says so on the channel (at
// once, then every InterestEvery), and replicas relay their events only
// while such interest is fresh. Events are best effort, as on Pulse: a
// browser re-reads the API when its stream reconnects, and the UI re-reads
// from time to time besides.
package live

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hopper-ci/hopper/internal/events"
)

// Hub is the live feed of one process: the local bus the streams read, and
// optionally a relay to and from other replicas. It is an
// events.Publisher for the queue's event publisher.
type Hub struct {
	streams *ring
	relay   *Relay
	now     func() time.Time
	// remoteInterest is when another replica last said it has
	// subscribers (Unix nanoseconds).
	remoteInterest atomic.Int64
}

// NewHub returns a hub with its own bus and no relay.
func NewHub() *Hub {
	return &Hub{streams: newRing(), now: time.Now}
}

// Publish implements events.Publisher: msgs go to this process's streams
// and, while some replica watches, to the others through the relay.
func (h *Hub) Publish(ctx context.Context, msgs ...events.Message) error {
	h.streams.publish(msgs)
	if h.relay != nil && h.remoteWanted() {
		h.relay.send(msgs)
	}
	return nil
}

// Wanted reports whether anyone, here or on another replica, reads the
// feed; the queue's event publisher skips building messages otherwise.
func (h *Hub) Wanted() bool {
	return h.streams.count() > 0 || h.remoteWanted()
}

func (h *Hub) remoteWanted() bool {
	last := h.remoteInterest.Load()
	return last != 0 && h.now().Sub(time.Unix(0, last)) < interestTTL
}

// subscribe adds a reader of the feed at its head (nil once the hub is
// closed); unsubscribe removes it. Other replicas hear of the new
// subscriber at once.
func (h *Hub) subscribe() *cursor {
	c := h.streams.subscribe()
	if c != nil && h.relay != nil {
		h.relay.announceInterest()
	}
	return c
}

func (h *Hub) unsubscribe() { h.streams.unsubscribe() }

// Subscribe returns a channel of the messages filter selects and a
// function that ends the subscription (for tests and tools; streams read
// the ring themselves). The channel closes when the subscriber falls
// behind, or the hub closes.
func (h *Hub) Subscribe(filter events.Filter) (<-chan events.Message, func()) {
	out := make(chan events.Message, 256)
	c := h.subscribe()
	if c == nil {
		close(out)
		return out, func() {}
	}
	stop := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(out)
		var (
			runs   []*run
			frames []*frame
			lost   bool
			more   <-chan struct{}
		)
		for {
			runs, lost, more = h.streams.read(c, runs[:0])
			if lost {
				return
			}
			frames = frames[:0]
			for _, r := range runs {
				frames = append(frames, r.frames...)
			}
			clear(runs)
			for _, f := range frames {
				if filter != nil && !filter(f.msg) {
					continue
				}
				select {
				case out <- f.msg:
				case <-stop:
					return
				}
			}
			clear(frames)
			select {
			case <-more:
			case <-stop:
				return
			case <-h.streams.done:
				return
			}
		}
	}()
	return out, func() { once.Do(func() { close(stop); h.unsubscribe() }) }
}

// Close ends every stream (their channels close), so that a server
// shutting down is not held up by open browsers.
func (h *Hub) Close() error {
	h.streams.close()
	return nil
}

// Subscribers returns the number of open subscriptions in this process.
func (h *Hub) Subscribers() int { return h.streams.count() }

// publishRemote delivers messages relayed from another replica to this
// process's streams only.
func (h *Hub) publishRemote(msgs []events.Message) {
	h.streams.publish(msgs)
}

func (h *Hub) noteRemoteInterest() { h.remoteInterest.Store(h.now().UnixNano()) }
