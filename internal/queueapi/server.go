// Package queueapi serves Taskcluster's Queue REST API v1
// (/api/queue/v1/…): tasks and their groups, claims and resolutions, task
// queues, provisioners and workers, artifacts. Its route table (Routes)
// is served through the framework of package api; other services reach
// the queue through the narrow interfaces it satisfies (CreateTaskAs for
// hooks, RedirectToLatestArtifact for the index).
package queueapi

import (
	"context"
	"errors"
	"log/slog"
	mathrand "math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/artifacts"
	"github.com/hopper-ci/hopper/internal/clock"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/schema"
	"github.com/hopper-ci/hopper/internal/store"
)

// Defaults of Config's settings.
const (
	// DefaultClaimTimeout is how long a claim lasts (takenUntil − now),
	// Taskcluster's 20 minutes.
	DefaultClaimTimeout = 20 * time.Minute
	// DefaultLongPoll is how long claimWork waits for work, Taskcluster's
	// 20 seconds.
	DefaultLongPoll = 20 * time.Second
	// longPollSpread is the part of the long-poll that a call finding no
	// work is cut short by, at random: a call waits between three
	// quarters and all of LongPoll. Workers that started together (a
	// fleet restarted at once) would otherwise poll again together,
	// every long-poll, for ever: ten thousand requests in one second and
	// none in the next nineteen, and the server sized for the burst.
	// With the spread such a fleet's polls drift apart within minutes.
	// A worker only sees an empty reply a little sooner and polls again.
	longPollSpread = 4 // LongPoll/longPollSpread
)

// longPollFor returns how long this claimWork call may wait.
func (s *Server) longPollFor() time.Duration {
	spread := int64(s.cfg.LongPoll / longPollSpread)
	if spread <= 0 {
		return s.cfg.LongPoll
	}
	return s.cfg.LongPoll - time.Duration(mathrand.Int64N(spread))
}

// Config holds the queue's tunables.
type Config struct {
	// RootURL is the deployment's root URL, without a trailing slash.
	RootURL string
	// ClaimTimeout is how long a claim lasts (takenUntil − now; default
	// DefaultClaimTimeout).
	ClaimTimeout time.Duration
	// LongPoll bounds how long claimWork waits for work (default
	// DefaultLongPoll).
	LongPoll time.Duration
	// MaxDependencies is the deployment's dependency limit (≤ 10000).
	MaxDependencies int
	// Version is reported by __version__.
	Version string
}

// CredentialIssuer mints the temporary credentials a claim carries: the
// run's reclaim, resolve and create-artifact scopes plus the task's scopes.
type CredentialIssuer interface {
	TaskCredentials(taskID string, runID int, workerGroup, workerID string, now, takenUntil time.Time, taskScopes []string) (Credentials, error)
}

// Credentials are Taskcluster temporary credentials.
type Credentials struct {
	ClientID    string `json:"clientId"`
	AccessToken string `json:"accessToken"`
	Certificate string `json:"certificate"`
}

// Publisher receives every committed change, in order, to publish events
// and update metrics.
type Publisher interface {
	PublishChanges(ctx context.Context, changes []store.Change)
}

// Store is the store as the Queue service uses it: the queue's own rows,
// its flow keys (the flow policies' counts and fail-fast groups) and the
// workers' liveness its metrics report.
type Store interface {
	store.TaskStore
	store.TaskGroupStore
	store.TaskQueueStore
	store.ArtifactStore
	MetricsStore
}

// Server is the Queue service: its handlers and what they share.
type Server struct {
	cfg     Config
	store   Store
	hub     store.WorkHub
	clock   clock.Clock
	schemas *schema.Registry
	creds   CredentialIssuer
	pub     Publisher
	log     *slog.Logger
	metrics *Metrics
	live    liveness
	started time.Time
	blobs   artifacts.Backend
	objects ObjectService
	// poolState is Options.PoolState.
	poolState func(ctx context.Context, key store.WorkerKey) (state, providerID string, err error)
	// refuseStopped is Options.RefuseStopped.
	refuseStopped bool

	// touched remembers when this process last wrote a worker's
	// bookkeeping records (store.WorkerKey → time.Time).
	touched sync.Map
	touches touches
	// parked are the claimWork calls waiting parked (park.go).
	parked parkedClaims

	drainOnce sync.Once
	draining  chan struct{}
}

