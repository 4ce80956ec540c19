package queueapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// EventPublisher turns committed changes into Taskcluster's Pulse messages
// and hands them to an events.Publisher from a background goroutine, so a
// slow or absent broker never holds up an API call. Order is preserved;
// when the backlog is full, messages are dropped and counted (events are
// best effort, as in Taskcluster).
type EventPublisher struct {
	out     events.Publisher
	log     *slog.Logger
	queue   chan func() []events.Message
	dropped atomic.Uint64
	done    chan struct{}
	once    sync.Once
}

// NewEventPublisher starts the publishing goroutine.
func NewEventPublisher(out events.Publisher, log *slog.Logger) *EventPublisher {
	p := &EventPublisher{out: out, log: log, queue: make(chan func() []events.Message, 4096), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *EventPublisher) run() {
	defer close(p.done)
	wanted, gated := p.out.(interface{ Wanted() bool })
	for build := range p.queue {
		// A publisher that only feeds live views (no broker) says when
		// nobody watches; the messages are not even built then.
		if gated && !wanted.Wanted() {
			continue
		}
		msgs := build()
		if len(msgs) == 0 {
			continue
		}
		if err := p.out.Publish(context.Background(), msgs...); err != nil {
			p.log.Warn("publishing task events", "error", err, "messages", len(msgs))
		}
	}
}

// Close flushes the backlog and stops; safe to call twice.
func (p *EventPublisher) Close() {
	p.once.Do(func() { close(p.queue) })
	<-p.done
}

// Dropped counts batches of messages dropped because the backlog was full.
func (p *EventPublisher) Dropped() uint64 { return p.dropped.Load() }

// enqueue hands the publishing goroutine a function that builds the
// messages, so encoding them stays off the request path. The changes it
// closes over are never modified after commit.
func (p *EventPublisher) enqueue(build func() []events.Message) {
	select {
	case p.queue <- build:
	default:
		p.dropped.Add(1)
	}
}

// PublishChanges implements Publisher.
func (p *EventPublisher) PublishChanges(_ context.Context, changes []store.Change) {
	p.enqueue(func() []events.Message { return p.changeMessages(changes) })
}

func (p *EventPublisher) changeMessages(changes []store.Change) []events.Message {
	var msgs []events.Message
	for _, ch := range changes {
		for _, e := range ch.Events {
			m, err := taskEventMessage(ch.Task, e)
			if err != nil {
				p.log.Warn("building task event", "kind", e.Kind, "taskId", ch.Task.TaskID, "error", err)
				continue
			}
			msgs = append(msgs, m)
		}
		if g := ch.GroupResolved; g != nil {
			m, err := events.NewTaskGroupEvent(events.ExchangeTaskGroupResolved, groupMessage(g))
			if err == nil {
				msgs = append(msgs, m)
			}
		}
	}
	return msgs
}

// PublishGroupSealed implements GroupPublisher.
func (p *EventPublisher) PublishGroupSealed(_ context.Context, g *store.TaskGroup) {
	p.enqueue(func() []events.Message {
		m, err := events.NewTaskGroupEvent(events.ExchangeTaskGroupSealed, groupMessage(g))
		if err != nil {
			p.log.Warn("building task-group-sealed event", "error", err)
			return nil
		}
		return []events.Message{m}
	})
}

// PublishArtifactCreated announces an artifact (reference, link, error,
// finished object).
func (p *EventPublisher) PublishArtifactCreated(t *queue.TaskState, runID int, a *store.Artifact) {
	status, err := json.Marshal(t.Status())
	if err != nil {
		return
	}
	r := t.Runs[runID]
	body := events.TaskMessage{Status: status, RunID: &runID, WorkerGroup: r.WorkerGroup, WorkerID: r.WorkerID,
		Artifact: &events.ArtifactSummary{StorageType: a.StorageType, Name: a.Name, Expires: events.Timestamp{Time: a.Expires}, ContentType: a.ContentType}}
	m, err := events.NewTaskEvent(events.ExchangeArtifactCreated, body, t.Task.Routes)
	if err != nil {
		p.log.Warn("building artifact-created event", "error", err)
		return
	}
	p.enqueue(func() []events.Message { return []events.Message{m} })
}

func groupMessage(g *store.TaskGroup) events.TaskGroupMessage {
	m := events.TaskGroupMessage{TaskGroupID: g.TaskGroupID, SchedulerID: g.SchedulerID, Expires: events.Timestamp{Time: g.Expires}}
	if g.Sealed != nil {
		m.Sealed = events.Timestamp{Time: *g.Sealed}
	}
	return m
}

func taskEventMessage(t *queue.TaskState, e queue.Event) (events.Message, error) {
	st := e.Status
	if st == nil {
		s := t.Status()
		st = &s
	}
	status, err := json.Marshal(st)
	if err != nil {
		return events.Message{}, err
	}
	body := events.TaskMessage{Status: status, Task: &events.TaskSummary{Tags: t.Task.Tags}}
	if e.RunID >= 0 {
		runID := e.RunID
		body.RunID = &runID
	}
	switch e.Kind {
	case queue.EventTaskRunning:
		body.WorkerGroup, body.WorkerID = e.WorkerGroup, e.WorkerID
		if e.TakenUntil != nil {
			body.TakenUntil = events.Timestamp{Time: e.TakenUntil.Time}
		}
	case queue.EventTaskCompleted, queue.EventTaskFailed, queue.EventTaskException:
		body.WorkerGroup, body.WorkerID = e.WorkerGroup, e.WorkerID
	}
	return events.NewTaskEvent(e.Kind, body, t.Task.Routes)
}
