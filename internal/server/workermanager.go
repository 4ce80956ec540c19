package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/maintenance"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/queueapi"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/workermanager"
	"github.com/hopper-ci/hopper/internal/workermanagerapi"
	"github.com/hopper-ci/hopper/internal/workerpool"
	"github.com/hopper-ci/hopper/internal/workerprovider"
)

// apiProviders are the providers every hopper offers: "static", for
// machines an operator adds with createWorker, "docker", for containers on
// the Docker daemons a pool's config names, and "kubernetes", for Pods in
// the cluster hopper runs in (or the one --kubeconfig names), whose
// registrations the cluster vouches for.
func apiProviders(k8s *workerprovider.Kubernetes) []workermanagerapi.Provider {
	return []workermanagerapi.Provider{
		{ID: "static", Type: workermanager.ProviderTypeStatic},
		{ID: "docker", Type: workermanager.ProviderTypeDocker},
		{ID: "kubernetes", Type: workermanager.ProviderTypeKubernetes, Verifier: k8s},
	}
}

// dynamicProviders run the dynamic pools' workers, by provider id.
func dynamicProviders(k8s *workerprovider.Kubernetes) map[string]workerpool.PoolProvider {
	return map[string]workerpool.PoolProvider{
		"docker":     {Type: workermanager.ProviderTypeDocker, Provider: &workerprovider.Docker{}},
		"kubernetes": {Type: workermanager.ProviderTypeKubernetes, Provider: k8s},
	}
}

// klogOnce sets klog's logger once a process (tests run several servers).
var klogOnce sync.Once

// leaseHolder names this process in the worker-pool duties' leases.
func leaseHolder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), ident.NewSlugID())
}

