package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hopper-ci/hopper/internal/events"
)

// The queue builds a message from the status it just committed and hands it
// to its publisher; a live view subscribed with a Pulse-style binding sees it.
func Example() {
	bus := events.NewBus(events.BusOptions{})
	defer bus.Close()
	live, cancel := bus.Subscribe(events.Binding(events.ExchangeTaskRunning, "primary.fN1SbArXTPSVFNUvaOlinQ.#"))
	defer cancel()

	status := json.RawMessage(`{"taskId":"fN1SbArXTPSVFNUvaOlinQ","provisionerId":"proj-x","workerType":"builder",
		"taskQueueId":"proj-x/builder","schedulerId":"-","taskGroupId":"fN1SbArXTPSVFNUvaOlinQ","state":"running"}`)
	runID := 0
	msg, err := events.NewTaskEvent(events.ExchangeTaskRunning, events.TaskMessage{
		Status:      status,
		Task:        &events.TaskSummary{Tags: map[string]string{"kind": "build"}},
		RunID:       &runID,
		WorkerGroup: "wg-1",
		WorkerID:    "w-7",
		TakenUntil:  events.Timestamp{Time: time.Date(2024, 1, 1, 0, 20, 0, 0, time.UTC)},
	}, []string{"index.foo.bar"})
	if err != nil {
		panic(err)
	}

	// In the server, the publisher is events.Multi{bus, amqpPublisher}.
	var publisher events.Publisher = bus
	if err := publisher.Publish(context.Background(), msg); err != nil {
		panic(err)
	}

	got := <-live
	fmt.Println(events.ExchangePrefix + got.Exchange)
	fmt.Println(got.RoutingKey)
	fmt.Println(got.CC)
	// Output:
	// exchange/taskcluster-queue/v1/task-running
	// primary.fN1SbArXTPSVFNUvaOlinQ.0.wg-1.w-7.proj-x.builder.-.fN1SbArXTPSVFNUvaOlinQ._
	// [route.index.foo.bar]
}

// A server publishes to RabbitMQ and to its live views at once. (Not run:
// it needs a broker.)
func ExampleNewAMQP() {
	broker, err := events.NewAMQP(events.AMQPOptions{URL: "amqp://guest:guest@127.0.0.1:5672/"})
	if err != nil {
		panic(err)
	}
	defer broker.Close()

	// Report an unreachable broker at start-up, but start anyway: events
	// are best effort and the publisher keeps reconnecting.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := broker.Ready(ctx); err != nil {
		fmt.Println("events will not reach AMQP until the broker is back:", err)
	}

	bus := events.NewBus(events.BusOptions{})
	defer bus.Close()
	publisher := events.Multi{bus, broker}
	_ = publisher
}
