package events

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// The tests in this file publish to a real RabbitMQ named by
// HOPPER_TEST_AMQP (e.g. amqp://guest:guest@127.0.0.1:5672/). Each uses its
// own exchange prefix and queues, deleted afterwards, so that they can run in
// parallel with each other and with anything else using the broker.

func amqpTestURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("HOPPER_TEST_AMQP")
	if u == "" {
		t.Skip("HOPPER_TEST_AMQP not set: no RabbitMQ to publish to")
	}
	return u
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// randomTaskID returns a fresh 22-character slug, so that bindings on
// primary.<taskId>.# see only this test's messages.
func randomTaskID(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return base64.RawURLEncoding.EncodeToString(b)
}

// testPrefix returns an exchange prefix private to the test and deletes the
// exchanges under it when the test ends.
func testPrefix(t *testing.T, b *testBroker) string {
	t.Helper()
	prefix := "exchange/hopper-test-" + randomHex(t) + "/v1/"
	t.Cleanup(func() {
		for _, name := range []string{
			ExchangeTaskDefined, ExchangeTaskPending, ExchangeTaskRunning, ExchangeArtifactCreated,
			ExchangeTaskCompleted, ExchangeTaskFailed, ExchangeTaskException,
			ExchangeTaskGroupResolved, ExchangeTaskGroupSealed,
		} {
			b.withChannel(t, func(ch *amqp.Channel) error { return ch.ExchangeDelete(prefix+name, false, false) })
		}
	})
	return prefix
}

// testBroker is the test's own connection to RabbitMQ, playing the Pulse
// consumer.
type testBroker struct {
	conn *amqp.Connection
	ch   *amqp.Channel
}

func newTestBroker(t *testing.T) *testBroker {
	t.Helper()
	conn, err := amqp.Dial(amqpTestURL(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	return &testBroker{conn: conn, ch: ch}
}

// withChannel runs f on a fresh channel, since a refused operation closes
// the channel it ran on, and returns f's error.
func (b *testBroker) withChannel(t *testing.T, f func(*amqp.Channel) error) error {
	t.Helper()
	ch, err := b.conn.Channel()
	require.NoError(t, err)
	defer func() { _ = ch.Close() }()
	return f(ch)
}

// declareExchange declares an exchange exactly as the publisher does, so
// that a test can bind to it before the first publication.
func (b *testBroker) declareExchange(t *testing.T, name string) {
	t.Helper()
	require.NoError(t, b.ch.ExchangeDeclare(name, amqp.ExchangeTopic, true, false, false, false, nil))
}

// queue declares a private queue bound to exchange with patterns and
// returns its deliveries.
func (b *testBroker) queue(t *testing.T, exchange string, patterns ...string) <-chan amqp.Delivery {
	t.Helper()
	name := "hopper-test-" + randomHex(t)
	_, err := b.ch.QueueDeclare(name, false, true, true, false, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		b.withChannel(t, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(name, false, false, false); return err })
	})
	for _, p := range patterns {
		require.NoError(t, b.ch.QueueBind(name, p, exchange, false, nil))
	}
	deliveries, err := b.ch.Consume(name, "", true, true, false, false, nil)
	require.NoError(t, err)
	return deliveries
}

func receive(t *testing.T, deliveries <-chan amqp.Delivery) amqp.Delivery {
	t.Helper()
	select {
	case d, ok := <-deliveries:
		require.True(t, ok, "consumer channel closed")
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("no message delivered within 10s")
		return amqp.Delivery{}
	}
}

func requireNothingMore(t *testing.T, deliveries <-chan amqp.Delivery) {
	t.Helper()
	select {
	case d := <-deliveries:
		t.Fatalf("unexpected delivery %s on %s", d.RoutingKey, d.Exchange)
	case <-time.After(300 * time.Millisecond):
	}
}