// workerManagerService is the Worker Manager: it reads the queue's worker
// records (after the queue has written what its claims queued) and
// resolves a removed worker's claimed runs through the queue, so their
// events are the queue's; with a broker it publishes its own exchanges.
func (w *wiring) workerManagerService() (service, error) {
	var (
		publisher events.Publisher
		closeFn   func()
	)
	if w.cfg.AMQP != "" {
		amqp, err := events.NewAMQP(events.AMQPOptions{URL: w.cfg.AMQP, ExchangePrefix: workermanagerapi.ExchangePrefix,
			ConnectionName: events.DefaultConnectionName + "-worker-manager", Logger: w.log})
		if err != nil {
			return service{}, fmt.Errorf("starting the worker manager's AMQP publisher: %w", err)
		}
		publisher, closeFn = amqp, func() { _ = amqp.Close() }
	}
	queue := queueWorkers{store: w.store, queue: w.queue,
		resolver: &workerpool.WorkerRunResolver{Store: w.store, Publisher: w.queue}}
	k8s := workerprovider.NewKubernetes(w.cfg.Kubeconfig, w.cfg.RootURL)
	// client-go logs (a watch that lost its connection, …) through klog,
	// a process-wide logger: into the first server's log, not
	// unstructured onto stderr.
	klogOnce.Do(func() { klog.SetSlogLogger(w.log.With("component", "kubernetes")) })
	routes := workermanagerapi.Routes(workermanagerapi.Deps{Store: w.store, Queue: queue, Resolver: queue.resolver,
		Issuer: workerIssuer{w.sec.Issuer}, Providers: apiProviders(k8s), Publisher: publisher,
		Caller: w.sec.Authorizer.Caller, Logger: w.log, Schemas: w.schemas, Version: w.cfg.Version})
	c := w.cfg
	events := workerpool.NewEventsPublisher(publisher, workermanagerapi.Message, w.log)
	errorEvents := workerpool.NewErrorEventsPublisher(publisher, workermanagerapi.ErrorMessage, w.log)
	holder := leaseHolder()
	providers := dynamicProviders(k8s)
	provisioner := &maintenance.Every{What: "provisioning worker pools", Interval: cmp.Or(c.ProvisionInterval, workerpool.DefaultProvisionTick), Logger: w.log,
		Pass: (&workerpool.Provisioner{Store: w.store, Providers: providers, RootURL: c.RootURL, Holder: holder, Events: events,
			ErrorEvents: errorEvents, Clock: c.Clock, Logger: w.log}).Pass}
	scanner := &maintenance.Every{What: "scanning pool workers", Interval: cmp.Or(c.ScanInterval, workerpool.DefaultScanTick), Logger: w.log,
		Pass: (&workerpool.WorkerScanner{Store: w.store, Providers: providers, Resolver: queue.resolver, Holder: holder, Events: events,
			ErrorEvents: errorEvents, Clock: c.Clock, Logger: w.log}).Pass}
	// A Pod that ends or goes is settled at once, not at the next scan; a
	// task that becomes pending is provisioned for at once, not at the
	// next tick, by whichever replica holds the provisioner's lease (the
	// hub relays the other replicas' announcements: PostgreSQL's NOTIFY).
	k8s.Wake, k8s.Logger = scanner.Wake, w.log
	k8s.Accounted = func(ctx context.Context, key workermanager.Key) (bool, error) {
		wk, err := w.store.GetPoolWorker(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return wk.State != workermanager.StateStopped, nil
	}
	w.hub.OnPending(func(string) { provisioner.Wake() })
	return service{routes: routes, close: func() {
		k8s.Close()
		if closeFn != nil {
			closeFn()
		}
	}, duties: []maintenance.Service{provisioner, scanner}}, nil
}

// queueWorkers reads the queue's worker records for the Worker Manager.
type queueWorkers struct {
	store    workermanagerapi.QueueWorkers // the queue's records as stored
	queue    *queueapi.Server
	resolver *workerpool.WorkerRunResolver
}

// GetWorker implements workermanagerapi.QueueWorkers.
func (q queueWorkers) GetWorker(ctx context.Context, key store.WorkerKey, now time.Time) (*store.Worker, error) {
	if err := q.queue.Flush(ctx); err != nil {
		return nil, err
	}
	return q.store.GetWorker(ctx, key, now)
}

// ListWorkers implements workermanagerapi.QueueWorkers.
func (q queueWorkers) ListWorkers(ctx context.Context, now time.Time, filter store.WorkerFilter, page store.Page) ([]store.Worker, string, error) {
	if err := q.queue.Flush(ctx); err != nil {
		return nil, "", err
	}
	return q.store.ListWorkers(ctx, now, filter, page)
}

// poolStanding tells the secrets service which workers the Worker Manager
// stopped (the queue reads it in its claims, store.WorkerStanding).
type poolStanding struct{ store store.WorkerManagerStore }

// WorkerStopped reports whether the Worker Manager stopped the worker
// (its record stopping or stopped); a worker no pool knows is not.
func (p poolStanding) WorkerStopped(ctx context.Context, key store.WorkerKey) (bool, error) {
	w, err := p.store.GetPoolWorker(ctx, workermanager.Key{WorkerPoolID: key.TaskQueueID, WorkerGroup: key.WorkerGroup, WorkerID: key.WorkerID})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return w.State == workermanager.StateStopping || w.State == workermanager.StateStopped, nil
}

// ListHeldRuns implements workermanagerapi.QueueWorkers.
func (q queueWorkers) ListHeldRuns(ctx context.Context, hq store.HeldRunsQuery, now time.Time) ([]store.HeldRun, error) {
	return q.store.ListHeldRuns(ctx, hq, now)
}

// GetTask implements workermanagerapi.QueueWorkers.
func (q queueWorkers) GetTask(ctx context.Context, taskID string) (*queue.TaskState, error) {
	return q.store.GetTask(ctx, taskID)
}

// CredentialsRevoked reports whether clientID names a registered
// worker's credentials whose worker the Worker Manager stopped.
func (p poolStanding) CredentialsRevoked(ctx context.Context, clientID string) (bool, error) {
	k, ok := workermanager.KeyOfClientID(clientID)
	if !ok {
		return false, nil
	}
	return p.WorkerStopped(ctx, store.WorkerKey{TaskQueueID: k.WorkerPoolID, WorkerGroup: k.WorkerGroup, WorkerID: k.WorkerID})
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
