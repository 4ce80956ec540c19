package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// QueueBinding binds a queue to an exchange with a routing-key pattern.
type QueueBinding struct {
	Exchange          string
	RoutingKeyPattern string
}

// Delivery is one message taken from a consumed queue.
type Delivery struct {
	Queue      string
	Exchange   string
	RoutingKey string
	Body       []byte
}

// ConsumerOptions configures a Consumer.
type ConsumerOptions struct {
	// URL is the broker's AMQP URI; it is never logged.
	URL string
	// MaxLength caps each queue (older messages are dropped when it is
	// full, as Pulse's hooks queues are capped); 0 means no cap.
	MaxLength int
	// Handle processes one message; the message is acknowledged when it
	// returns nil and handed back to the queue otherwise.
	Handle func(ctx context.Context, d Delivery) error
	Logger *slog.Logger
}

// Consumer keeps a set of durable queues bound and consumed, as Sync
// describes them: several processes may consume the same queues, and the
// broker hands each message to one of them. Connection failures are
// recovered by the next Sync.
type Consumer struct {
	opts ConsumerOptions
	log  *slog.Logger

	mu     sync.Mutex
	conn   *amqp.Connection
	queues map[string]*consumedQueue
}

type consumedQueue struct {
	bound  []QueueBinding // the bindings in place
	ch     *amqp.Channel
	cancel context.CancelFunc
	done   chan struct{}
}

// NewConsumer returns a consumer that has not connected yet.
func NewConsumer(opts ConsumerOptions) *Consumer {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Consumer{opts: opts, log: log, queues: map[string]*consumedQueue{}}
}

// Sync makes the broker match want (queue name → bindings): queues are
// declared and consumed, bindings added and removed, and queues no longer
// wanted are deleted. A binding that fails (its exchange does not exist
// yet) is left out and retried by the next Sync; the error says which.
func (c *Consumer) Sync(ctx context.Context, want map[string][]QueueBinding) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.connect(); err != nil {
		return err
	}
	var errs []error
	for name, bindings := range want {
		if err := c.syncQueue(ctx, name, bindings); err != nil {
			errs = append(errs, err)
		}
	}
	for name, q := range c.queues {
		if _, ok := want[name]; ok {
			continue
		}
		c.stopQueue(q)
		delete(c.queues, name)
		if err := c.withChannel(func(ch *amqp.Channel) error {
			_, err := ch.QueueDelete(name, false, false, false)
			return err
		}); err != nil {
			errs = append(errs, fmt.Errorf("deleting queue %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// connect dials the broker unless a connection is open; a lost
// connection takes its consumers with it.
func (c *Consumer) connect() error {
	if c.conn != nil && !c.conn.IsClosed() {
		return nil
	}
	for name, q := range c.queues {
		c.stopQueue(q)
		delete(c.queues, name)
	}
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(DefaultConnectionName + "-consumer")
	conn, err := amqp.DialConfig(c.opts.URL, amqp.Config{Properties: props, Dial: amqp.DefaultDial(DefaultDialTimeout)})
	if err != nil {
		return fmt.Errorf("connecting to the AMQP broker: %w", err)
	}
	c.conn = conn
	return nil
}

// withChannel runs fn on a channel of its own: a refused operation closes
// its channel, which must not take other work with it.
func (c *Consumer) withChannel(fn func(ch *amqp.Channel) error) error {
	ch, err := c.conn.Channel()
	if err != nil {
		return err
	}
	defer func() { _ = ch.Close() }()
	return fn(ch)
}

func (c *Consumer) syncQueue(ctx context.Context, name string, bindings []QueueBinding) error {
	q := c.queues[name]
	if q != nil {
		select {
		case <-q.done:
			// The broker ended the consumer (another process deleted the
			// queue, or its channel failed): start afresh.
			c.stopQueue(q)
			q = nil
		default:
		}
	}
	if q == nil {
		var err error
		if q, err = c.consume(ctx, name); err != nil {
			return err
		}
		c.queues[name] = q
	}
	var errs []error
	for _, b := range q.bound {
		if slices.Contains(bindings, b) {
			continue
		}
		if err := c.withChannel(func(ch *amqp.Channel) error {
			return ch.QueueUnbind(name, b.RoutingKeyPattern, b.Exchange, nil)
		}); err != nil {
			errs = append(errs, fmt.Errorf("unbinding queue %s from %s: %w", name, b.Exchange, err))
			continue
		}
		q.bound = slices.DeleteFunc(q.bound, func(x QueueBinding) bool { return x == b })
	}
	for _, b := range bindings {
		if slices.Contains(q.bound, b) {
			continue
		}
		if err := c.withChannel(func(ch *amqp.Channel) error {
			return ch.QueueBind(name, b.RoutingKeyPattern, b.Exchange, false, nil)
		}); err != nil {
			errs = append(errs, fmt.Errorf("binding queue %s to %s with %q: %w", name, b.Exchange, b.RoutingKeyPattern, err))
			continue
		}
		q.bound = append(q.bound, b)
	}
	return errors.Join(errs...)
}

// consume declares a queue and starts handing its messages to Handle.
func (c *Consumer) consume(ctx context.Context, name string) (*consumedQueue, error) {
	ch, err := c.conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("opening a channel for queue %s: %w", name, err)
	}
	args := amqp.Table{}
	if c.opts.MaxLength > 0 {
		args["x-max-length"] = int64(c.opts.MaxLength)
	}
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("declaring queue %s: %w", name, err)
	}
	if err := ch.Qos(1, 0, false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("setting the prefetch of queue %s: %w", name, err)
	}
	deliveries, err := ch.Consume(name, "", false, false, false, false, nil)
	if err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("consuming queue %s: %w", name, err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	q := &consumedQueue{ch: ch, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(q.done)
		for {
			select {
			case <-ctx.Done():
				return
			case d, ok := <-deliveries:
				if !ok {
					return
				}
				err := c.opts.Handle(ctx, Delivery{Queue: name, Exchange: d.Exchange, RoutingKey: d.RoutingKey, Body: d.Body})
				if err != nil {
					c.log.Warn("handling a message failed; it goes back to its queue", "queue", name, "error", err)
					time.Sleep(time.Second) // do not spin on a failing message
					_ = d.Nack(false, true)
					continue
				}
				_ = d.Ack(false)
			}
		}
	}()
	return q, nil
}

func (c *Consumer) stopQueue(q *consumedQueue) {
	q.cancel()
	_ = q.ch.Close()
	<-q.done
}

// Close stops consuming and closes the connection; queues stay on the
// broker for the other processes (or the next start).
func (c *Consumer) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, q := range c.queues {
		c.stopQueue(q)
		delete(c.queues, name)
	}
	if c.conn != nil {
		return c.conn.Close()
	}
	return nil
}
