package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrUnavailable is returned (wrapped with the last connection error) by
// AMQP.Publish while the broker cannot be reached. Publish fails fast in that
// state instead of stalling API requests for the length of an outage.
var ErrUnavailable = errors.New("events: AMQP broker unavailable")

// errSessionLost marks a publish that failed because the connection or the
// publishing channel went away; the messages are worth retrying on the next
// connection.
var errSessionLost = errors.New("AMQP connection lost")

// Defaults of AMQPOptions.
const (
	DefaultConnectionName = "hopper"
	DefaultMinBackoff     = 100 * time.Millisecond
	DefaultMaxBackoff     = 30 * time.Second
	DefaultDialTimeout    = 10 * time.Second
)

// maxPublishAttempts bounds how many connections one Publish call tries, so
// that a broker which accepts connections and then drops them cannot hold a
// caller forever.
const maxPublishAttempts = 3

// AMQPOptions configures an AMQP publisher.
type AMQPOptions struct {
	// URL is the broker's AMQP URI, such as
	// "amqp://guest:guest@127.0.0.1:5672/". Required. It is never logged.
	URL string
	// ExchangePrefix is put before each message's short exchange name; ""
	// means ExchangePrefix. Only tests and isolated deployments should
	// change it: Taskcluster clients bind to the default.
	ExchangePrefix string
	// ConnectionName is advertised to the broker (it shows in RabbitMQ's
	// connection list); "" means DefaultConnectionName.
	ConnectionName string
	// MinBackoff and MaxBackoff bound the delay between reconnection
	// attempts, which doubles (with jitter) after each failed attempt.
	// Zero means DefaultMinBackoff and DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// DialTimeout bounds a connection attempt, TCP connect and AMQP
	// handshake together; zero means DefaultDialTimeout.
	DialTimeout time.Duration
	// DialFunc opens the transport connection; nil means a net.Dialer.
	// Tests use it to cut connections; deployments could tunnel.
	DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)
	// Logger receives connection-state changes; nil means slog.Default().
	Logger *slog.Logger
}

// connState is the AMQP publisher's view of its broker connection.
type connState int

const (
	// stateConnecting: a connection attempt is under way (initially and
	// right after losing a connection); Publish waits for its outcome.
	stateConnecting connState = iota
	// stateUp: a session is available.
	stateUp
	// stateDown: the last attempt failed and the next one is backing off;
	// Publish fails fast with ErrUnavailable.
	stateDown
	// stateClosed: Close was called.
	stateClosed
)

// AMQP publishes messages to an AMQP 0-9-1 broker the way Taskcluster's
// Pulse publisher does: each exchange (prefix + short name) is declared as a
// durable, non-auto-delete topic exchange the first time a connection uses
// it; messages go out persistent, as application/json in utf-8, with their CC
// routing keys in the "CC" header (which RabbitMQ routes by), on a channel in
// confirm mode; Publish returns once the broker has confirmed every message.
//
// A background goroutine owns the connection and re-establishes it with
// exponential back-off when it is lost. Messages whose confirmation was cut
// off by a lost connection are published again on the next one, so consumers
// may see duplicates (Taskcluster promises only at-least-once delivery).
type AMQP struct {
	opts   AMQPOptions
	prefix string
	target string // the broker's address without credentials, for messages
	log    *slog.Logger

	ctx     context.Context // cancelled by Close; aborts dialling and waiting
	cancel  context.CancelFunc
	stopped chan struct{} // closed when the connection goroutine has exited

	mu      sync.Mutex
	state   connState
	sess    *amqpSession  // set in stateUp only
	lastErr error         // why the publisher is not up
	changed chan struct{} // closed and replaced on every state change
}

