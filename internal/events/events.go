// Package events publishes task events: in process, for the server's live
// views, and to AMQP 0-9-1 brokers on exchanges laid out exactly as
// Taskcluster's Queue lays out its Pulse exchanges, so that existing Pulse
// consumers (and the official clients' QueueEvents bindings) work unchanged.
//
// The queue builds the message bodies (it owns the task status); this
// package owns the envelope (exchange, routing key, CC routes), the body
// shapes that the Taskcluster schemas allow, and the transports. Delivery is
// at least once and best effort: a publisher returns an error when it could
// not hand a message over, the caller logs it, and nothing in the queue's
// REST behaviour depends on events having been delivered.
package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// ExchangePrefix is the prefix of every queue exchange name on the broker.
// The official clients hard-code it (from the API reference) into their
// QueueEvents bindings, so a Pulse-compatible deployment must not change it.
const ExchangePrefix = "exchange/taskcluster-queue/v1/"

// Short names of the queue's exchanges, as carried in Message.Exchange. The
// broker-side exchange name is the prefix followed by the short name.
const (
	ExchangeTaskDefined     = "task-defined"
	ExchangeTaskPending     = "task-pending"
	ExchangeTaskRunning     = "task-running"
	ExchangeArtifactCreated = "artifact-created"
	ExchangeTaskCompleted   = "task-completed"
	ExchangeTaskFailed      = "task-failed"
	ExchangeTaskException   = "task-exception"

	ExchangeTaskGroupResolved = "task-group-resolved"
	ExchangeTaskGroupSealed   = "task-group-sealed"

	// ExchangeTaskPriorityChanged and ExchangeTaskGroupPriorityChanged
	// exist only in newer Taskcluster releases (the v87 clients do not know
	// them); they concern only a queue that lets priorities change.
	ExchangeTaskPriorityChanged      = "task-priority-changed"
	ExchangeTaskGroupPriorityChanged = "task-group-priority-changed"
)

// maxRoutingKeyLength is the AMQP 0-9-1 limit on a routing key (a short
// string); a longer CC route could never be matched by a binding.
const maxRoutingKeyLength = 255

// Message is one event ready for publication: the envelope and the JSON body.
// Subscribers of a Bus share the value with each other, so nobody may modify
// the CC slice or the body after publishing.
type Message struct {
	// Exchange is the short exchange name, such as "task-completed"; the
	// AMQP publisher adds its exchange prefix.
	Exchange string
	// RoutingKey is the primary routing key (see TaskRoutingKey and
	// GroupRoutingKey).
	RoutingKey string
	// CC holds the additional routing keys the broker also routes the
	// message by ("route.<r>" for each task route, see RouteCCs).
	CC []string
	// Body is the UTF-8 JSON message body.
	Body json.RawMessage
}

// Validate reports whether the envelope can be published: an exchange, a
// non-empty primary key and CC keys within the AMQP length limit, and a body
// that is valid JSON. It does not check the body against its schema; the
// New*Event constructors do that part.
func (m Message) Validate() error {
	if m.Exchange == "" {
		return errors.New("message has no exchange")
	}
	if m.RoutingKey == "" {
		return fmt.Errorf("message on %s has no routing key", m.Exchange)
	}
	if len(m.RoutingKey) > maxRoutingKeyLength {
		return fmt.Errorf("routing key on %s is %d bytes long, more than %d", m.Exchange, len(m.RoutingKey), maxRoutingKeyLength)
	}
	for _, cc := range m.CC {
		if cc == "" || len(cc) > maxRoutingKeyLength {
			return fmt.Errorf("CC routing key %q on %s must be 1 to %d bytes long", cc, m.Exchange, maxRoutingKeyLength)
		}
	}
	if !json.Valid(m.Body) {
		return fmt.Errorf("body of message %s on %s is not valid JSON", m.RoutingKey, m.Exchange)
	}
	return nil
}

// Publisher hands messages over to a transport. Implementations are safe for
// concurrent use. An error means that at least one message may not have been
// delivered; messages may also be delivered more than once, so consumers must
// be idempotent (as Taskcluster's are).
type Publisher interface {
	Publish(ctx context.Context, msgs ...Message) error
}

// Multi fans each Publish out to several publishers, in order. Every
// publisher is tried even when an earlier one fails, so that a broken broker
// does not starve the in-process bus; the errors are joined.
type Multi []Publisher

// Publish publishes msgs on every publisher of m.
func (m Multi) Publish(ctx context.Context, msgs ...Message) error {
	var errs []error
	for i, p := range m {
		if err := p.Publish(ctx, msgs...); err != nil {
			errs = append(errs, fmt.Errorf("publisher %d (%T): %w", i, p, err))
		}
	}
	return errors.Join(errs...)
}
