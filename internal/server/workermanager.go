package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/maintenance"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/workermanager"
	"github.com/hopper-ci/hopper/internal/workermanagerapi"
)

// workerManagerService is the Worker Manager service of a running server:
// its routes, the queue views it reads and the resolver of removed
// workers' runs (both need the queue's API server, hence bind) and, with
// a broker, the publisher of its exchanges.
type workerManagerService struct {
	routes []api.Route
	amqp   *events.AMQP
	st     store.Store

	mu       sync.RWMutex
	srv      queueServer
	resolver *maintenance.WorkerRunResolver
}

// queueServer is what the service needs of the queue's server: writing
// the workers' queued records, and publishing task changes.
type queueServer interface {
	Flush(ctx context.Context) error
	maintenance.EventPublisher
}

// defaultProviders are the providers every hopper offers: "static", for
// machines an operator adds with createWorker.
var defaultProviders = []workermanagerapi.Provider{{ID: "static", Type: workermanager.ProviderTypeStatic}}

func newWorkerManagerService(sec *Security, st store.Store, log *slog.Logger, version, amqpURL string) (*workerManagerService, error) {
	s := &workerManagerService{st: st}
	var publisher events.Publisher
	if amqpURL != "" {
		amqp, err := events.NewAMQP(events.AMQPOptions{URL: amqpURL, ExchangePrefix: workermanagerapi.ExchangePrefix,
			ConnectionName: events.DefaultConnectionName + "-worker-manager", Logger: log})
		if err != nil {
			return nil, fmt.Errorf("starting the worker manager's AMQP publisher: %w", err)
		}
		s.amqp, publisher = amqp, amqp
	}
	routes, err := workermanagerapi.Routes(workermanagerapi.Deps{Store: st, Queue: s, Resolver: s, Issuer: workerIssuer{sec.Issuer},
		Providers: defaultProviders, Publisher: publisher, Caller: sec.Authorizer.Caller, Logger: log, Version: version})
	if err != nil {
		return nil, err
	}
	s.routes = routes
	return s, nil
}

// bind gives the service the queue's API server: reads of the queue's
// workers first write what its claims queued, and resolved runs publish
// their events as the queue's own changes do.
func (s *workerManagerService) bind(srv queueServer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srv = srv
	s.resolver = &maintenance.WorkerRunResolver{Store: s.st, Publisher: srv}
}

func (s *workerManagerService) server() (queueServer, *maintenance.WorkerRunResolver) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.srv, s.resolver
}

// settle writes the workers' queued records before a read.
func (s *workerManagerService) settle(ctx context.Context) error {
	srv, _ := s.server()
	if srv == nil {
		return nil
	}
	return srv.Flush(ctx)
}

// GetWorker implements workermanagerapi.QueueWorkers.
func (s *workerManagerService) GetWorker(ctx context.Context, key store.WorkerKey, now time.Time) (*store.Worker, error) {
	if err := s.settle(ctx); err != nil {
		return nil, err
	}
	return s.st.GetWorker(ctx, key, now)
}

// ListWorkers implements workermanagerapi.QueueWorkers.
func (s *workerManagerService) ListWorkers(ctx context.Context, taskQueueID string, now time.Time, quarantined *bool, page store.Page) ([]store.Worker, string, error) {
	if err := s.settle(ctx); err != nil {
		return nil, "", err
	}
	return s.st.ListWorkers(ctx, taskQueueID, now, quarantined, page)
}

// ResolveWorkerRuns implements workermanagerapi.RunResolver.
func (s *workerManagerService) ResolveWorkerRuns(ctx context.Context, key store.WorkerKey, now time.Time) (int, error) {
	_, r := s.server()
	if r == nil {
		return 0, fmt.Errorf("the queue is not serving yet")
	}
	return r.ResolveWorkerRuns(ctx, key, now)
}

// Close stops the service's publisher.
func (s *workerManagerService) Close() {
	if s.amqp != nil {
		_ = s.amqp.Close()
	}
}

// workerIssuer signs registered workers' credentials with the queue's
// issuing identity, as the other temporary credentials hopper hands out.
type workerIssuer struct{ *TaskIssuer }

// WorkerCredentials implements workermanagerapi.Issuer.
func (i workerIssuer) WorkerCredentials(clientID string, scopes []string, start, expiry time.Time) (auth.Credentials, error) {
	return auth.CreateTemporaryCredentials(auth.TemporaryCredentialsOptions{
		ClientID: clientID, Start: start, Expiry: expiry, Scopes: scopes, Issuer: i.creds,
	})
}
