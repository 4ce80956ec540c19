package events

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// DefaultBusBuffer is the number of messages a Bus subscriber may fall
// behind by before it starts losing messages.
const DefaultBusBuffer = 256

// ErrClosed is returned by publishers used after Close.
var ErrClosed = errors.New("events: publisher closed")

// Filter selects the messages a subscriber receives; a nil Filter selects
// every message. Filters run on the publishing goroutine and must be fast.
type Filter func(Message) bool

// Binding returns a filter that selects what an AMQP queue bound to exchange
// with pattern would receive: messages on that exchange (any exchange when
// exchange is "") whose primary routing key or one of whose CC keys matches
// the topic pattern. Live views can therefore accept the same bindings as
// Pulse consumers, e.g. ("task-completed", "primary.<taskId>.#") or
// ("", "route.index.#").
func Binding(exchange, pattern string) Filter {
	return func(m Message) bool {
		if exchange != "" && m.Exchange != exchange {
			return false
		}
		if MatchTopic(pattern, m.RoutingKey) {
			return true
		}
		for _, cc := range m.CC {
			if MatchTopic(pattern, cc) {
				return true
			}
		}
		return false
	}
}

// AnyOf returns a filter selecting the messages at least one of filters
// selects, like a queue with several bindings (which still receives each
// message once).
func AnyOf(filters ...Filter) Filter {
	return func(m Message) bool {
		for _, f := range filters {
			if f == nil || f(m) {
				return true
			}
		}
		return false
	}
}

// BusOptions configures a Bus.
type BusOptions struct {
	// Buffer is each subscriber's channel capacity; 0 means
	// DefaultBusBuffer.
	Buffer int
}

// Bus is an in-process publisher that fans messages out to subscribers, for
// the server's live views (server-sent events and the like). Publishing never
// blocks on a subscriber: each has a bounded buffer, and a subscriber that
// lets it fill up loses the messages that do not fit, which are counted. A
// live view that needs completeness must resynchronise from the API.
type Bus struct {
	buffer  int
	dropped atomic.Uint64

	mu     sync.RWMutex
	subs   map[*subscriber]struct{}
	closed bool
}

type subscriber struct {
	ch     chan Message
	filter Filter
}

// NewBus returns an empty Bus.
func NewBus(opts BusOptions) *Bus {
	buffer := opts.Buffer
	if buffer <= 0 {
		buffer = DefaultBusBuffer
	}
	return &Bus{buffer: buffer, subs: map[*subscriber]struct{}{}}
}

// Publish delivers msgs, in order, to every subscriber whose filter selects
// them, dropping (and counting) a message for any subscriber whose buffer is
// full. It does not block and does not look at ctx; it fails only when the
// bus is closed.
func (b *Bus) Publish(_ context.Context, msgs ...Message) error {
	// The read lock is held while sending so that cancel, which closes a
	// subscriber's channel under the write lock, can never race a send.
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return ErrClosed
	}
	for _, m := range msgs {
		for s := range b.subs {
			if s.filter != nil && !s.filter(m) {
				continue
			}
			select {
			case s.ch <- m:
			default:
				b.dropped.Add(1)
			}
		}
	}
	return nil
}

// Subscribe registers a subscriber and returns its channel and a function
// that unsubscribes and closes the channel. The cancel function may be
// called any number of times. Subscribing to a closed bus returns an
// already-closed channel.
func (b *Bus) Subscribe(filter Filter) (<-chan Message, func()) {
	s := &subscriber{ch: make(chan Message, b.buffer), filter: filter}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		close(s.ch)
		return s.ch, func() {}
	}
	b.subs[s] = struct{}{}
	return s.ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.subs[s]; ok {
			delete(b.subs, s)
			close(s.ch)
		}
	}
}

// Dropped returns how many deliveries to slow subscribers were dropped since
// the bus was created.
func (b *Bus) Dropped() uint64 { return b.dropped.Load() }

// Subscribers returns the number of current subscribers.
func (b *Bus) Subscribers() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.subs)
}

// Close closes every subscriber's channel, so that live views end, and makes
// later Publish calls fail with ErrClosed. It is safe to call more than once.
func (b *Bus) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	for s := range b.subs {
		close(s.ch)
		delete(b.subs, s)
	}
	return nil
}