// NewAMQP validates opts and starts connecting in the background; it does not
// wait for the broker (see Ready). Call Close to stop.
func NewAMQP(opts AMQPOptions) (*AMQP, error) {
	if opts.URL == "" {
		return nil, errors.New("AMQP publisher needs a broker URL")
	}
	uri, err := amqp.ParseURI(opts.URL)
	if err != nil {
		if _, ok := errors.AsType[*url.Error](err); ok {
			// net/url's errors quote the URL, or pieces of it that may be
			// part of a password with an unescaped reserved character; say
			// only what is wrong.
			return nil, errors.New("parsing the AMQP broker URL: malformed URL (reserved characters in the user name or password must be percent-encoded)")
		}
		return nil, fmt.Errorf("parsing the AMQP broker URL: %w", err)
	}
	if opts.ExchangePrefix == "" {
		opts.ExchangePrefix = ExchangePrefix
	}
	if opts.ConnectionName == "" {
		opts.ConnectionName = DefaultConnectionName
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	opts.MaxBackoff = max(opts.MaxBackoff, opts.MinBackoff)
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	if opts.DialFunc == nil {
		var d net.Dialer
		opts.DialFunc = d.DialContext
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &AMQP{
		opts:    opts,
		prefix:  opts.ExchangePrefix,
		target:  fmt.Sprintf("%s://%s/%s", uri.Scheme, net.JoinHostPort(uri.Host, fmt.Sprint(uri.Port)), strings.TrimPrefix(uri.Vhost, "/")),
		log:     log.With("component", "events.amqp"),
		ctx:     ctx,
		cancel:  cancel,
		stopped: make(chan struct{}),
		state:   stateConnecting,
		changed: make(chan struct{}),
	}
	go a.run()
	return a, nil
}

// Ready waits until the publisher has a connection, Close is called (it then
// returns ErrClosed) or ctx ends. Unlike Publish it keeps waiting through
// failed attempts, so a server can use it at start-up to report a broker that
// stays unreachable.
func (a *AMQP) Ready(ctx context.Context) error {
	for {
		state, _, lastErr, changed := a.snapshot()
		switch state {
		case stateUp:
			return nil
		case stateClosed:
			return ErrClosed
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("waiting for AMQP broker %s (last error: %v): %w", a.target, lastErr, ctx.Err())
			}
			return fmt.Errorf("waiting for AMQP broker %s: %w", a.target, ctx.Err())
		case <-changed:
		}
	}
}

// Close stops reconnecting and closes the connection; Publish calls in
// progress fail and later ones return ErrClosed. It is safe to call more than
// once and always returns nil.
func (a *AMQP) Close() error {
	a.cancel()
	<-a.stopped
	return nil
}

// Publish publishes msgs and waits until the broker has confirmed all of
// them, ctx ends, or the attempt fails. While a connection is being
// established it waits for it; while the broker is known to be unreachable
// it fails at once with ErrUnavailable. Messages are validated before any is
// sent, so an invalid one fails the whole call without side effects.
func (a *AMQP) Publish(ctx context.Context, msgs ...Message) error {
	for _, m := range msgs {
		if err := m.Validate(); err != nil {
			return fmt.Errorf("publishing to AMQP: %w", err)
		}
	}
	pending := make([]int, len(msgs))
	for i := range pending {
		pending[i] = i
	}
	var lost error
	for attempt := 1; len(pending) > 0; attempt++ {
		if attempt > maxPublishAttempts {
			return fmt.Errorf("publishing %d of %d messages to AMQP after %d attempts: %w", len(pending), len(msgs), maxPublishAttempts, lost)
		}
		s, err := a.session(ctx)
		if err != nil {
			return fmt.Errorf("publishing %d of %d messages to AMQP: %w", len(pending), len(msgs), err)
		}
		pending, err = a.publishOn(ctx, s, msgs, pending)
		switch {
		case err == nil:
		case errors.Is(err, errSessionLost):
			lost = err
			a.log.Info("AMQP connection lost while publishing; publishing again", "messages", len(pending), "attempt", attempt, "error", err)
		default:
			return fmt.Errorf("publishing to AMQP: %w", err)
		}
	}
	return nil
}

// publishOn publishes the messages msgs[i] for i in idx on s and waits for
// their confirmations. When the session is lost it returns the indices still
// unconfirmed together with an error wrapping errSessionLost.
func (a *AMQP) publishOn(ctx context.Context, s *amqpSession, msgs []Message, idx []int) ([]int, error) {
	exchanges := make([]string, 0, len(idx))
	for _, i := range idx {
		exchanges = append(exchanges, a.prefix+msgs[i].Exchange)
	}
	if err := s.declare(exchanges); err != nil {
		return idx, err
	}

	type inflight struct {
		i  int
		dc *amqp.DeferredConfirmation
	}
	sent := make([]inflight, 0, len(idx))
	var retry []int
	var sendErr error
	for k, i := range idx {
		m := msgs[i]
		dc, err := s.ch.PublishWithDeferredConfirmWithContext(ctx, a.prefix+m.Exchange, m.RoutingKey, false, false, amqpPublishing(m))
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("sending %s on %s: %w", m.RoutingKey, m.Exchange, ctx.Err())
			}
			sendErr = fmt.Errorf("%w: sending %s on %s: %w", errSessionLost, m.RoutingKey, m.Exchange, err)
			s.fail(sendErr)
			retry = append(retry, idx[k:]...)
			break
		}
		sent = append(sent, inflight{i: i, dc: dc})
	}

	var refused []error
	for _, f := range sent {
		m := msgs[f.i]
		ack, err := f.dc.WaitContext(ctx)
		switch {
		case err != nil:
			return nil, fmt.Errorf("waiting for the broker to confirm %s on %s: %w", m.RoutingKey, m.Exchange, err)
		case ack:
		case s.ch.IsClosed():
			// The library reports unconfirmed messages of a closed channel
			// as nacked; they were not refused, only cut off.
			retry = append(retry, f.i)
		default:
			refused = append(refused, fmt.Errorf("broker refused (nack) %s on %s", m.RoutingKey, m.Exchange))
		}
	}
	if len(refused) > 0 {
		return nil, errors.Join(refused...)
	}
	if len(retry) == 0 {
		return nil, nil
	}
	slices.Sort(retry)
	if sendErr == nil {
		sendErr = fmt.Errorf("%w: publishing channel closed before the broker confirmed %d messages", errSessionLost, len(retry))
		s.fail(sendErr)
	}
	return retry, sendErr
}