// countingDialer records every transport connection the publisher opens.
// The first connection can be made to fail on demand.
type countingDialer struct {
	mu    sync.Mutex
	conns []net.Conn

	failReads, failWrites atomic.Bool // affect the first connection only
}

func (d *countingDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.conns) == 0 {
		c = &faultyConn{Conn: c, d: d}
	}
	d.conns = append(d.conns, c)
	return c, nil
}

// faultyConn breaks (closing the socket, as a network failure would) on the
// first read or write after its dialer's flag is set.
type faultyConn struct {
	net.Conn
	d *countingDialer
}

func (c *faultyConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.d.failReads.Load() {
		_ = c.Conn.Close()
		return 0, errors.New("injected read failure")
	}
	return n, err
}

func (c *faultyConn) Write(p []byte) (int, error) {
	if c.d.failWrites.Load() {
		_ = c.Conn.Close()
		return 0, errors.New("injected write failure")
	}
	return c.Conn.Write(p)
}

func (d *countingDialer) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.conns)
}

func (d *countingDialer) last() net.Conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conns[len(d.conns)-1]
}

func newTestPublisher(t *testing.T, opts AMQPOptions) *AMQP {
	t.Helper()
	opts.URL = amqpTestURL(t)
	opts.ConnectionName = "hopper-events-test-" + t.Name()
	if opts.MinBackoff == 0 {
		opts.MinBackoff = 20 * time.Millisecond
	}
	opts.Logger = testLogger(t)
	a, err := NewAMQP(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, a.Ready(ctx))
	return a
}

// completedMessage is the §6.3 example for a fresh taskId.
func completedMessage(t *testing.T, taskID string, routes []string) Message {
	t.Helper()
	status := strings.ReplaceAll(specStatus, `"taskId": "fN1SbArXTPSVFNUvaOlinQ"`, fmt.Sprintf(`"taskId": %q`, taskID))
	m, err := NewTaskEvent(ExchangeTaskCompleted, TaskMessage{
		Status: json.RawMessage(status), Task: &TaskSummary{}, RunID: intPtr(0), WorkerGroup: "wg-1", WorkerID: "w-7",
	}, routes)
	require.NoError(t, err)
	return m
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestAMQPIntegrationPublish(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	b := newTestBroker(t)
	prefix := testPrefix(t, b)
	a := newTestPublisher(t, AMQPOptions{ExchangePrefix: prefix})

	exchange := prefix + ExchangeTaskCompleted
	b.declareExchange(t, exchange)
	taskID := randomTaskID(t)
	// Both bindings match the message; RabbitMQ still delivers it once.
	both := b.queue(t, exchange, "primary."+taskID+".#", "route.index.#")
	// Only a CC key matches.
	byCC := b.queue(t, exchange, "route.notify.#")
	// Nothing matches.
	other := b.queue(t, exchange, "primary."+randomTaskID(t)+".#", "route.index.nope.#")

	m := completedMessage(t, taskID, specRoutes)
	require.NoError(t, a.Publish(ctx, m))

	wantKey := "primary." + taskID + ".0.wg-1.w-7.proj-x.builder.-.fN1SbArXTPSVFNUvaOlinQ._"
	for _, deliveries := range []<-chan amqp.Delivery{both, byCC} {
		d := receive(t, deliveries)
		require.Equal(t, exchange, d.Exchange)
		require.Equal(t, wantKey, d.RoutingKey, "CC delivery keeps the primary routing key")
		require.Equal(t, "application/json", d.ContentType)
		require.Equal(t, "utf-8", d.ContentEncoding)
		require.Equal(t, amqp.Persistent, d.DeliveryMode)
		require.Equal(t, amqp.Table{"CC": []any{"route.index.foo.bar", "route.notify.email.a@b.c.on-failed"}}, d.Headers)
		require.JSONEq(t, string(m.Body), string(d.Body))
		requireNothingMore(t, deliveries)
	}
	requireNothingMore(t, other)
}

// TestAMQPIntegrationBatchOrder publishes several exchanges in one call; a
// queue bound to all of them receives the messages in publication order.
func TestAMQPIntegrationBatchOrder(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	b := newTestBroker(t)
	prefix := testPrefix(t, b)
	a := newTestPublisher(t, AMQPOptions{ExchangePrefix: prefix})

	taskID := randomTaskID(t)
	msgs := []Message{
		testMessage(t, ExchangeTaskDefined, taskID),
		testMessage(t, ExchangeTaskPending, taskID),
		testMessage(t, ExchangeTaskException, taskID),
		testMessage(t, ExchangeTaskPending, taskID),
	}
	name := "hopper-test-" + randomHex(t)
	_, err := b.ch.QueueDeclare(name, false, true, true, false, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		b.withChannel(t, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(name, false, false, false); return err })
	})
	for _, ex := range []string{ExchangeTaskDefined, ExchangeTaskPending, ExchangeTaskException} {
		b.declareExchange(t, prefix+ex)
		require.NoError(t, b.ch.QueueBind(name, "primary."+taskID+".#", prefix+ex, false, nil))
	}
	deliveries, err := b.ch.Consume(name, "", true, true, false, false, nil)
	require.NoError(t, err)

	require.NoError(t, a.Publish(ctx, msgs...))
	for _, m := range msgs {
		d := receive(t, deliveries)
		require.Equal(t, prefix+m.Exchange, d.Exchange)
		require.Equal(t, m.RoutingKey, d.RoutingKey)
		require.Contains(t, d.Headers, "CC", "the CC header is sent even when empty")
		require.Empty(t, d.Headers["CC"])
	}
	requireNothingMore(t, deliveries)
}

