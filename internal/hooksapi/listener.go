package hooksapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/hooks"
	"github.com/hopper-ci/hopper/internal/store"
)

// DefaultPulseSync is how often the Pulse listener brings the broker's
// queues and bindings in line with the hooks' bindings (and retries
// bindings to exchanges that did not exist yet); a hook's change asks
// for a sync at once (Deps.Changed).
const DefaultPulseSync = 5 * time.Second

// pulseQueuePrefix names the hooks' queues, as Pulse names a client's.
const pulseQueuePrefix = "queue/hopper-hooks/"

// pulseMaxLength caps each hook's queue: older messages are dropped when
// it is full, as Pulse's hooks queues are capped.
const pulseMaxLength = 50

// PulseQueue is the durable queue of a hook with bindings.
func PulseQueue(hookGroupID, hookID string) string {
	return pulseQueuePrefix + hookGroupID + "/" + hookID
}

// HookLister lists every hook (store.HookStore's ListHooks).
type HookLister interface {
	ListHooks(ctx context.Context, hookGroupID string) ([]store.Hook, error)
}

// MessageFirer fires a hook for a Pulse message (*Firer).
type MessageFirer interface {
	FireMessage(ctx context.Context, hookGroupID, hookID string, body []byte) error
}

// PulseListener fires hooks for the Pulse messages their bindings select:
// each hook with bindings gets a durable queue (PulseQueue) bound as its
// bindings say, consumed by every replica, so the broker hands each
// message to one of them. Its duty is Pass, which internal/server
// schedules every DefaultPulseSync with maintenance.Every and wakes on
// Deps.Changed; Close ends the consumption after the duty stopped.
type PulseListener struct {
	hooks    HookLister
	firer    MessageFirer
	log      *slog.Logger
	consumer *events.Consumer

	mu     sync.Mutex
	hookOf map[string][2]string // queue name → hookGroupId, hookId
}

// NewPulseListener returns a listener of the hooks in st that fires them
// through firer, consuming from the broker at amqpURL (never logged). It
// connects at its first Sync.
func NewPulseListener(st HookLister, firer MessageFirer, amqpURL string, log *slog.Logger) *PulseListener {
	if log == nil {
		log = slog.Default()
	}
	l := &PulseListener{hooks: st, firer: firer, log: log, hookOf: map[string][2]string{}}
	l.consumer = events.NewConsumer(events.ConsumerOptions{URL: amqpURL, MaxLength: pulseMaxLength, Handle: l.handle, Logger: log})
	return l
}

// Sync reads the hooks' bindings and makes the broker match them: a
// queue for each hook with bindings, bound as they say, and none for the
// others. A binding that fails (its exchange does not exist yet) is left
// out and retried by the next Sync; the error says which.
func (l *PulseListener) Sync(ctx context.Context) error {
	list, err := l.hooks.ListHooks(ctx, "")
	if err != nil {
		return fmt.Errorf("listing the hooks' bindings: %w", err)
	}
	want, hookOf := pulseQueues(list)
	l.mu.Lock()
	l.hookOf = hookOf
	l.mu.Unlock()
	return l.consumer.Sync(ctx, want)
}

// Pass is Sync as the duty's pass: a failure is logged as a warning, not
// as the duty's error, since a binding to an exchange that does not
// exist yet is routine and the next pass retries it.
func (l *PulseListener) Pass(ctx context.Context) error {
	if err := l.Sync(ctx); err != nil && ctx.Err() == nil {
		l.log.Warn("binding hooks to Pulse exchanges (retrying)", "error", err)
	}
	return nil
}

// Close ends the consumption of the hooks' queues (which stay, for the
// other replicas and the next start).
func (l *PulseListener) Close() error { return l.consumer.Close() }

// pulseQueues is the queues the hooks want, with their bindings, and the
// hook of each queue. A hook without bindings (or whose bindings do not
// decode) has none.
func pulseQueues(list []store.Hook) (map[string][]events.QueueBinding, map[string][2]string) {
	want := map[string][]events.QueueBinding{}
	hookOf := map[string][2]string{}
	for _, h := range list {
		var bindings []hooks.Binding
		if err := json.Unmarshal(h.Bindings, &bindings); err != nil || len(bindings) == 0 {
			continue
		}
		name := PulseQueue(h.HookGroupID, h.HookID)
		for _, b := range bindings {
			want[name] = append(want[name], events.QueueBinding{Exchange: b.Exchange, RoutingKeyPattern: b.RoutingKeyPattern})
		}
		hookOf[name] = [2]string{h.HookGroupID, h.HookID}
	}
	return want, hookOf
}

// handle fires the hook whose queue a message came from.
func (l *PulseListener) handle(ctx context.Context, d events.Delivery) error {
	l.mu.Lock()
	hook, ok := l.hookOf[d.Queue]
	l.mu.Unlock()
	if !ok {
		return nil // the hook is gone; its queue is about to be deleted
	}
	return l.firer.FireMessage(ctx, hook[0], hook[1], d.Body)
}
