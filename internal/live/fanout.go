package live

import (
	"context"
	"encoding/json"
	"runtime"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/events"
)

// The fan-out to this process's streams: one ring of recent events shared
// by every stream. Publishing appends to the ring and never waits for a
// stream, whatever their number. At most once per streamPace the ring
// seals what arrived and wakes the streams; each writes what it has not
// sent in one write, and the streams that take every event and were up to
// date share one encoding of it (an event is encoded once, and a sealed
// run of events is joined once, for all of them). A stream that falls so
// far behind that the ring no longer holds what it has yet to send is
// dropped, and told so, so it reconnects and re-reads what it shows from
// the API.
//
// Why sealed at a pace: with 2,000 streams open, writing each event to
// each stream as it came cost 2,000 wake-ups, copies and writes per event,
// and task creation at 20 a second fell to 5; sealed, a stream costs one
// wake-up and one write per streamPace whatever the rate of events.
const (
	// ringFrames and ringBytes bound the ring: the events a stream may
	// fall behind before it is dropped (at streamPace, 16,000 events a
	// second), and the memory they hold.
	ringFrames = 4096
	ringBytes  = 16 << 20
	// streamPace is the shortest time between two seals, so between two
	// writes of events to one stream: a browser sees a change within it.
	streamPace = 250 * time.Millisecond
	// turnHold is the longest a stream holds its turn to write (a write
	// to a client that reads nothing waits far longer: the others go on).
	turnHold = 50 * time.Millisecond
)

// frame is one event as a stream writes it ("data: …\n\n"), encoded on
// first use and shared by every stream that sends it.
type frame struct {
	msg  events.Message
	once sync.Once
	data []byte
}

func (f *frame) bytes() []byte {
	f.once.Do(func() {
		data, err := json.Marshal(StreamEvent{Exchange: f.msg.Exchange, RoutingKey: f.msg.RoutingKey, Payload: f.msg.Body})
		if err != nil {
			return // a body that is not JSON: nothing to send
		}
		f.data = make([]byte, 0, len(data)+8)
		f.data = append(append(append(f.data, "data: "...), data...), "\n\n"...)
	})
	return f.data
}

// cost is what a frame holds in memory once encoded, roughly: the message
// and its encoding.
func (f *frame) cost() int {
	return 2*(len(f.msg.Body)+len(f.msg.RoutingKey)+len(f.msg.Exchange)) + 128
}

// ring holds the last events, numbered: the event numbered seq is
// buf[seq%ringFrames] while tail <= seq < head. Readers read up to sealed,
// a sealed run at a time.
type ring struct {
	mu          sync.Mutex
	buf         []*frame
	tail, head  uint64
	bytes       int
	subscribers int
	// sealed is where readers stop; runs are the runs sealed whose
	// events the ring still holds, oldest first.
	sealed    uint64
	runs      []*run
	lastSeal  time.Time
	sealing   bool                        // a seal is scheduled
	afterFunc func(time.Duration, func()) // time.AfterFunc (tests: at once)
	now       func() time.Time
	// changed is closed (and replaced) when a run is sealed; done is
	// closed when the ring closes.
	changed chan struct{}
	// turns bounds the streams writing at once (turn).
	turns  chan struct{}
	done   chan struct{}
	closed bool
}

// run is the events from..to-1, sealed together; readers of every event
// share its joined encoding (a reader behind writes several runs, never
// copies them), others filter its frames.
type run struct {
	from, to uint64
	frames   []*frame
	once     sync.Once
	data     []byte
}

// bytes is the run's events joined as a stream writes them, built once.
func (r *run) bytes() []byte {
	r.once.Do(func() {
		n := 0
		for _, f := range r.frames {
			n += len(f.bytes())
		}
		r.data = make([]byte, 0, n)
		for _, f := range r.frames {
			r.data = append(r.data, f.bytes()...)
		}
	})
	return r.data
}

func newRing() *ring {
	return &ring{buf: make([]*frame, ringFrames), changed: make(chan struct{}), done: make(chan struct{}),
		turns:     make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2)),
		afterFunc: func(d time.Duration, f func()) { time.AfterFunc(d, f) }, now: time.Now}
}