func TestAMQPIntegrationDefaultPrefix(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	b := newTestBroker(t)
	a := newTestPublisher(t, AMQPOptions{})

	// The real, shared exchange: declared idempotently, never deleted.
	exchange := "exchange/taskcluster-queue/v1/task-defined"
	b.declareExchange(t, exchange)
	taskID := randomTaskID(t)
	deliveries := b.queue(t, exchange, "primary."+taskID+".*.*.*.*.*.*.*.#")

	m := testMessage(t, ExchangeTaskDefined, taskID)
	require.NoError(t, a.Publish(ctx, m))
	d := receive(t, deliveries)
	require.Equal(t, exchange, d.Exchange)
	require.Equal(t, m.RoutingKey, d.RoutingKey)
}

func TestAMQPIntegrationDeclaresExchangesOnFirstUse(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	b := newTestBroker(t)
	prefix := testPrefix(t, b)
	a := newTestPublisher(t, AMQPOptions{ExchangePrefix: prefix})
	exchange := prefix + ExchangeTaskPending

	declare := func(kind string, durable, autoDelete, passive bool) error {
		return b.withChannel(t, func(ch *amqp.Channel) error {
			if passive {
				return ch.ExchangeDeclarePassive(exchange, kind, durable, autoDelete, false, false, nil)
			}
			return ch.ExchangeDeclare(exchange, kind, durable, autoDelete, false, false, nil)
		})
	}
	requireCode := func(err error, code int) {
		t.Helper()
		var ae *amqp.Error
		require.True(t, errors.As(err, &ae), "want AMQP error %d, got %v", code, err)
		require.Equal(t, code, ae.Code)
	}

	requireCode(declare(amqp.ExchangeTopic, true, false, true), amqp.NotFound)
	require.NoError(t, a.Publish(ctx, testMessage(t, ExchangeTaskPending, randomTaskID(t))))
	require.NoError(t, declare(amqp.ExchangeTopic, true, false, true), "the exchange exists after the first publication")

	// Redeclaring with other properties is refused, which pins down the
	// ones the publisher used: topic, durable, not auto-delete.
	require.NoError(t, declare(amqp.ExchangeTopic, true, false, false))
	requireCode(declare(amqp.ExchangeFanout, true, false, false), amqp.PreconditionFailed)
	requireCode(declare(amqp.ExchangeTopic, false, false, false), amqp.PreconditionFailed)
	requireCode(declare(amqp.ExchangeTopic, true, true, false), amqp.PreconditionFailed)

	// Exchanges nobody published to are not declared.
	err := b.withChannel(t, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclarePassive(prefix+ExchangeTaskRunning, amqp.ExchangeTopic, true, false, false, false, nil)
	})
	requireCode(err, amqp.NotFound)
}

