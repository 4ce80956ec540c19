package interactiveapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/hopper-ci/hopper/internal/interactive"
)

// Relay joins viewers' shells to the workers' WebSockets in this process.
// A worker running an interactive task keeps one connection per run
// (its agent); a viewer asks for a shell, the relay asks the agent for a
// session, and the worker opens a WebSocket of its own for it, which the
// relay joins to the viewer's. Neither side listens: the worker only ever
// connects out. With several replicas, the agent is held by the replica
// the worker connected to, which records it in the shared directory
// (package hop); a viewer arriving at another replica is forwarded there.
type Relay struct {
	dir     Directory // nil: one replica
	log     *slog.Logger
	mu      sync.Mutex
	agents  map[runKey]*agent
	pending map[string]*pendingSession
	// open are every WebSocket the relay holds (true: a viewer's), closed
	// by Close.
	open   map[*websocket.Conn]bool
	closed bool
}

type runKey struct {
	taskID string
	runID  int
}

// agent is a worker's connection for one run.
type agent struct {
	conn     *websocket.Conn
	sessions int
}

// pendingSession is a viewer waiting for the worker's side of its shell.
type pendingSession struct {
	run    runKey
	worker chan *websocket.Conn
	// done is closed when the session ended, so the worker's request
	// may return.
	done chan struct{}
}

// Directory is where replicas record which of them holds a worker's
// agent, and how a viewer's request reaches it (*hop.Directory).
type Directory interface {
	Hold(ctx context.Context, key string) error
	Release(key string)
	Locate(ctx context.Context, key string) (string, error)
	Signed(r *http.Request) (bool, error)
	Forward(w http.ResponseWriter, r *http.Request, replicaURL, path string)
}

// endpointKey names a run's agent in the directory.
func (k runKey) endpointKey() string { return fmt.Sprintf("shell/%s/%d", k.taskID, k.runID) }

// NewRelay returns an empty relay; dir (nil with one replica) records
// the agents held here for the other replicas.
func NewRelay(dir Directory, log *slog.Logger) *Relay {
	if log == nil {
		log = slog.Default()
	}
	return &Relay{dir: dir, log: log, agents: map[runKey]*agent{}, pending: map[string]*pendingSession{}, open: map[*websocket.Conn]bool{}}
}

// errClosed refuses connections once the server stops.
var errClosed = errors.New("the server is stopping")

// track remembers c (a viewer's when viewer) for Close; it fails once the
// relay is closed.
func (r *Relay) track(c *websocket.Conn, viewer bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errClosed
	}
	r.open[c] = viewer
	return nil
}

func (r *Relay) untrack(c *websocket.Conn) {
	r.mu.Lock()
	delete(r.open, c)
	r.mu.Unlock()
}

// Close ends every shell and agent connection (the server is stopping;
// hijacked connections are not the HTTP server's to close). Viewers are
// told first, so that each hears why before its worker's side goes; the
// closing handshakes run side by side.
func (r *Relay) Close() {
	r.mu.Lock()
	r.closed = true
	var viewers, others []*websocket.Conn
	for c, viewer := range r.open {
		if viewer {
			viewers = append(viewers, c)
		} else {
			others = append(others, c)
		}
	}
	r.mu.Unlock()
	for _, conns := range [][]*websocket.Conn{viewers, others} {
		var wg sync.WaitGroup
		for _, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = c.Close(websocket.StatusGoingAway, "the server is stopping")
			}()
		}
		wg.Wait()
	}
}

// Connected reports whether the worker of a run has its agent here.
func (r *Relay) Connected(taskID string, runID int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.agents[runKey{taskID, runID}] != nil
}

