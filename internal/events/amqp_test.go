package events

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testLogger sends the publisher's logs to the test's output.
func testLogger(t *testing.T) *slog.Logger {
	t.Helper()
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// refusedAddr returns a loopback address nothing listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestNewAMQPOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		url     string
		wantErr string
	}{
		{"no URL", "", "needs a broker URL"},
		{"wrong scheme", "http://guest:s3cret@127.0.0.1:5672/", "parsing the AMQP broker URL"},
		{"bad port", "amqp://guest:s3cret@127.0.0.1:notaport/", "parsing the AMQP broker URL"},
		// An unescaped "/" ends the authority early, so net/url complains
		// about a "port" that is really half of the password.
		{"unescaped slash in password", "amqp://guest:zz/s3cret@127.0.0.1:5672/", "percent-encoded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, err := NewAMQP(AMQPOptions{URL: tt.url})
			require.Nil(t, a)
			require.ErrorContains(t, err, tt.wantErr)
			require.NotContains(t, err.Error(), "s3cret", "errors must not leak the broker password")
			require.NotContains(t, err.Error(), "zz", "errors must not leak the broker password")
		})
	}
}

func TestAMQPDefaults(t *testing.T) {
	t.Parallel()
	a, err := NewAMQP(AMQPOptions{URL: "amqp://guest:s3cret@" + refusedAddr(t) + "/", Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	require.Equal(t, ExchangePrefix, a.prefix)
	require.Equal(t, "exchange/taskcluster-queue/v1/", a.prefix)
	require.Equal(t, DefaultConnectionName, a.opts.ConnectionName)
	require.Equal(t, DefaultMinBackoff, a.opts.MinBackoff)
	require.Equal(t, DefaultMaxBackoff, a.opts.MaxBackoff)
	require.Equal(t, DefaultDialTimeout, a.opts.DialTimeout)
	require.NotContains(t, a.target, "s3cret")
	require.NotContains(t, a.target, "guest")
}

// TestAMQPUnreachableBroker checks that Publish fails fast (rather than
// stalling the API) when the broker cannot be reached, and that Close is
// prompt and idempotent.
func TestAMQPUnreachableBroker(t *testing.T) {
	t.Parallel()
	a, err := NewAMQP(AMQPOptions{
		URL:        "amqp://guest:s3cret@" + refusedAddr(t) + "/",
		MinBackoff: time.Hour, // one attempt only: the state stays down
		Logger:     testLogger(t),
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := testMessage(t, ExchangeTaskDefined, "aaaaaaaaaaaaaaaaaaaaaa")

	// The first Publish waits for the first attempt, which is refused.
	err = a.Publish(ctx, m)
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorContains(t, err, "connection refused")
	require.NotContains(t, err.Error(), "s3cret")

	start := time.Now()
	err = a.Publish(ctx, m)
	require.ErrorIs(t, err, ErrUnavailable)
	require.Less(t, time.Since(start), time.Second, "Publish must fail fast while the broker is down")

	readyCtx, readyCancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer readyCancel()
	err = a.Ready(readyCtx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "connection refused")

	start = time.Now()
	require.NoError(t, a.Close())
	require.NoError(t, a.Close())
	require.Less(t, time.Since(start), time.Second, "Close must not wait for the back-off")
	require.ErrorIs(t, a.Publish(ctx, m), ErrClosed)
	require.ErrorIs(t, a.Ready(ctx), ErrClosed)
}

// TestAMQPCloseDuringHandshake checks that Close interrupts a connection
// attempt to a peer that accepts TCP but never answers the AMQP handshake.
func TestAMQPCloseDuringHandshake(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
	}()

	a, err := NewAMQP(AMQPOptions{URL: "amqp://guest:guest@" + l.Addr().String() + "/", DialTimeout: time.Minute, Logger: testLogger(t)})
	require.NoError(t, err)

	var server net.Conn
	select {
	case server = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the publisher never connected")
	}
	defer server.Close()

	// A Publish waiting for the attempt ends when its context does.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = a.Publish(ctx, testMessage(t, ExchangeTaskDefined, "aaaaaaaaaaaaaaaaaaaaaa"))
	require.ErrorIs(t, err, context.DeadlineExceeded)

	start := time.Now()
	require.NoError(t, a.Close())
	require.Less(t, time.Since(start), 5*time.Second, "Close must abort the handshake")

	// The publisher closed its end: after the protocol header it sent, the
	// server side reads EOF (a timeout would mean the socket leaked).
	require.NoError(t, server.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = io.Copy(io.Discard, server)
	require.NoError(t, err, "io.Copy returns nil on EOF")
}

func TestAMQPPublishValidatesFirst(t *testing.T) {
	t.Parallel()
	a, err := NewAMQP(AMQPOptions{URL: "amqp://guest:guest@" + refusedAddr(t) + "/", MinBackoff: time.Hour, Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })

	good := testMessage(t, ExchangeTaskDefined, "aaaaaaaaaaaaaaaaaaaaaa")
	bad := good
	bad.Body = json.RawMessage(`{"version":`)
	err = a.Publish(context.Background(), good, bad)
	require.ErrorContains(t, err, "not valid JSON")
	require.NotErrorIs(t, err, ErrUnavailable, "validation happens before any broker work")

	require.NoError(t, a.Publish(context.Background()), "publishing nothing succeeds")
}

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	const minDelay, maxDelay = 100 * time.Millisecond, 2 * time.Second
	tests := []struct {
		failures int
		ceiling  time.Duration
	}{
		{1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond},
		{3, 400 * time.Millisecond},
		{5, 1600 * time.Millisecond},
		{6, 2 * time.Second},
		{60, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.failures), func(t *testing.T) {
			t.Parallel()
			for range 100 {
				d := backoffDelay(minDelay, maxDelay, tt.failures)
				require.GreaterOrEqual(t, d, tt.ceiling/2)
				require.LessOrEqual(t, d, tt.ceiling)
			}
		})
	}
}