// amqpPublishing wraps a message with Pulse's publishing properties.
func amqpPublishing(m Message) amqp.Publishing {
	// The CC header must be an AMQP array of long strings for RabbitMQ's
	// sender-selected distribution; Taskcluster sends it even when empty.
	cc := make([]any, len(m.CC))
	for i, k := range m.CC {
		cc[i] = k
	}
	return amqp.Publishing{
		Headers:         amqp.Table{"CC": cc},
		ContentType:     "application/json",
		ContentEncoding: "utf-8",
		DeliveryMode:    amqp.Persistent,
		Body:            m.Body,
	}
}

// session returns the current session, waiting while a connection attempt is
// under way.
func (a *AMQP) session(ctx context.Context) (*amqpSession, error) {
	for {
		state, s, lastErr, changed := a.snapshot()
		switch state {
		case stateUp:
			if !s.isLost() {
				return s, nil
			}
			// A publisher found the session broken and the connection
			// goroutine has yet to replace it: wait for it to.
		case stateClosed:
			return nil, ErrClosed
		case stateDown:
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, lastErr)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for a connection to AMQP broker %s: %w", a.target, ctx.Err())
		case <-changed:
		}
	}
}

func (a *AMQP) snapshot() (connState, *amqpSession, error, <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state, a.sess, a.lastErr, a.changed
}

func (a *AMQP) setState(state connState, s *amqpSession, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.state, a.sess, a.lastErr = state, s, err
	close(a.changed)
	a.changed = make(chan struct{})
}

// run owns the connection: it connects, watches the session until it is
// lost, and reconnects with back-off, until Close.
func (a *AMQP) run() {
	defer close(a.stopped)
	defer a.setState(stateClosed, nil, ErrClosed)
	failures := 0
	for {
		s, err := a.connect()
		if err != nil {
			if a.ctx.Err() != nil {
				return
			}
			failures++
			delay := backoffDelay(a.opts.MinBackoff, a.opts.MaxBackoff, failures)
			a.setState(stateDown, nil, err)
			a.log.Warn("cannot connect to AMQP broker", "broker", a.target, "attempt", failures, "retryIn", delay, "error", err)
			if !a.sleep(delay) {
				return
			}
			continue
		}
		if failures > 0 {
			a.log.Info("connected to AMQP broker", "broker", a.target, "afterAttempts", failures+1)
		}
		failures = 0
		a.setState(stateUp, s, nil)
		cause := s.watch(a.ctx, a.log)
		s.close(a.opts.DialTimeout)
		if cause == nil {
			return // Close was called.
		}
		a.setState(stateConnecting, nil, cause)
		a.log.Warn("lost AMQP connection; reconnecting", "broker", a.target, "error", cause)
		// Even a clean loss waits a little, so that a broker which drops
		// every connection at once is not hammered.
		if !a.sleep(a.opts.MinBackoff) {
			return
		}
	}
}

// sleep waits for d and reports false if Close was called meanwhile.
func (a *AMQP) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-a.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// backoffDelay is the delay before reconnection attempt failures+1: the
// minimum doubled per failure, capped, then jittered into [d/2, d] so that
// several replicas do not reconnect in lock step.
func backoffDelay(minDelay, maxDelay time.Duration, failures int) time.Duration {
	d := minDelay
	for i := 1; i < failures && d < maxDelay; i++ {
		d *= 2
	}
	d = min(d, maxDelay)
	return d/2 + rand.N(d/2+1)
}