// serveAgent holds a worker's connection for a run until it closes. A
// worker that reconnects replaces its previous connection.
func (r *Relay) serveAgent(ctx context.Context, run runKey, c *websocket.Conn) {
	if err := r.track(c, false); err != nil {
		_ = c.Close(websocket.StatusGoingAway, err.Error())
		return
	}
	defer r.untrack(c)
	a := &agent{conn: c}
	r.mu.Lock()
	old := r.agents[run]
	if old != nil {
		a.sessions = old.sessions
	}
	r.agents[run] = a
	r.mu.Unlock()
	if old != nil {
		_ = old.conn.Close(websocket.StatusPolicyViolation, "replaced by a newer connection of the worker")
	}
	if r.dir != nil {
		if err := r.dir.Hold(ctx, run.endpointKey()); err != nil {
			// Viewers on this replica still reach it; the renewal retries.
			r.log.Warn("recording the worker's agent for the other replicas", "taskId", run.taskID, "runId", run.runID, "error", err)
		}
		defer r.dir.Release(run.endpointKey())
	}
	// The worker sends nothing on it; reading notices its end and answers
	// its pings.
	c.SetReadLimit(interactive.MaxMessage)
	for {
		if _, _, err := c.Read(ctx); err != nil {
			break
		}
	}
	r.mu.Lock()
	if r.agents[run] == a {
		delete(r.agents, run)
	}
	r.mu.Unlock()
}

// sessionWait is how long a viewer waits for the worker's side of its
// shell.
const sessionWait = 30 * time.Second

// openSession asks the run's worker for a session and waits for its
// WebSocket. The caller calls the returned end when the session is over.
func (r *Relay) openSession(ctx context.Context, run runKey, id string) (*websocket.Conn, func(), error) {
	p := &pendingSession{run: run, worker: make(chan *websocket.Conn, 1), done: make(chan struct{})}
	r.mu.Lock()
	a := r.agents[run]
	switch {
	case r.closed:
		r.mu.Unlock()
		return nil, nil, errClosed
	case a == nil:
		r.mu.Unlock()
		return nil, nil, errors.New("the task's worker is not connected to this server")
	case a.sessions >= interactive.MaxSessionsPerRun:
		r.mu.Unlock()
		return nil, nil, interactive.ErrTooManySessions
	}
	a.sessions++
	r.pending[id] = p
	r.mu.Unlock()
	end := func() {
		r.mu.Lock()
		delete(r.pending, id)
		if cur := r.agents[run]; cur != nil && cur.sessions > 0 {
			cur.sessions--
		}
		r.mu.Unlock()
		close(p.done)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := a.conn.Write(wctx, websocket.MessageText, interactive.Control{Session: id}.Encode())
	cancel()
	if err != nil {
		end()
		return nil, nil, fmt.Errorf("asking the worker for a shell: %w", err)
	}
	timer := time.NewTimer(sessionWait)
	defer timer.Stop()
	select {
	case w, ok := <-p.worker:
		if !ok {
			end()
			return nil, nil, errors.New("the worker's side of the shell failed to connect")
		}
		return w, end, nil
	case <-timer.C:
		end()
		return nil, nil, errors.New("the worker did not open the shell in time")
	case <-ctx.Done():
		end()
		return nil, nil, ctx.Err()
	}
}

// takeSession takes the pending session id of run, which the worker is
// about to join; nil if no viewer waits for it.
func (r *Relay) takeSession(run runKey, id string) *pendingSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pending[id]
	if p == nil || p.run != run {
		return nil
	}
	delete(r.pending, id)
	return p
}

// join hands the worker's WebSocket to the viewer waiting for p; it
// returns when the session has ended.
func (p *pendingSession) join(c *websocket.Conn) {
	p.worker <- c
	<-p.done
}

// splice copies messages both ways between the viewer and the worker
// until either ends, one message at a time in each direction; what the
// viewer sends as text must be a resize.
func splice(ctx context.Context, viewer, worker *websocket.Conn) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	viewer.SetReadLimit(interactive.MaxMessage)
	worker.SetReadLimit(interactive.MaxMessage)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer cancel()
		relayMessages(ctx, viewer, worker, true)
	}()
	go func() {
		defer wg.Done()
		defer cancel()
		relayMessages(ctx, worker, viewer, false)
	}()
	wg.Wait()
}

func relayMessages(ctx context.Context, from, to *websocket.Conn, fromViewer bool) {
	for {
		typ, msg, err := from.Read(ctx)
		if err != nil {
			return
		}
		if typ == websocket.MessageText && fromViewer {
			c, err := interactive.ParseControl(msg)
			if err != nil || c.Resize == nil {
				_ = from.Close(websocket.StatusPolicyViolation, "a viewer's text message must be a resize")
				return
			}
			msg = interactive.Control{Resize: c.Resize}.Encode()
		}
		if err := to.Write(ctx, typ, msg); err != nil {
			return
		}
	}
}
