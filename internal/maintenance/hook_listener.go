package maintenance

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/store"
)

// DefaultHookListenerSync is how often the hook listener brings the
// broker's queues and bindings in line with the hooks' bindings (and
// retries bindings to exchanges that did not exist yet).
const DefaultHookListenerSync = 5 * time.Second

// MessageFirer fires a hook for a Pulse message (hooksapi.Firer).
type MessageFirer interface {
	FireMessage(ctx context.Context, hookGroupID, hookID string, body []byte) error
}

// HookListener fires hooks for the Pulse messages their bindings select:
// each hook with bindings gets a durable queue (queue/hopper-hooks/<hookGroupId>/<hookId>)
// bound as its bindings say, consumed by every replica, so the broker
// hands each message to one of them.
type HookListener struct {
	Store  store.HookStore
	Firer  MessageFirer
	AMQP   string // the broker's URL; never logged
	Logger *slog.Logger
	// Interval is the cadence of reconciliation (default
	// DefaultHookListenerSync); Changed starts one at once.
	Interval time.Duration

	once     sync.Once
	poke     chan struct{}
	mu       sync.Mutex
	hookOf   map[string][2]string // queue name → hookGroupId, hookId
	consumer *events.Consumer
	loop     loop
}

var _ Service = (*HookListener)(nil)

// hookQueuePrefix names the hooks' queues, as Pulse names a client's.
const hookQueuePrefix = "queue/hopper-hooks/"

func (l *HookListener) init() {
	l.once.Do(func() {
		l.poke = make(chan struct{}, 1)
		l.hookOf = map[string][2]string{}
		l.consumer = events.NewConsumer(events.ConsumerOptions{URL: l.AMQP, MaxLength: 50, Handle: l.handle, Logger: logger(l.Logger)})
	})
}

// Changed asks for a reconciliation now (a hook was created, updated or
// removed).
func (l *HookListener) Changed() {
	l.init()
	select {
	case l.poke <- struct{}{}:
	default:
	}
}

// Start implements Service.
func (l *HookListener) Start(ctx context.Context) {
	l.init()
	log := logger(l.Logger)
	every := interval(l.Interval, DefaultHookListenerSync)
	// A failed sync is only a warning: the next one retries it.
	l.loop.start(ctx, l.Logger, "binding hooks to Pulse exchanges", 100*time.Millisecond, true, func(ctx context.Context) error {
		if err := l.sync(ctx); err != nil && ctx.Err() == nil {
			log.Warn("binding hooks to Pulse exchanges (retrying)", "error", err)
		}
		select {
		case <-ctx.Done():
		case <-l.poke:
		case <-time.After(every):
		}
		return nil
	})
}

// Stop implements Service.
func (l *HookListener) Stop() {
	l.loop.Stop()
	if l.consumer != nil {
		_ = l.consumer.Close()
	}
}

// sync reads the hooks' bindings and makes the broker match them.
func (l *HookListener) sync(ctx context.Context) error {
	hooks, err := l.Store.ListHooks(ctx, "")
	if err != nil {
		return err
	}
	want := map[string][]events.QueueBinding{}
	hookOf := map[string][2]string{}
	for _, h := range hooks {
		var bindings []events.QueueBinding
		var raw []struct {
			Exchange          string `json:"exchange"`
			RoutingKeyPattern string `json:"routingKeyPattern"`
		}
		if err := json.Unmarshal(h.Bindings, &raw); err != nil || len(raw) == 0 {
			continue
		}
		for _, b := range raw {
			bindings = append(bindings, events.QueueBinding{Exchange: b.Exchange, RoutingKeyPattern: b.RoutingKeyPattern})
		}
		name := hookQueuePrefix + h.HookGroupID + "/" + h.HookID
		want[name] = bindings
		hookOf[name] = [2]string{h.HookGroupID, h.HookID}
	}
	l.mu.Lock()
	l.hookOf = hookOf
	l.mu.Unlock()
	return l.consumer.Sync(ctx, want)
}

// handle fires the hook whose queue a message came from.
func (l *HookListener) handle(ctx context.Context, d events.Delivery) error {
	l.mu.Lock()
	hook, ok := l.hookOf[d.Queue]
	l.mu.Unlock()
	if !ok {
		return nil // the hook is gone; its queue is about to be deleted
	}
	return l.Firer.FireMessage(ctx, hook[0], hook[1], d.Body)
}