// connect dials the broker and opens the confirm-mode publishing channel.
func (a *AMQP) connect() (*amqpSession, error) {
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(a.opts.ConnectionName)
	// stopWatch undoes the close-on-Close hook installed once the transport
	// is up: DialConfig's handshake cannot be cancelled any other way.
	var stopWatch func() bool
	cfg := amqp.Config{
		Properties: props,
		Dial: func(network, addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(a.ctx, a.opts.DialTimeout)
			defer cancel()
			c, err := a.opts.DialFunc(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// The library clears this deadline once the handshake is done.
			if err := c.SetDeadline(time.Now().Add(a.opts.DialTimeout)); err != nil {
				_ = c.Close()
				return nil, err
			}
			stopWatch = context.AfterFunc(a.ctx, func() { _ = c.Close() })
			return c, nil
		},
	}
	conn, err := amqp.DialConfig(a.opts.URL, cfg)
	if stopWatch != nil && !stopWatch() {
		if err == nil {
			_ = conn.Close()
		}
		return nil, ErrClosed
	}
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", a.target, err)
	}
	ch, err := conn.Channel()
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("opening a channel on %s: %w", a.target, err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("putting the channel on %s in confirm mode: %w", a.target, err)
	}
	return &amqpSession{
		conn:       conn,
		ch:         ch,
		connClosed: conn.NotifyClose(make(chan *amqp.Error, 1)),
		chClosed:   ch.NotifyClose(make(chan *amqp.Error, 1)),
		blocked:    conn.NotifyBlocked(make(chan amqp.Blocking, 1)),
		lost:       make(chan struct{}),
		declared:   map[string]bool{},
	}, nil
}

// amqpSession is one connection and its publishing channel. Once lost it is
// never used again; the next connection gets a new session (and declares
// its exchanges afresh, in case they were deleted meanwhile).
type amqpSession struct {
	conn       *amqp.Connection
	ch         *amqp.Channel
	connClosed chan *amqp.Error
	chClosed   chan *amqp.Error
	blocked    chan amqp.Blocking

	lostOnce sync.Once
	lost     chan struct{} // closed by fail
	lostErr  error         // written before lost is closed

	declareMu sync.Mutex
	declared  map[string]bool // full exchange names declared on this connection
}

// fail marks the session unusable (a publisher saw it break before the
// library reported it); the connection goroutine then replaces it.
func (s *amqpSession) fail(err error) {
	s.lostOnce.Do(func() {
		s.lostErr = err
		close(s.lost)
	})
}

// isLost reports whether fail has been called.
func (s *amqpSession) isLost() bool {
	select {
	case <-s.lost:
		return true
	default:
		return false
	}
}

// watch blocks until the session is lost, returning why, or until ctx ends,
// returning nil.
func (s *amqpSession) watch(ctx context.Context, log *slog.Logger) error {
	blocked := s.blocked
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-s.connClosed:
			return closeCause("connection closed", e)
		case e := <-s.chClosed:
			return closeCause("publishing channel closed", e)
		case <-s.lost:
			return s.lostErr
		case b, ok := <-blocked:
			if !ok {
				blocked = nil // closed with the connection; connClosed follows
				continue
			}
			// A blocked connection stalls confirmations (callers' contexts
			// bound the wait); worth knowing when Publish times out.
			if b.Active {
				log.Warn("AMQP broker is blocking publishers", "reason", b.Reason)
			} else {
				log.Info("AMQP broker stopped blocking publishers")
			}
		}
	}
}

// closeCause turns a close notification into an error; the library closes
// the notification channel without a value on a clean (client) close.
func closeCause(what string, e *amqp.Error) error {
	if e == nil {
		return errors.New(what)
	}
	return fmt.Errorf("%s: %w", what, e)
}

// close closes the connection, bounding the wait for the broker's close-ok
// so that an unresponsive broker cannot hang reconnection or Close.
func (s *amqpSession) close(timeout time.Duration) {
	_ = s.conn.CloseDeadline(time.Now().Add(timeout))
}

// declare declares those of exchanges this connection has not declared yet,
// on a short-lived channel: a declaration the broker refuses (say, an
// existing exchange of another type) closes only that channel, not the
// publishing one.
func (s *amqpSession) declare(exchanges []string) error {
	s.declareMu.Lock()
	defer s.declareMu.Unlock()
	var todo []string
	for _, name := range exchanges {
		if !s.declared[name] && !slices.Contains(todo, name) {
			todo = append(todo, name)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	ch, err := s.conn.Channel()
	if err != nil {
		return s.declareError("opening a channel to declare exchanges", err)
	}
	defer func() { _ = ch.Close() }()
	for _, name := range todo {
		if err := ch.ExchangeDeclare(name, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
			return s.declareError("declaring exchange "+name, err)
		}
		s.declared[name] = true
	}
	return nil
}

// declareError classifies a declaration failure: retryable when the
// connection is gone, final when the broker refused.
func (s *amqpSession) declareError(what string, err error) error {
	if s.conn.IsClosed() {
		lostErr := fmt.Errorf("%w: %s: %w", errSessionLost, what, err)
		s.fail(lostErr)
		return lostErr
	}
	return fmt.Errorf("%s: %w", what, err)
}