// TestAMQPIntegrationRefusedDeclaration: a clash with an existing exchange
// fails the publication without tearing the connection down.
func TestAMQPIntegrationRefusedDeclaration(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	b := newTestBroker(t)
	prefix := testPrefix(t, b)
	require.NoError(t, b.ch.ExchangeDeclare(prefix+ExchangeTaskFailed, amqp.ExchangeFanout, true, false, false, false, nil))
	dialer := &countingDialer{}
	a := newTestPublisher(t, AMQPOptions{ExchangePrefix: prefix, DialFunc: dialer.dial})

	err := a.Publish(ctx, testMessage(t, ExchangeTaskFailed, randomTaskID(t)))
	require.ErrorContains(t, err, "declaring exchange "+prefix+ExchangeTaskFailed)
	require.NotErrorIs(t, err, ErrUnavailable)

	taskID := randomTaskID(t)
	b.declareExchange(t, prefix+ExchangeTaskDefined)
	deliveries := b.queue(t, prefix+ExchangeTaskDefined, "primary."+taskID+".#")
	require.NoError(t, a.Publish(ctx, testMessage(t, ExchangeTaskDefined, taskID)))
	receive(t, deliveries)
	require.Equal(t, 1, dialer.count(), "a refused declaration must not cost the connection")
}

// TestAMQPIntegrationReconnectAfterConnectionLoss cuts the TCP connection
// under the publisher; the next Publish goes out on a new connection.
func TestAMQPIntegrationReconnectAfterConnectionLoss(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	b := newTestBroker(t)
	prefix := testPrefix(t, b)
	dialer := &countingDialer{}
	a := newTestPublisher(t, AMQPOptions{ExchangePrefix: prefix, DialFunc: dialer.dial})

	exchange := prefix + ExchangeTaskPending
	b.declareExchange(t, exchange)
	taskID := randomTaskID(t)
	deliveries := b.queue(t, exchange, "primary."+taskID+".#")
	m := testMessage(t, ExchangeTaskPending, taskID)

	require.NoError(t, a.Publish(ctx, m))
	receive(t, deliveries)
	require.Equal(t, 1, dialer.count())

	// Cut the connection and publish at once: whether the publisher has
	// noticed yet or not, the message must go out on a new connection.
	require.NoError(t, dialer.last().Close())
	require.NoError(t, a.Publish(ctx, m, m))
	receive(t, deliveries)
	receive(t, deliveries)
	requireNothingMore(t, deliveries)
	require.Equal(t, 2, dialer.count())
}

// TestAMQPIntegrationRepublishesWhenSendFails breaks the connection exactly
// when the publisher writes, before it has noticed anything: Publish must
// carry the message over to a new connection.
func TestAMQPIntegrationRepublishesWhenSendFails(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	b := newTestBroker(t)
	prefix := testPrefix(t, b)
	dialer := &countingDialer{}
	a := newTestPublisher(t, AMQPOptions{ExchangePrefix: prefix, DialFunc: dialer.dial})

	exchange := prefix + ExchangeTaskDefined
	b.declareExchange(t, exchange)
	taskID := randomTaskID(t)
	deliveries := b.queue(t, exchange, "primary."+taskID+".#")
	m := testMessage(t, ExchangeTaskDefined, taskID)
	require.NoError(t, a.Publish(ctx, m), "warm up: declare the exchange on the first connection")
	receive(t, deliveries)

	dialer.failWrites.Store(true)
	require.NoError(t, a.Publish(ctx, m))
	receive(t, deliveries)
	requireNothingMore(t, deliveries)
	require.Equal(t, 2, dialer.count())
}