// Options wires a Server.
type Options struct {
	Config Config
	Store  Store
	// Hub wakes waiting claimWork calls (default: Store's, when it has
	// one, as *store.DB does).
	Hub       store.WorkHub
	Clock     clock.Clock
	Issuer    CredentialIssuer
	Publisher Publisher
	Logger    *slog.Logger
	Metrics   *Metrics
	// Schemas validates createTask bodies of CreateTaskAs (nil: a
	// registry of its own); the server's api.Server shares it.
	Schemas *schema.Registry
	// Artifacts stores artifact data (the s3 storage type).
	Artifacts artifacts.Backend
	// Objects, when set, keeps the data of object artifacts
	// (objectartifacts.go).
	Objects ObjectService
	// PoolState, when set, says a worker's state in its worker pool
	// (requested, running, stopping, stopped; "standalone" when no pool
	// knows it) and its provider, for listWorkers.
	PoolState func(ctx context.Context, key store.WorkerKey) (state, providerID string, err error)
	// RefuseStopped makes claimWork, claimTask and reclaimTask refuse a
	// worker its pool's manager has stopped (removeWorker, or its
	// scanner): such a worker's credentials last until they expire (days).
	// The store reads the worker's standing in the claim's first round
	// trip (store.ClaimWorkParams.CheckStopped, UpdateTaskParams.Standing).
	RefuseStopped bool
}

// New builds the Queue service.
func New(opts Options) (*Server, error) {
	schemas := opts.Schemas
	if schemas == nil {
		var err error
		if schemas, err = schema.New(); err != nil {
			return nil, err
		}
	}
	cfg := opts.Config
	cfg.RootURL = strings.TrimRight(cfg.RootURL, "/")
	if cfg.ClaimTimeout <= 0 {
		cfg.ClaimTimeout = DefaultClaimTimeout
	}
	if cfg.LongPoll <= 0 {
		cfg.LongPoll = DefaultLongPoll
	}
	if cfg.MaxDependencies <= 0 || cfg.MaxDependencies > queue.MaxDependencies {
		cfg.MaxDependencies = queue.MaxDependencies
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	s := &Server{
		cfg: cfg, store: opts.Store, clock: opts.Clock, schemas: schemas,
		creds: opts.Issuer, pub: opts.Publisher, log: opts.Logger,
		metrics: opts.Metrics, draining: make(chan struct{}),
		blobs: opts.Artifacts, objects: opts.Objects, live: newLiveness(cfg), poolState: opts.PoolState, refuseStopped: opts.RefuseStopped,
	}
	if s.metrics != nil && s.metrics.queues != nil {
		// The metrics are built before the queue they describe.
		s.metrics.queues.liveness = s.live
	}
	if s.clock == nil {
		s.clock = clock.System{}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.creds == nil {
		return nil, errors.New("queueapi: a CredentialIssuer is required")
	}
	s.hub = opts.Hub
	if s.hub == nil {
		hub, ok := opts.Store.(store.WorkHub)
		if !ok {
			return nil, errors.New("queueapi: a wake-up hub (store.WorkHub) is required")
		}
		s.hub = hub
	}
	s.started = s.clock.Now()
	return s, nil
}

// Deps are what the Queue API's routes need: the queue's server, which
// holds what its calls share (parked claims, batched worker records, the
// caches).
type Deps struct {
	Server *Server
}

// Routes is the Queue API's route table, artifacts included.
func Routes(d Deps) []api.Route {
	return append(d.Server.queueRoutes(), d.Server.artifactRoutes()...)
}

// Drain ends waiting claimWork long-polls early (with no tasks), for a
// graceful shutdown.
func (s *Server) Drain() {
	s.drainOnce.Do(func() {
		close(s.draining)
		s.parked.drain()
	})
}