// publish adds msgs, dropping the oldest events beyond the ring's bounds,
// and has them sealed within streamPace of the last seal. Nothing is kept
// while nobody reads.
func (r *ring) publish(msgs []events.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.subscribers == 0 || len(msgs) == 0 {
		return
	}
	for _, m := range msgs {
		if r.head-r.tail == ringFrames {
			r.evict()
		}
		f := &frame{msg: m}
		r.buf[r.head%ringFrames] = f
		r.head++
		r.bytes += f.cost()
		for r.bytes > ringBytes && r.head-r.tail > 1 {
			r.evict()
		}
	}
	if !r.sealing {
		r.sealing = true
		r.afterFunc(max(0, streamPace-r.now().Sub(r.lastSeal)), r.seal)
	}
}

// seal ends a run at the head and wakes the readers.
func (r *ring) seal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sealing = false
	if r.closed || r.sealed == r.head {
		return
	}
	from := max(r.sealed, r.tail)
	run := &run{from: from, to: r.head, frames: make([]*frame, 0, r.head-from)}
	for seq := from; seq < r.head; seq++ {
		run.frames = append(run.frames, r.buf[seq%ringFrames])
	}
	// Runs that lost events to eviction go: no reader can read them whole.
	i := 0
	for i < len(r.runs) && r.runs[i].from < r.tail {
		r.runs[i] = nil
		i++
	}
	r.runs = append(r.runs[i:], run)
	r.sealed, r.lastSeal = r.head, r.now()
	close(r.changed)
	r.changed = make(chan struct{})
}

// turn waits for a turn to write, among at most half the processors'
// worth of streams, and returns its end. A seal wakes every stream at
// once: 2,000 writing together queued the queue's calls behind 2,000
// goroutines (a call took 37 ms rather than 2 at 20 tasks a second);
// taking turns, the calls run between a few writes at a time. A turn ends
// when the write does, or after turnHold. ok is false when ctx ended first
// or the ring closed.
func (r *ring) turn(ctx context.Context) (end func(), ok bool) {
	select {
	case r.turns <- struct{}{}:
	case <-ctx.Done():
		return nil, false
	case <-r.done:
		return nil, false
	}
	var once sync.Once
	release := func() { once.Do(func() { <-r.turns }) }
	t := time.AfterFunc(turnHold, release)
	return func() { t.Stop(); release() }, true
}

func (r *ring) evict() {
	i := r.tail % ringFrames
	r.bytes -= r.buf[i].cost()
	r.buf[i] = nil
	r.tail++
}

// cursor is one reader's place in the ring: the number of the next event
// it reads.
type cursor struct{ next uint64 }

// subscribe returns a cursor at the last seal, or nil when the ring is
// closed.
func (r *ring) subscribe() *cursor {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.subscribers++
	return &cursor{next: r.sealed}
}

// unsubscribe removes a reader; the last one leaving empties the ring.
func (r *ring) unsubscribe() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.subscribers--
	if r.subscribers == 0 {
		for r.tail < r.head {
			r.evict()
		}
		// What was not sealed yet goes too: the next reader starts here.
		r.sealed = r.head
		clear(r.runs)
		r.runs = r.runs[:0]
	}
}

// read appends to out the sealed runs c has not read and moves c past
// them. lost says events were dropped from the ring before c read them;
// more is closed at the next seal.
func (r *ring) read(c *cursor, out []*run) (runs []*run, lost bool, more <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.next < r.tail {
		return out, true, nil
	}
	if c.next == r.sealed {
		return out, false, r.changed
	}
	// A reader moves a run at a time, so c.next starts one of them.
	i := len(r.runs) - 1
	for i > 0 && r.runs[i].from > c.next {
		i--
	}
	if i < 0 || r.runs[i].from != c.next {
		// Not a run's start (never, but cheap to survive): the events
		// themselves, in a run of their own.
		own := &run{from: c.next, to: r.sealed}
		for seq := c.next; seq < r.sealed; seq++ {
			own.frames = append(own.frames, r.buf[seq%ringFrames])
		}
		c.next = r.sealed
		return append(out, own), false, r.changed
	}
	c.next = r.sealed
	return append(out, r.runs[i:]...), false, r.changed
}

func (r *ring) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.subscribers
}

// close ends every stream (done closes).
func (r *ring) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	r.subscribers = 0
	for r.tail < r.head {
		r.evict()
	}
	r.runs = nil
	close(r.done)
}
