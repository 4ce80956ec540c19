package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/worker/livetunnel"
	"github.com/hopper-ci/hopper/internal/worker/tasklog"
)

// liveEndpoint is where a run's live log is served while it runs: a port
// of its own (tasklog.LiveServer) or the worker's tunnel through hopper.
type liveEndpoint interface {
	URL() string
	Close(grace time.Duration) error
}

// startTunnel connects the worker's live-log tunnel (liveLogTunnel), with
// a token its own credentials ask for each time it connects.
func (w *Worker) startTunnel() *livetunnel.Client {
	id := livetunnel.ID(w.cfg.WorkerGroup, w.cfg.WorkerID)
	return livetunnel.Start(livetunnel.Options{
		RootURL: w.cfg.RootURL, ID: id, HTTPClient: w.HTTPClient, Logger: w.logger,
		Token: func(ctx context.Context) (string, error) {
			tok, err := w.Queue().WebsocktunnelToken(ctx, livetunnel.Audience, id)
			if err != nil {
				return "", err
			}
			return tok.Token, nil
		},
	})
}

// tunnelLive is one run's live log served through the worker's tunnel at
// a secret path, as a LiveServer serves it on its own port.
type tunnelLive struct {
	t    *livetunnel.Client
	path string
	log  *tasklog.Log

	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	active int
	idle   chan struct{} // closed when active drops to 0 after Close began
	closed bool
}

func startTunnelLive(t *livetunnel.Client, log *tasklog.Log) *tunnelLive {
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	ctx, cancel := context.WithCancel(context.Background())
	l := &tunnelLive{t: t, path: "/log/" + hex.EncodeToString(tok[:]), log: log, ctx: ctx, cancel: cancel, idle: make(chan struct{})}
	t.Handle(l.path, http.HandlerFunc(l.serve))
	return l
}

func (l *tunnelLive) serve(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	l.active++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.active--
		if l.active == 0 && l.closed {
			close(l.idle)
		}
		l.mu.Unlock()
	}()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(l.ctx, cancel)
	defer stop()
	tasklog.ServeLive(l.log, w, r.WithContext(ctx))
}

// URL is where viewers follow the log through hopper.
func (l *tunnelLive) URL() string { return l.t.URL(l.path) }

// Close stops serving the log; followers get the rest of it if it was
// closed, and are cut off after grace otherwise.
func (l *tunnelLive) Close(grace time.Duration) error {
	l.t.Remove(l.path)
	l.mu.Lock()
	l.closed = true
	if l.active == 0 {
		close(l.idle)
	}
	l.mu.Unlock()
	select {
	case <-l.idle:
	case <-time.After(grace):
		l.cancel()
		<-l.idle
	}
	l.cancel()
	return nil
}
