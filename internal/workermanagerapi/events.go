package workermanagerapi

import (
	"encoding/json"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/workermanager"
)

// ExchangePrefix is the prefix of the WorkerManagerEvents exchanges, as
// the official clients' reference names them.
const ExchangePrefix = "exchange/taskcluster-worker-manager/v1/"

// The exchanges (short names).
const (
	exchangePoolCreated   = "worker-pool-created"
	exchangePoolUpdated   = "worker-pool-updated"
	exchangePoolError     = "worker-pool-error"
	exchangeWorkerRunning = "worker-running"
	exchangeWorkerStopped = "worker-stopped"
	exchangeWorkerRemoved = "worker-removed"
	// ExchangeWorkerRequested is published by the provisioner.
	ExchangeWorkerRequested = "worker-requested"
)

// message is a body with the routing-key fields it names.
type message struct {
	body map[string]any
	key  routingKey
}

type routingKey struct{ providerID, workerPoolID, workerGroup, workerID, launchConfigID string }

// String builds Taskcluster's routing key:
// primary.<providerId>.<provisionerId>.<workerType>.<workerGroup>.<workerId>.<launchConfigId>._
// with "_" for what a message does not name.
func (k routingKey) String() string {
	p, w := workermanager.SplitPoolID(k.workerPoolID)
	out := "primary"
	for _, v := range []string{k.providerID, p, w, k.workerGroup, k.workerID, k.launchConfigID} {
		if v == "" {
			v = "_"
		}
		out += "." + v
	}
	return out + "._"
}

func poolMessage(p *workermanager.Pool, previous string) message {
	body := map[string]any{"workerPoolId": p.WorkerPoolID, "providerId": p.ProviderID}
	if previous != "" {
		body["previousProviderId"] = previous
	}
	return message{body, routingKey{providerID: p.ProviderID, workerPoolID: p.WorkerPoolID}}
}

func errorMessage(p *workermanager.Pool, e *workermanager.PoolError, group, id string) message {
	body := map[string]any{"workerPoolId": p.WorkerPoolID, "providerId": p.ProviderID, "errorId": e.ErrorID, "kind": e.Kind,
		"title": e.Title, "timestamp": queue.NewTime(e.Reported)}
	if group != "" {
		body["workerGroup"], body["workerId"] = group, id
	}
	if e.LaunchConfigID != "" {
		body["launchConfigId"] = e.LaunchConfigID
	}
	return message{body, routingKey{p.ProviderID, p.WorkerPoolID, group, id, e.LaunchConfigID}}
}

// WorkerMessage is the body of the worker-* exchanges (reason only for
// worker-removed).
func workerMessage(w *workermanager.Worker, reason string, now time.Time) message {
	body := map[string]any{"workerPoolId": w.WorkerPoolID, "providerId": w.ProviderID, "workerGroup": w.WorkerGroup,
		"workerId": w.WorkerID, "capacity": w.Capacity, "timestamp": queue.NewTime(now)}
	if reason != "" {
		body["reason"] = reason
	}
	if w.LaunchConfigID != "" {
		body["launchConfigId"] = w.LaunchConfigID
	}
	return message{body, routingKey{w.ProviderID, w.WorkerPoolID, w.WorkerGroup, w.WorkerID, w.LaunchConfigID}}
}

// Message builds an event of one of the worker exchanges, for the
// background duties (the provisioner and the scanner) to publish.
func Message(exchange string, w *workermanager.Worker, reason string, now time.Time) (events.Message, error) {
	return encode(exchange, workerMessage(w, reason, now))
}

// ErrorMessage builds the worker-pool-error event of an error the
// background duties recorded (a worker that could not start, died or did
// not register), as Taskcluster's providers announce theirs.
func ErrorMessage(p *workermanager.Pool, e *workermanager.PoolError) (events.Message, error) {
	group, _ := e.Extra["workerGroup"].(string)
	id, _ := e.Extra["workerId"].(string)
	return encode(exchangePoolError, errorMessage(p, e, group, id))
}

func encode(exchange string, m message) (events.Message, error) {
	body, err := json.Marshal(m.body)
	if err != nil {
		return events.Message{}, err
	}
	return events.Message{Exchange: exchange, RoutingKey: m.key.String(), Body: body}, nil
}

// publish sends an event after the change is committed; a failure is
// logged, never the call's (as the queue's events).
func (h *handlers) publish(c *api.Call, exchange string, m message) {
	if h.Publisher == nil {
		return
	}
	msg, err := encode(exchange, m)
	if err == nil {
		err = h.Publisher.Publish(c.Context(), msg)
	}
	if err != nil {
		h.Logger.Warn("publishing a worker-manager event", "exchange", exchange, "error", err)
	}
}

// audit logs a change and who made it.
func (h *handlers) audit(c *api.Call, what string, args ...any) {
	h.Logger.Info(what, append(args, "clientId", h.clientID(c))...)
}
