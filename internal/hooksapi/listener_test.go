package hooksapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/store"
)

func hookWith(group, id, bindings string) store.Hook {
	return store.Hook{HookGroupID: group, HookID: id, Bindings: json.RawMessage(bindings)}
}

// TestPulseQueues: a hook with bindings gets its queue, bound as they
// say; one without (or whose bindings do not decode) gets none.
func TestPulseQueues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		hooks  []store.Hook
		want   map[string][]events.QueueBinding
		hookOf map[string][2]string
	}{
		{name: "none", hooks: nil, want: map[string][]events.QueueBinding{}, hookOf: map[string][2]string{}},
		{name: "no bindings", hooks: []store.Hook{hookWith("g", "a", `[]`), hookWith("g", "b", `null`), hookWith("g", "c", `{`)},
			want: map[string][]events.QueueBinding{}, hookOf: map[string][2]string{}},
		{name: "bound", hooks: []store.Hook{
			hookWith("g", "a", `[{"exchange":"exchange/x/v1/e","routingKeyPattern":"#"}]`),
			hookWith("g", "nested/id", `[{"exchange":"exchange/x/v1/e","routingKeyPattern":"a.*"},{"exchange":"exchange/y/v1/f","routingKeyPattern":"b.#"}]`),
			hookWith("g", "unbound", `[]`),
		},
			want: map[string][]events.QueueBinding{
				"queue/hopper-hooks/g/a": {{Exchange: "exchange/x/v1/e", RoutingKeyPattern: "#"}},
				"queue/hopper-hooks/g/nested/id": {{Exchange: "exchange/x/v1/e", RoutingKeyPattern: "a.*"},
					{Exchange: "exchange/y/v1/f", RoutingKeyPattern: "b.#"}},
			},
			hookOf: map[string][2]string{"queue/hopper-hooks/g/a": {"g", "a"}, "queue/hopper-hooks/g/nested/id": {"g", "nested/id"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want, hookOf := pulseQueues(tc.hooks)
			require.Equal(t, tc.want, want)
			require.Equal(t, tc.hookOf, hookOf)
		})
	}
}

// fires records the messages a listener fires hooks for.
type fires struct {
	mu  sync.Mutex
	got []string // "<group>/<id> <body>"
	err error
}

func (f *fires) FireMessage(_ context.Context, hookGroupID, hookID string, body []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, hookGroupID+"/"+hookID+" "+string(body))
	return f.err
}

func (f *fires) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.got...)
}

// hookList is a HookLister over a list the test changes.
type hookList struct {
	mu    sync.Mutex
	hooks []store.Hook
	err   error
}

func (l *hookList) ListHooks(context.Context, string) ([]store.Hook, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]store.Hook(nil), l.hooks...), l.err
}

func (l *hookList) set(hooks ...store.Hook) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hooks = hooks
}

// TestPulseListenerHandle: a message fires the hook of the queue it came
// from; one from a queue no hook has any more fires nothing; the
// firer's error is the handler's, so the broker hands the message back.
func TestPulseListenerHandle(t *testing.T) {
	t.Parallel()
	f := &fires{}
	l := NewPulseListener(&hookList{}, f, "amqp://unused", nil)
	l.hookOf = map[string][2]string{PulseQueue("g", "a"): {"g", "a"}}
	require.NoError(t, l.handle(context.Background(), events.Delivery{Queue: PulseQueue("g", "a"), Body: []byte(`{"n":1}`)}))
	require.NoError(t, l.handle(context.Background(), events.Delivery{Queue: PulseQueue("g", "gone"), Body: []byte(`{"n":2}`)}))
	require.Equal(t, []string{`g/a {"n":1}`}, f.list())
	f.err = errors.New("database down")
	require.ErrorIs(t, l.handle(context.Background(), events.Delivery{Queue: PulseQueue("g", "a"), Body: []byte(`{}`)}), f.err)
}

// TestPulseListenerSyncFailsOnList: a failed read of the hooks is the
// sync's error, which the duty's pass only warns of.
func TestPulseListenerSyncFailsOnList(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	l := NewPulseListener(&hookList{err: boom}, &fires{}, "amqp://unused", nil)
	require.ErrorIs(t, l.Sync(context.Background()), boom)
	require.NoError(t, l.Pass(context.Background()))
}

// TestPulseListenerFollowsHooks drives a listener against a real broker
// (HOPPER_TEST_AMQP): a hook bound to an exchange that does not exist
// yet is bound once it does, its messages fire it and others do not, and
// once the hook is gone its queue is deleted.
func TestPulseListenerFollowsHooks(t *testing.T) {
	t.Parallel()
	url := os.Getenv("HOPPER_TEST_AMQP")
	if url == "" {
		t.Skip("HOPPER_TEST_AMQP not set: no RabbitMQ for the hooks' bindings")
	}
	ctx := context.Background()
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	suffix := hex.EncodeToString(b)
	exchange, group := "exchange/hopper-test-hooks/"+suffix, "listener-"+suffix
	hooks := &hookList{}
	hooks.set(hookWith(group, "bound", `[{"exchange":"`+exchange+`","routingKeyPattern":"keep.#"}]`), hookWith(group, "unbound", `[]`))
	f := &fires{}
	l := NewPulseListener(hooks, f, url, nil)
	t.Cleanup(func() { _ = l.Close() })

	require.ErrorContains(t, l.Sync(ctx), "binding queue", "the exchange does not exist yet")
	conn, err := amqp.Dial(url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, false, true, false, false, nil))
	require.NoError(t, l.Sync(ctx), "bound on the next sync")

	publish := func(key, body string) {
		require.NoError(t, ch.PublishWithContext(ctx, exchange, key, false, false, amqp.Publishing{Body: []byte(body)}))
	}
	publish("drop.x", `{"n":0}`)
	publish("keep.x", `{"n":1}`)
	publish("keep.y", `{"n":2}`)
	want := []string{group + `/bound {"n":1}`, group + `/bound {"n":2}`}
	require.Eventually(t, func() bool { return len(f.list()) >= len(want) }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, want, f.list(), "the bound hook's messages, and only those")

	// The hook goes: its queue is deleted (a passive declare of it fails).
	hooks.set(hookWith(group, "unbound", `[]`))
	require.NoError(t, l.Sync(ctx))
	check, err := conn.Channel()
	require.NoError(t, err)
	_, err = check.QueueDeclarePassive(PulseQueue(group, "bound"), true, false, false, false, nil)
	var amqpErr *amqp.Error
	require.ErrorAs(t, err, &amqpErr)
	require.Equal(t, amqp.NotFound, amqpErr.Code)
}
