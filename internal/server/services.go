package server

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/artifacts"
	"github.com/hopper-ci/hopper/internal/authapi"
	"github.com/hopper-ci/hopper/internal/flowapi"
	"github.com/hopper-ci/hopper/internal/hooksapi"
	"github.com/hopper-ci/hopper/internal/hop"
	"github.com/hopper-ci/hopper/internal/hopperapi"
	"github.com/hopper-ci/hopper/internal/indexapi"
	"github.com/hopper-ci/hopper/internal/live"
	"github.com/hopper-ci/hopper/internal/maintenance"
	"github.com/hopper-ci/hopper/internal/object"
	"github.com/hopper-ci/hopper/internal/objectapi"
	"github.com/hopper-ci/hopper/internal/purgecacheapi"
	"github.com/hopper-ci/hopper/internal/queueapi"
	"github.com/hopper-ci/hopper/internal/schema"
	"github.com/hopper-ci/hopper/internal/secretsapi"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/supersederapi"
	"github.com/hopper-ci/hopper/internal/workermanager"
)

// service is one of hopper's services as the composition root runs it:
// its route table (which starts with its health and version routes,
// api.ServiceHealthRoutes), its background duties (internal/maintenance),
// the deletion of its expired rows (run by the one DataExpirer), the
// metrics it adds, and what it does when the server stops.
type service struct {
	routes     []api.Route
	duties     []maintenance.Service
	expiries   []maintenance.Expiry
	collectors []prometheus.Collector
	// handlers are mounted verbatim (path prefix → handler) beside the
	// route tables: protocols that are not Taskcluster API methods (the
	// websocktunnel).
	handlers map[string]http.Handler
	// drain runs before the HTTP server shuts down (ending long-polls and
	// streams), flush after it (no request is served any more), close
	// last, after the duties stopped.
	drain func()
	flush func(ctx context.Context) error
	close func()
}

// services lists every service `hopper serve` runs, in the order they are
// built: a service may use one built before it (the queue's object
// artifacts use the object service; hooks and the index use the queue).
// A new service is one line here and its constructor, a method of wiring
// beside these.
func (w *wiring) services() []func() (service, error) {
	return []func() (service, error){
		w.objectService,
		w.queueService,
		w.authService,
		w.identityService,
		w.loginService,
		w.indexService,
		w.secretsService,
		w.hooksService,
		w.githubService,
		w.purgeCacheService,
		w.supersederService,
		w.flowService,
		w.hopperService,
		w.liveService,
		w.workerManagerService,
		w.notifyService,
		w.interactiveService,
		w.tunnelService,
	}
}

// wiring is what the services' constructors share: the server's
// configuration and infrastructure, and the services built so far that
// others use.
type wiring struct {
	cfg     Config
	store   store.Store
	hub     store.WorkHub // wakes waiting claimWork calls
	sec     *Security
	blobs   artifacts.Backend
	schemas *schema.Registry
	// key is the server's secret key (keys derived from it).
	key [32]byte
	log *slog.Logger
	// events receives the queue's task events (queueapi.EventPublisher);
	// live is the live feed's in-process bus.
	events queueapi.Publisher
	live   *live.Hub

	objects queueapi.ObjectService // nil: the blob store cannot hold objects
	queue   *queueapi.Server
	hooks   *hooksapi.Firer
	// replicas records which replica holds each worker's tunnel and
	// interactive agent, and forwards viewers to it (package hop).
	replicas *hop.Directory
}

// build runs the constructors in order.
func (w *wiring) build() ([]service, error) {
	var out []service
	for _, newService := range w.services() {
		svc, err := newService()
		if err != nil {
			for _, s := range out {
				if s.close != nil {
					s.close()
				}
			}
			return nil, err
		}
		out = append(out, svc)
	}
	return out, nil
}

// objectService is the Object service over the blob store, when it can
// store data server-side (as both of hopper's backends can).
func (w *wiring) objectService() (service, error) {
	b, ok := w.blobs.(object.Blobs)
	if !ok {
		w.log.Warn("the blob store cannot hold objects: the Object service and object artifacts are off")
		return service{}, nil
	}
	svc := &object.Service{Store: w.store, Blobs: b, Clock: w.cfg.Clock, Log: w.log}
	w.objects = objectapi.QueueArtifacts{Service: svc}
	return service{
		routes: objectapi.Routes(objectapi.Deps{Service: svc, Version: w.cfg.Version}),
		duties: []maintenance.Service{&maintenance.Every{What: "expiring objects", Interval: cmp.Or(w.cfg.ExpireEvery, maintenance.DefaultExpireEvery),
			Logger: w.log, Pass: svc.ExpirePass}},
	}, nil
}

