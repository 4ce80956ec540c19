package events

import (
	"context"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// TestConsumerFollowsItsBindings drives a Consumer against a real broker:
// a queue is declared and consumed, bindings that name a missing exchange
// fail and succeed on a later Sync, removed bindings stop delivering, two
// consumers of one queue share its messages, and a queue no longer wanted
// is deleted.
func TestConsumerFollowsItsBindings(t *testing.T) {
	t.Parallel()
	url := amqpTestURL(t)
	ctx := context.Background()
	suffix := randomHex(t)
	exchange := "exchange/hopper-test-consumer-" + suffix
	queue := "queue/hopper-test-consumer/" + suffix

	var mu sync.Mutex
	got := map[string][]string{} // consumer → bodies
	handler := func(name string) func(context.Context, Delivery) error {
		return func(_ context.Context, d Delivery) error {
			require.Equal(t, queue, d.Queue)
			mu.Lock()
			got[name] = append(got[name], string(d.Body))
			mu.Unlock()
			return nil
		}
	}
	a := NewConsumer(ConsumerOptions{URL: url, Handle: handler("a")})
	b := NewConsumer(ConsumerOptions{URL: url, Handle: handler("b")})
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })

	want := map[string][]QueueBinding{queue: {{Exchange: exchange, RoutingKeyPattern: "keep.#"}, {Exchange: exchange, RoutingKeyPattern: "drop.#"}}}
	require.ErrorContains(t, a.Sync(ctx, want), "binding queue", "the exchange does not exist yet")

	conn, err := amqp.Dial(url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, false, true, false, false, nil))
	require.NoError(t, a.Sync(ctx, want), "bound on the next Sync")
	require.NoError(t, b.Sync(ctx, want))
	publish := func(key, body string) {
		require.NoError(t, ch.PublishWithContext(ctx, exchange, key, false, false, amqp.Publishing{Body: []byte(body)}))
	}
	total := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got["a"]) + len(got["b"])
	}
	for i := range 20 {
		publish("keep.x", "k"+string(rune('a'+i)))
	}
	publish("drop.x", "d1")
	publish("other.x", "o1")
	require.Eventually(t, func() bool { return total() == 21 }, 10*time.Second, 10*time.Millisecond)
	mu.Lock()
	require.NotEmpty(t, got["a"], "both consumers take messages")
	require.NotEmpty(t, got["b"])
	mu.Unlock()

	// Without the drop.# binding (on either consumer: bindings are the
	// queue's), drop messages no longer arrive.
	// Published as mandatory, a message no queue takes comes back to the
	// publisher: proof that it will never be delivered.
	want[queue] = want[queue][:1]
	require.NoError(t, a.Sync(ctx, want))
	returned := ch.NotifyReturn(make(chan amqp.Return, 1))
	require.NoError(t, ch.PublishWithContext(ctx, exchange, "drop.x", true, false, amqp.Publishing{Body: []byte("d2")}))
	select {
	case r := <-returned:
		require.Equal(t, "d2", string(r.Body))
		require.Equal(t, "NO_ROUTE", r.ReplyText)
	case <-time.After(time.Minute):
		t.Fatal("a message with no binding left was routed")
	}
	publish("keep.x", "k-last")
	require.Eventually(t, func() bool { return total() == 22 }, 10*time.Second, 10*time.Millisecond)

	// A queue no longer wanted is deleted.
	require.NoError(t, a.Sync(ctx, map[string][]QueueBinding{}))
	require.NoError(t, b.Sync(ctx, map[string][]QueueBinding{}))
	check, err := conn.Channel()
	require.NoError(t, err)
	_, err = check.QueueDeclarePassive(queue, true, false, false, false, nil)
	require.Error(t, err, "the queue is gone")
}