// TestAMQPIntegrationRepublishesWhenConfirmIsLost lets the broker accept the
// messages but breaks the connection before the confirmation is read: the
// publisher cannot know they arrived, so it publishes them again (Pulse
// promises at-least-once delivery, and this is where duplicates come from).
func TestAMQPIntegrationRepublishesWhenConfirmIsLost(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	b := newTestBroker(t)
	prefix := testPrefix(t, b)
	dialer := &countingDialer{}
	a := newTestPublisher(t, AMQPOptions{ExchangePrefix: prefix, DialFunc: dialer.dial})

	exchange := prefix + ExchangeTaskPending
	b.declareExchange(t, exchange)
	taskID := randomTaskID(t)
	deliveries := b.queue(t, exchange, "primary."+taskID+".#")
	m := testMessage(t, ExchangeTaskPending, taskID)
	require.NoError(t, a.Publish(ctx, m), "warm up: declare the exchange on the first connection")
	receive(t, deliveries)

	dialer.failReads.Store(true)
	require.NoError(t, a.Publish(ctx, m))
	// Normally twice (the first copy reached the queue before the cut);
	// once if something else the broker sent tripped the fault first.
	receive(t, deliveries)
	select {
	case <-deliveries:
		t.Log("the message was delivered twice, as expected when a confirmation is lost")
	case <-time.After(300 * time.Millisecond):
		t.Log("the connection broke before the message was sent; delivered once")
	}
	requireNothingMore(t, deliveries)
	require.Equal(t, 2, dialer.count())
}

// TestAMQPIntegrationReconnectAfterServerClose has the broker itself close
// the publisher's connection (CONNECTION_FORCED, as when an operator or a
// node shutdown does), using rabbitmqctl on the broker's host.
func TestAMQPIntegrationReconnectAfterServerClose(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	amqpTestURL(t)
	rabbitmqctl, err := exec.LookPath("rabbitmqctl")
	if err != nil {
		t.Skip("rabbitmqctl not found: cannot have the broker close a connection")
	}
	if out, err := exec.CommandContext(ctx, rabbitmqctl, "-q", "status").CombinedOutput(); err != nil {
		t.Skipf("rabbitmqctl cannot reach the broker (%v): %s", err, out)
	}

	b := newTestBroker(t)
	prefix := testPrefix(t, b)
	a := newTestPublisher(t, AMQPOptions{ExchangePrefix: prefix})

	exchange := prefix + ExchangeTaskRunning
	b.declareExchange(t, exchange)
	taskID := randomTaskID(t)
	deliveries := b.queue(t, exchange, "primary."+taskID+".#")
	m, err := NewTaskEvent(ExchangeTaskRunning, TaskMessage{
		Status: json.RawMessage(strings.ReplaceAll(specStatus, "fN1SbArXTPSVFNUvaOlinQ", taskID)),
		RunID:  intPtr(0), WorkerGroup: "wg-1", WorkerID: "w-7", TakenUntil: Timestamp{time.Now()},
	}, nil)
	require.NoError(t, err)
	require.NoError(t, a.Publish(ctx, m))
	receive(t, deliveries)

	_, sess, _, _ := a.snapshot()
	require.NotNil(t, sess)
	pid := brokerConnectionPID(t, ctx, rabbitmqctl, sess.conn.LocalAddr().String())
	out, err := exec.CommandContext(ctx, rabbitmqctl, "-q", "close_connection", pid, "hopper events test").CombinedOutput()
	require.NoError(t, err, "close_connection: %s", out)

	// The publisher learns of the close from the broker and reconnects.
	require.Eventually(t, func() bool {
		state, now, _, _ := a.snapshot()
		return state == stateUp && now != sess
	}, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, a.Publish(ctx, m))
	receive(t, deliveries)
	requireNothingMore(t, deliveries)
}

