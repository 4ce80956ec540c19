package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testMessage returns a task message for taskID on exchange with routes.
func testMessage(t *testing.T, exchange, taskID string, routes ...string) Message {
	t.Helper()
	status := fmt.Sprintf(`{"taskId":%q,"provisionerId":"proj-x","workerType":"builder","schedulerId":"-","taskGroupId":"fN1SbArXTPSVFNUvaOlinQ","state":"pending","runs":[]}`, taskID)
	body := TaskMessage{Status: json.RawMessage(status), Task: &TaskSummary{}}
	switch exchange {
	case ExchangeTaskDefined:
	case ExchangeTaskPending:
		body.RunID = intPtr(0)
	case ExchangeTaskCompleted, ExchangeTaskFailed, ExchangeTaskException:
		body.RunID, body.WorkerGroup, body.WorkerID = intPtr(0), "wg-1", "w-7"
	default:
		t.Fatalf("testMessage does not build %s messages", exchange)
	}
	m, err := NewTaskEvent(exchange, body, routes)
	require.NoError(t, err)
	return m
}

// drain returns what ch holds right now, without waiting.
func drain(ch <-chan Message) []Message {
	var got []Message
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				return got
			}
			got = append(got, m)
		default:
			return got
		}
	}
}

func routingKeys(ms []Message) []string {
	keys := make([]string, len(ms))
	for i, m := range ms {
		keys[i] = m.Exchange + " " + m.RoutingKey
	}
	return keys
}

func TestBusFiltering(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bus := NewBus(BusOptions{})
	t.Cleanup(func() { require.NoError(t, bus.Close()) })

	defined := testMessage(t, ExchangeTaskDefined, "aaaaaaaaaaaaaaaaaaaaaa", "index.foo.bar")
	pending := testMessage(t, ExchangeTaskPending, "aaaaaaaaaaaaaaaaaaaaaa", "index.foo.bar")
	completed := testMessage(t, ExchangeTaskCompleted, "bbbbbbbbbbbbbbbbbbbbbb", "notify.email.a@b.c.on-failed")

	all, cancelAll := bus.Subscribe(nil)
	defer cancelAll()
	byTask, cancelByTask := bus.Subscribe(Binding("", "primary.aaaaaaaaaaaaaaaaaaaaaa.#"))
	defer cancelByTask()
	pendingOnly, cancelPending := bus.Subscribe(Binding(ExchangeTaskPending, "#"))
	defer cancelPending()
	byRoute, cancelByRoute := bus.Subscribe(Binding("", "route.notify.#"))
	defer cancelByRoute()
	either, cancelEither := bus.Subscribe(AnyOf(
		Binding(ExchangeTaskDefined, "#"),
		Binding("", "route.notify.#.on-failed"),
		// Overlaps with the first: each message still arrives once.
		Binding("", "primary.aaaaaaaaaaaaaaaaaaaaaa.#"),
	))
	defer cancelEither()
	none, cancelNone := bus.Subscribe(Binding(ExchangeTaskFailed, "#"))
	defer cancelNone()

	require.Equal(t, 6, bus.Subscribers())
	require.NoError(t, bus.Publish(ctx, defined, pending, completed))

	require.Equal(t, routingKeys([]Message{defined, pending, completed}), routingKeys(drain(all)))
	require.Equal(t, routingKeys([]Message{defined, pending}), routingKeys(drain(byTask)))
	require.Equal(t, routingKeys([]Message{pending}), routingKeys(drain(pendingOnly)))
	require.Equal(t, routingKeys([]Message{completed}), routingKeys(drain(byRoute)))
	require.Equal(t, routingKeys([]Message{defined, pending, completed}), routingKeys(drain(either)))
	require.Empty(t, drain(none))
	require.Zero(t, bus.Dropped())
}

