package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/forge"
	"github.com/hopper-ci/hopper/internal/githubapi"
	"github.com/hopper-ci/hopper/internal/maintenance"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/queueapi"
	"github.com/hopper-ci/hopper/internal/store"
)

// githubService is the forge integration of a running server: its routes
// and its two duties (processing deliveries, reporting to the forges).
// Like hooks, it creates tasks through the queue's own createTask, which
// exists only once the API server is built, hence bind.
type githubService struct {
	svc    *githubapi.Service
	routes []api.Route
	duties []maintenance.Service
	amqp   *events.AMQP

	mu  sync.RWMutex
	srv *queueapi.Server
}

func newGithubService(sec *Security, st store.Store, key [32]byte, cfg Config, log *slog.Logger) (*githubService, error) {
	var forges []*forge.Forge
	if cfg.ForgeConfig != "" {
		var err error
		if forges, err = forge.Load(cfg.ForgeConfig); err != nil {
			return nil, err
		}
		for _, f := range forges {
			log.Info("forge configured", "host", f.Host, "kind", f.Kind, "apiUrl", f.APIURL, "app", f.AppID != 0)
		}
	}
	g := &githubService{}
	// Task ids are derived from delivery ids with a key of their own.
	idKey := sha256.Sum256(append([]byte("hopper github task ids\x00"), key[:]...))
	deliveries := &maintenance.GithubDeliveries{Logger: log}
	reports := &maintenance.GithubReports{Logger: log}
	svc := githubapi.Service{Store: st, Tasks: githubapi.TaskCreatorFunc(g.createTask), Roles: sec.Roles, Clock: cfg.Clock,
		Log: log, RootURL: cfg.RootURL, IDSecret: idKey[:], Changes: publisherFunc(g.publish),
		Kick: func() { deliveries.Kick(); reports.Kick() }}
	if cfg.AMQP != "" {
		amqp, err := events.NewAMQP(events.AMQPOptions{URL: cfg.AMQP, ExchangePrefix: githubapi.ExchangePrefix,
			ConnectionName: events.DefaultConnectionName + "-github", Logger: log})
		if err != nil {
			return nil, fmt.Errorf("starting the github service's AMQP publisher: %w", err)
		}
		g.amqp, svc.Events = amqp, amqp
	}
	s, err := githubapi.NewService(svc, forges)
	if err != nil {
		return nil, err
	}
	g.svc = s
	deliveries.Processor, reports.Reporter = s, s
	g.routes = githubapi.Routes(s, cfg.Version, time.Now())
	g.duties = []maintenance.Service{deliveries, reports}
	return g, nil
}

// Close stops the service's publisher.
func (g *githubService) Close() {
	if g.amqp != nil {
		_ = g.amqp.Close()
	}
}

func (g *githubService) bind(srv *queueapi.Server) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.srv = srv
}

func (g *githubService) server() *queueapi.Server {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.srv
}

func (g *githubService) createTask(ctx context.Context, taskID string, body []byte, clientID string, scopes []string) (*queue.TaskState, error) {
	srv := g.server()
	if srv == nil {
		return nil, errors.New("the queue is not serving yet")
	}
	return srv.CreateTaskAs(ctx, taskID, body, clientID, scopes)
}

func (g *githubService) publish(ctx context.Context, changes []store.Change) {
	if srv := g.server(); srv != nil {
		srv.Publish(ctx, changes)
	}
}

type publisherFunc func(ctx context.Context, changes []store.Change)

func (f publisherFunc) Publish(ctx context.Context, changes []store.Change) { f(ctx, changes) }