// brokerConnectionPID finds the Erlang pid of the broker connection whose
// client end is localAddr.
func brokerConnectionPID(t *testing.T, ctx context.Context, rabbitmqctl, localAddr string) string {
	t.Helper()
	// The table output prints pids as close_connection takes them
	// (<rabbit@host.N.M>); the JSON formatter does not.
	out, err := exec.CommandContext(ctx, rabbitmqctl, "-q", "list_connections", "--no-table-headers", "pid", "name").Output()
	require.NoError(t, err)
	for line := range strings.Lines(string(out)) {
		pid, name, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if ok && strings.HasPrefix(name, localAddr+" ->") {
			return pid
		}
	}
	t.Fatalf("no broker connection from %s in %s", localAddr, out)
	return ""
}

func TestAMQPIntegrationConcurrentPublish(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	b := newTestBroker(t)
	prefix := testPrefix(t, b)
	a := newTestPublisher(t, AMQPOptions{ExchangePrefix: prefix})

	exchange := prefix + ExchangeTaskCompleted
	b.declareExchange(t, exchange)
	deliveries := b.queue(t, exchange, "route.concurrency.#")

	const goroutines, each = 4, 25
	want := map[string]bool{}
	var msgs [goroutines][]Message
	for g := range goroutines {
		for range each {
			m := completedMessage(t, randomTaskID(t), []string{"concurrency.test"})
			msgs[g] = append(msgs[g], m)
			want[m.RoutingKey] = true
		}
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for _, m := range msgs[g] {
				if err := a.Publish(ctx, m); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()

	got := map[string]bool{}
	for range goroutines * each {
		got[receive(t, deliveries).RoutingKey] = true
	}
	require.Equal(t, want, got)
	requireNothingMore(t, deliveries)
}

func TestAMQPIntegrationClose(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	b := newTestBroker(t)
	prefix := testPrefix(t, b)
	a := newTestPublisher(t, AMQPOptions{ExchangePrefix: prefix})
	_, sess, _, _ := a.snapshot()

	require.NoError(t, a.Close())
	require.NoError(t, a.Close())
	require.True(t, sess.conn.IsClosed(), "Close closes the connection")
	require.ErrorIs(t, a.Publish(ctx, testMessage(t, ExchangeTaskDefined, randomTaskID(t))), ErrClosed)
}

// TestAMQPCloseLeavesNoGoroutines checks that Close stops the connection
// goroutine and everything the AMQP library started for the connection. It
// is deliberately not parallel: Go runs it before any parallel test resumes,
// so the goroutines it inspects are its own.
func TestAMQPCloseLeavesNoGoroutines(t *testing.T) {
	ctx := testContext(t)
	opts := AMQPOptions{
		URL:            amqpTestURL(t),
		ExchangePrefix: "exchange/hopper-test-" + randomHex(t) + "/v1/",
		Logger:         testLogger(t),
	}
	t.Cleanup(func() {
		// Remove the exchange the publication declared.
		conn, err := amqp.Dial(opts.URL)
		require.NoError(t, err)
		defer conn.Close()
		ch, err := conn.Channel()
		require.NoError(t, err)
		require.NoError(t, ch.ExchangeDelete(opts.ExchangePrefix+ExchangeTaskDefined, false, false))
	})
	a, err := NewAMQP(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) }) // in case the test fails early
	require.NoError(t, a.Publish(ctx, testMessage(t, ExchangeTaskDefined, randomTaskID(t))))
	require.Contains(t, goroutineStacks(), "amqp091", "the connection's goroutines should be visible")

	require.NoError(t, a.Close())
	require.Eventually(t, func() bool {
		stacks := goroutineStacks()
		return !strings.Contains(stacks, "amqp091") && !strings.Contains(stacks, "events.(*AMQP)")
	}, 5*time.Second, 10*time.Millisecond, "goroutines left after Close:\n%s", goroutineStacks())
}

func goroutineStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
