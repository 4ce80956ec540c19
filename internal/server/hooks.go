package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/hooksapi"
	"github.com/hopper-ci/hopper/internal/maintenance"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/queueapi"
	"github.com/hopper-ci/hopper/internal/store"
)

// hookService is the Hooks service of a running server: its API routes
// and the firer they share with the scheduler (a maintenance duty). Hooks create
// tasks through the queue's own createTask, which exists only once the
// API server is built, hence bind.
type hookService struct {
	routes []api.Route
	firer  *hooksapi.Firer
	// listener fires hooks for Pulse messages, and amqp publishes hook
	// changes (both nil without a broker).
	listener *maintenance.HookListener
	amqp     *events.AMQP

	mu  sync.RWMutex
	srv *queueapi.Server
}

// newHookService builds the service; amqpURL is the broker hooks'
// bindings consume from ("" refuses bindings).
func newHookService(sec *Security, st store.Store, clock queue.Clock, log *slog.Logger, version, amqpURL string) (*hookService, error) {
	h := &hookService{}
	h.firer = &hooksapi.Firer{Store: st, Roles: sec.Roles, Clock: clock, Log: log,
		Tasks: hooksapi.TaskCreatorFunc(h.createTask)}
	var (
		changed   func()
		publisher events.Publisher
	)
	if amqpURL != "" {
		h.listener = &maintenance.HookListener{Store: st, Firer: h.firer, AMQP: amqpURL, Logger: log}
		changed = h.listener.Changed
		amqp, err := events.NewAMQP(events.AMQPOptions{URL: amqpURL, ExchangePrefix: hooksapi.HooksExchangePrefix,
			ConnectionName: events.DefaultConnectionName + "-hooks", Logger: log})
		if err != nil {
			return nil, fmt.Errorf("starting the hooks' AMQP publisher: %w", err)
		}
		h.amqp, publisher = amqp, amqp
	}
	h.routes = hooksapi.Routes(hooksapi.Deps{Store: st, Sealer: sec.Sealer, Firer: h.firer, Caller: sec.Authorizer.Caller,
		PulseAvailable: amqpURL != "", Changed: changed, Events: publisher, Logger: log, Version: version})
	return h, nil
}

// Close stops the service's publisher.
func (h *hookService) Close() {
	if h.amqp != nil {
		_ = h.amqp.Close()
	}
}

// duties are the service's background duties: the scheduler, and the
// Pulse listener when there is a broker.
func (h *hookService) duties(log *slog.Logger) []maintenance.Service {
	duties := []maintenance.Service{&maintenance.HookScheduler{Firer: h.firer, Logger: log}}
	if h.listener != nil {
		duties = append(duties, h.listener)
	}
	return duties
}

// bind gives the service the API server whose createTask hooks use.
func (h *hookService) bind(srv *queueapi.Server) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.srv = srv
}

func (h *hookService) createTask(ctx context.Context, taskID string, body []byte, clientID string, scopes []string) (*queue.TaskState, error) {
	h.mu.RLock()
	srv := h.srv
	h.mu.RUnlock()
	if srv == nil {
		return nil, errors.New("the queue is not serving yet")
	}
	return srv.CreateTaskAs(ctx, taskID, body, clientID, scopes)
}
