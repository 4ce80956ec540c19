package live

import (
	"encoding/json"
	"sync"

	"github.com/hopper-ci/hopper/internal/events"
)

// The fan-out to this process's streams. An event is encoded once, for
// every stream it goes to (frame), and each stream has a bounded buffer of
// frames. Publishing never waits for a stream: one whose buffer is full is
// dropped, and told so, so it reconnects and re-reads what it shows from
// the API, rather than slowing the queue that publishes or silently
// missing events. With 2,000 streams open, each encoding every event for
// itself halved the rate of task creation.

// streamBuffer is how many events a stream may fall behind before it is
// dropped.
const streamBuffer = 256

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

// subscription is one stream's place in the fan-out.
type subscription struct {
	frames chan *frame
	filter events.Filter
	// overflow is closed when the stream fell streamBuffer events behind;
	// it gets nothing more.
	overflow chan struct{}
	dropOnce sync.Once
}

func (s *subscription) drop() {
	s.dropOnce.Do(func() { close(s.overflow) })
}

type fanout struct {
	mu     sync.RWMutex
	subs   map[*subscription]struct{}
	closed bool
}

func newFanout() *fanout { return &fanout{subs: map[*subscription]struct{}{}} }

// publish hands msgs to every stream whose filter selects them, without
// waiting for any.
func (f *fanout) publish(msgs []events.Message) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed || len(f.subs) == 0 {
		return
	}
	for _, m := range msgs {
		fr := &frame{msg: m}
		for s := range f.subs {
			if s.filter != nil && !s.filter(m) {
				continue
			}
			select {
			case <-s.overflow:
				// Dropped already: it is leaving.
			case s.frames <- fr:
			default:
				s.drop()
			}
		}
	}
}

// subscribe adds a stream; cancel removes it and closes its frames.
func (f *fanout) subscribe(filter events.Filter) (*subscription, func()) {
	s := &subscription{frames: make(chan *frame, streamBuffer), filter: filter, overflow: make(chan struct{})}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		close(s.frames)
		return s, func() {}
	}
	f.subs[s] = struct{}{}
	return s, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.subs[s]; ok {
			delete(f.subs, s)
			close(s.frames)
		}
	}
}

func (f *fanout) count() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.subs)
}

// close ends every stream (their frames close).
func (f *fanout) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.closed = true
	for s := range f.subs {
		delete(f.subs, s)
		close(s.frames)
	}
}