// queueService is the Queue: its duties publish what they change through
// it, so their events and metrics are those of API calls.
func (w *wiring) queueService() (service, error) {
	metrics := queueapi.NewMetrics(w.store, w.cfg.Clock)
	q, err := queueapi.New(queueapi.Options{
		Config: queueapi.Config{RootURL: w.cfg.RootURL, ClaimTimeout: w.cfg.ClaimTimeout, LongPoll: w.cfg.LongPoll, Version: w.cfg.Version},
		Store:  w.store, Hub: w.hub, Clock: w.cfg.Clock, Issuer: w.sec.Issuer, Publisher: w.events, Logger: w.log, Metrics: metrics,
		Schemas: w.schemas, Artifacts: w.blobs, Objects: w.objects, PoolState: w.poolState, RefuseStopped: true,
	})
	if err != nil {
		return service{}, err
	}
	w.queue = q
	c := w.cfg
	return service{
		routes:     queueapi.Routes(queueapi.Deps{Server: q}),
		collectors: metrics.Collectors(),
		duties: []maintenance.Service{
			&maintenance.ClaimExpirer{Store: w.store, Publisher: q, Clock: c.Clock, Logger: w.log},
			&maintenance.DeadlineResolver{Store: w.store, Publisher: q, Clock: c.Clock, Logger: w.log, Delay: c.DeadlineDelay},
		},
		expiries: []maintenance.Expiry{maintenance.QueueExpiry(w.store, w.blobs, w.log)},
		drain:    q.Drain,
		// What the last claims queued for the workers' records is written
		// before the store closes.
		flush: q.Flush,
	}, nil
}

func (w *wiring) authService() (service, error) {
	sec := w.sec
	return service{routes: authapi.Routes(authapi.Deps{
		Store: w.store, Sealer: sec.Sealer, Clients: sec.Clients, IsStatic: sec.Clients.IsStatic,
		Roles: sec.Roles, Authenticator: sec.Authenticator, Caller: sec.Authorizer.Caller, Logger: w.log, Version: w.cfg.Version,
		TunnelSecret: tunnelSecret(w.key),
	}), expiries: []maintenance.Expiry{
		{Service: "auth", Run: w.store.ExpireClients},
		maintenance.AuditExpiry(w.store, 0),
	}}, nil
}

func (w *wiring) indexService() (service, error) {
	return service{routes: indexapi.Routes(indexapi.Deps{Store: w.store, Artifacts: w.queue, Version: w.cfg.Version}),
		expiries: []maintenance.Expiry{{Service: "index", Run: func(ctx context.Context, now time.Time) (int, error) {
			entries, namespaces, err := w.store.ExpireIndex(ctx, now)
			return entries + namespaces, err
		}}}}, nil
}

func (w *wiring) secretsService() (service, error) {
	return service{routes: secretsapi.Routes(secretsapi.Deps{Store: w.store, Sealer: w.sec.Sealer, Caller: w.sec.Authorizer.Caller,
		Revoked: poolStanding{w.store}.CredentialsRevoked, Logger: w.log, Version: w.cfg.Version}),
		expiries: []maintenance.Expiry{{Service: "secrets", Run: w.store.ExpireSecrets}}}, nil
}

func (w *wiring) purgeCacheService() (service, error) {
	return service{
		routes:   purgecacheapi.Routes(purgecacheapi.Deps{Store: w.store, Clock: w.cfg.Clock, Version: w.cfg.Version}),
		expiries: []maintenance.Expiry{{Service: "purge-cache", Run: w.store.ExpirePurgeRequests}},
	}, nil
}

func (w *wiring) supersederService() (service, error) {
	return service{routes: supersederapi.Routes(supersederapi.Deps{Store: w.store, Version: w.cfg.Version})}, nil
}

func (w *wiring) flowService() (service, error) {
	return service{routes: flowapi.Routes(flowapi.Deps{Store: w.store, Version: w.cfg.Version})}, nil
}

// hopperService is hopper's own operator views (/api/hopper/v1/).
func (w *wiring) hopperService() (service, error) {
	return service{routes: hopperapi.Routes(hopperapi.Deps{Store: w.store, Version: w.cfg.Version})}, nil
}

// liveService is the web console's live feed; open streams would hold the
// HTTP server's shutdown for its whole timeout, so draining closes them.
func (w *wiring) liveService() (service, error) {
	hub := w.live
	return service{routes: live.Routes(hub, w.cfg.Version), drain: func() { _ = hub.Close() }}, nil
}

// poolState is a queue worker's state in its worker pool, for the queue's
// listWorkers: "standalone" (provider "none") when no pool knows it.
func (w *wiring) poolState(ctx context.Context, key store.WorkerKey) (state, providerID string, err error) {
	pw, err := w.store.GetPoolWorker(ctx, workermanager.Key{WorkerPoolID: key.TaskQueueID, WorkerGroup: key.WorkerGroup, WorkerID: key.WorkerID})
	if errors.Is(err, store.ErrNotFound) {
		return "standalone", "none", nil
	}
	if err != nil {
		return "", "", err
	}
	return string(pw.State), pw.ProviderID, nil
}
