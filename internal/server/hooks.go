package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/hooksapi"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// hookService is the Hooks service of a running server: its API routes,
// the firer they share with the scheduler, and the scheduler. Hooks create
// tasks through the queue's own createTask, which exists only once the
// API server is built, hence bind.
type hookService struct {
	routes    []api.Route
	firer     *hooksapi.Firer
	scheduler *HookScheduler

	mu  sync.RWMutex
	srv *api.Server
}

func newHookService(sec *Security, st store.Store, clock queue.Clock, log *slog.Logger, version string, pulse bool) *hookService {
	h := &hookService{}
	h.firer = &hooksapi.Firer{Store: st, Roles: sec.Roles, Clock: clock, Log: log,
		Tasks: hooksapi.TaskCreatorFunc(h.createTask)}
	h.routes = hooksapi.Routes(hooksapi.Deps{Store: st, Sealer: sec.Sealer, Firer: h.firer, Caller: sec.Authorizer.Caller,
		PulseAvailable: pulse, Logger: log, Version: version})
	h.scheduler = &HookScheduler{Firer: h.firer, Log: log}
	return h
}

// bind gives the service the API server whose createTask hooks use.
func (h *hookService) bind(srv *api.Server) {
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

// HookScheduler fires scheduled hooks when they are due: every Tick it
// fires every due hook (see hooksapi.Firer.FireDue). Every replica runs
// one; each due time is claimed by one of them and recorded once.
type HookScheduler struct {
	Firer *hooksapi.Firer
	Log   *slog.Logger
	// Tick is how often due hooks are looked for (default 1 s), so a hook
	// fires within about a second of its due time.
	Tick time.Duration

	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

// Start runs the scheduler until Stop or ctx ends.
func (s *HookScheduler) Start(ctx context.Context) {
	if s.Tick <= 0 {
		s.Tick = time.Second
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		tick := time.NewTicker(s.Tick)
		defer tick.Stop()
		for {
			if _, err := s.Firer.FireDue(ctx); err != nil && ctx.Err() == nil {
				s.Log.Error("firing scheduled hooks", "error", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// Stop ends the scheduler and waits for it; safe to call twice.
func (s *HookScheduler) Stop() {
	s.stopOnce.Do(func() {
		if s.cancel != nil {
			s.cancel()
			<-s.done
		}
	})
}