func TestBusSlowSubscriberDoesNotBlockPublisher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bus := NewBus(BusOptions{Buffer: 4})
	t.Cleanup(func() { require.NoError(t, bus.Close()) })

	// slow never reads; fast only selects task-completed messages, of
	// which there are fewer than its buffer holds.
	slow, cancelSlow := bus.Subscribe(nil)
	defer cancelSlow()
	fast, cancelFast := bus.Subscribe(Binding(ExchangeTaskCompleted, "#"))
	defer cancelFast()

	var msgs []Message
	for i := range 10 {
		exchange := ExchangeTaskPending
		if i%4 == 0 {
			exchange = ExchangeTaskCompleted
		}
		msgs = append(msgs, testMessage(t, exchange, fmt.Sprintf("task%018d", i)))
	}

	done := make(chan error, 1)
	go func() {
		for _, m := range msgs {
			if err := bus.Publish(ctx, m); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Publish blocked on a subscriber that does not read")
	}

	// The slow subscriber kept the first four and lost the other six; the
	// fast one lost nothing.
	require.Equal(t, routingKeys(msgs[:4]), routingKeys(drain(slow)))
	require.Equal(t, routingKeys([]Message{msgs[0], msgs[4], msgs[8]}), routingKeys(drain(fast)))
	require.Equal(t, uint64(6), bus.Dropped())

	// Once it has caught up, the slow subscriber receives again.
	require.NoError(t, bus.Publish(ctx, msgs[9]))
	require.Equal(t, routingKeys(msgs[9:]), routingKeys(drain(slow)))
	require.Equal(t, uint64(6), bus.Dropped())
}

func TestBusCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bus := NewBus(BusOptions{})
	t.Cleanup(func() { require.NoError(t, bus.Close()) })
	m := testMessage(t, ExchangeTaskDefined, "aaaaaaaaaaaaaaaaaaaaaa")

	ch, cancel := bus.Subscribe(nil)
	other, cancelOther := bus.Subscribe(nil)
	defer cancelOther()
	require.NoError(t, bus.Publish(ctx, m))
	cancel()
	cancel() // idempotent

	// The buffered message is still readable, then the channel is closed.
	got, ok := <-ch
	require.True(t, ok)
	require.Equal(t, m.RoutingKey, got.RoutingKey)
	_, ok = <-ch
	require.False(t, ok, "a cancelled subscription's channel is closed")

	require.Equal(t, 1, bus.Subscribers())
	require.NoError(t, bus.Publish(ctx, m))
	require.Len(t, drain(other), 2)
}

func TestBusClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bus := NewBus(BusOptions{})
	ch, cancel := bus.Subscribe(nil)

	require.NoError(t, bus.Close())
	require.NoError(t, bus.Close())
	_, ok := <-ch
	require.False(t, ok, "Close closes subscribers' channels")
	cancel() // after Close: must not panic on a double close

	err := bus.Publish(ctx, testMessage(t, ExchangeTaskDefined, "aaaaaaaaaaaaaaaaaaaaaa"))
	require.ErrorIs(t, err, ErrClosed)

	late, cancelLate := bus.Subscribe(nil)
	_, ok = <-late
	require.False(t, ok, "subscribing to a closed bus yields a closed channel")
	cancelLate()
	require.Zero(t, bus.Subscribers())
}

// TestBusConcurrency exercises publish, subscribe and cancel together; run
// with -race it checks that a cancel never races a send.
func TestBusConcurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bus := NewBus(BusOptions{Buffer: 8})
	t.Cleanup(func() { require.NoError(t, bus.Close()) })
	m := testMessage(t, ExchangeTaskDefined, "aaaaaaaaaaaaaaaaaaaaaa")

	var publishers, subscribers sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		publishers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := bus.Publish(ctx, m, m); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for range 4 {
		subscribers.Go(func() {
			for range 50 {
				ch, cancel := bus.Subscribe(Binding(ExchangeTaskDefined, "primary.#"))
				<-ch
				cancel()
			}
		})
	}
	subscribers.Wait()
	close(stop)
	publishers.Wait()
	require.Zero(t, bus.Subscribers())
}

type failingPublisher struct{ err error }

func (f failingPublisher) Publish(context.Context, ...Message) error { return f.err }

func TestMulti(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bus := NewBus(BusOptions{})
	t.Cleanup(func() { require.NoError(t, bus.Close()) })
	ch, cancel := bus.Subscribe(nil)
	defer cancel()
	m := testMessage(t, ExchangeTaskDefined, "aaaaaaaaaaaaaaaaaaaaaa")

	broken := errors.New("broker on fire")
	err := Multi{failingPublisher{broken}, bus, failingPublisher{ErrUnavailable}}.Publish(ctx, m)
	require.ErrorIs(t, err, broken)
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorContains(t, err, "publisher 0")
	require.ErrorContains(t, err, "publisher 2")
	require.Len(t, drain(ch), 1, "a failing publisher does not starve the others")

	require.NoError(t, Multi{bus}.Publish(ctx, m))
	require.Len(t, drain(ch), 1)
	require.NoError(t, Multi{}.Publish(ctx, m))
}
