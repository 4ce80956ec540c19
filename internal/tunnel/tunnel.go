// Package tunnel serves Taskcluster's websocktunnel protocol inside
// hopper, so a worker that cannot be reached (behind NAT, no inbound
// port) serves its live log and interactive shell through hopper's URL:
//
//   - the worker registers with GET <root>/websocktunnel carrying
//     x-websocktunnel-id: <id> and Authorization: Bearer <token>, the
//     token from auth.websocktunnelToken with audience Audience; the
//     WebSocket it gets then carries wsmux streams (package wsmux), and the
//     reply's x-websocktunnel-client-url says where viewers reach it;
//   - a viewer's request to <root>/websocktunnel/<id>/<path> is sent down
//     a new stream as an HTTP request for <path>, and the worker's answer
//     comes back the same way; a WebSocket upgrade (a shell) becomes a
//     byte pipe once the worker switched protocols.
//
// Sessions live in the replica the worker registered with; with several
// replicas, each records its sessions in the shared directory (package
// hop), and a viewer arriving at another replica is forwarded there, one
// signed hop. A viewer whose worker is connected nowhere gets 504, as
// from a websocktunnel server the worker is not connected to.
package tunnel

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/hop"
	"github.com/hopper-ci/hopper/internal/wsmux"
)

// Prefix is where the tunnel is served below the root URL: a worker's
// wstServerURL is <root>/websocktunnel.
const Prefix = "/websocktunnel"

// Audience is the wstAudience hopper's tunnel honours: workers ask
// auth.websocktunnelToken for it.
const Audience = "hopper"

// MaxStreams bounds the viewer requests open at once through one worker's
// tunnel; each buffers at most wsmux.Window (4 MiB, websocktunnel's) of
// what the worker sent and a slow viewer has not taken yet.
const MaxStreams = 16

var idPattern = regexp.MustCompile(`^[a-zA-Z0-9_~.%-]+$`)

// Directory is where replicas record which of them holds a worker's
// session, and how a viewer's request reaches it (*hop.Directory).
type Directory interface {
	Hold(ctx context.Context, key string) error
	Release(key string)
	Locate(ctx context.Context, key string) (string, error)
	Signed(r *http.Request) (bool, error)
	Forward(w http.ResponseWriter, r *http.Request, replicaURL, path string)
}

// Server is the tunnel of one replica.
type Server struct {
	secret  []byte
	rootURL string
	log     *slog.Logger
	now     func() time.Time
	dir     Directory // nil: one replica, no forwarding

	mu       sync.Mutex
	sessions map[string]*session
	closed   bool
}

type session struct {
	// ready is closed once mux is set: a client's WebSocket is accepted
	// (and its 101 on the way) before its session exists, and a viewer
	// right behind it waits for it rather than being told it is not there.
	ready chan struct{}
	mux   *wsmux.Session
	open  int
}

// New returns the tunnel; secret verifies the workers' tokens (the one
// auth.websocktunnelToken signs with), rootURL makes the viewers' URLs,
// dir (nil with one replica) finds sessions held by other replicas.
func New(secret []byte, rootURL string, log *slog.Logger, dir Directory) *Server {
	return &Server{secret: secret, rootURL: strings.TrimRight(rootURL, "/"), log: log, now: time.Now, dir: dir, sessions: map[string]*session{}}
}

// endpointKey names a tunnel's session in the directory.
func endpointKey(id string) string { return "wst/" + id }

// Close ends every worker's session (the server is stopping).
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	sessions := s.sessions
	s.sessions = map[string]*session{}
	s.mu.Unlock()
	for _, se := range sessions {
		select {
		case <-se.ready:
			_ = se.mux.Close()
		default:
		}
	}
}

// Connected reports whether tunnel id has a worker connected here.
func (s *Server) Connected(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id] != nil
}

// ServeHTTP serves registrations and viewers below Prefix.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, Prefix)
	if id := r.Header.Get("x-websocktunnel-id"); id != "" && (rest == "" || rest == "/") {
		s.register(w, r, id)
		return
	}
	rest = strings.TrimPrefix(r.URL.RequestURI()[len(Prefix):], "/")
	id, path, _ := strings.Cut(rest, "/")
	if id == "" || !idPattern.MatchString(id) {
		http.NotFound(w, r)
		return
	}
	s.serveViewer(w, r, id, "/"+path)
}

func (s *Server) register(w http.ResponseWriter, r *http.Request, id string) {
	if !idPattern.MatchString(id) {
		http.Error(w, "bad tunnel id", http.StatusBadRequest)
		return
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		http.Error(w, "a tunnel registration needs Authorization: Bearer <token from auth.websocktunnelToken>", http.StatusBadRequest)
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		http.NotFound(w, r)
		return
	}
	if err := auth.VerifyTunnelToken(s.secret, token, id, Audience, s.now()); err != nil {
		s.log.Warn("tunnel registration refused", "tunnelId", id, "error", err)
		http.Error(w, http.StatusText(http.StatusUnauthorized), http.StatusUnauthorized)
		return
	}
	w.Header().Set("x-websocktunnel-client-url", s.rootURL+Prefix+"/"+id)
	se := &session{ready: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		http.Error(w, "the server is stopping", http.StatusServiceUnavailable)
		return
	}
	old := s.sessions[id]
	s.sessions[id] = se
	s.mu.Unlock()
	// Recorded before the client hears it is registered, so that a viewer
	// it then sends to any replica finds it.
	if s.dir != nil {
		if err := s.dir.Hold(r.Context(), endpointKey(id)); err != nil {
			// Viewers on this replica still reach it; the renewal retries.
			s.log.Warn("recording the tunnel session for the other replicas", "tunnelId", id, "error", err)
		}
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		if s.dir != nil {
			s.dir.Release(endpointKey(id))
		}
		s.mu.Lock()
		if s.sessions[id] == se {
			delete(s.sessions, id)
		}
		s.mu.Unlock()
		close(se.ready)
		return
	}
	se.mux = wsmux.NewSession(conn, true)
	close(se.ready)
	if old != nil {
		<-old.ready
		if old.mux != nil {
			_ = old.mux.Close()
		}
	}
	s.log.Info("tunnel client registered", "tunnelId", id)
	go func() {
		<-se.mux.Done()
		s.mu.Lock()
		if s.sessions[id] == se {
			delete(s.sessions, id)
		}
		s.mu.Unlock()
		if s.dir != nil {
			s.dir.Release(endpointKey(id))
		}
	}()
}

// stream opens a stream to tunnel id's worker, counted against MaxStreams.
func (s *Server) stream(ctx context.Context, id string) (*wsmux.Stream, func(), int) {
	s.mu.Lock()
	se := s.sessions[id]
	s.mu.Unlock()
	if se != nil {
		select {
		case <-se.ready:
		case <-ctx.Done():
			return nil, nil, http.StatusGatewayTimeout
		}
	}
	s.mu.Lock()
	if se == nil || se.mux == nil || s.sessions[id] != se {
		s.mu.Unlock()
		return nil, nil, http.StatusGatewayTimeout
	}
	if se.open >= MaxStreams {
		s.mu.Unlock()
		return nil, nil, http.StatusServiceUnavailable
	}
	se.open++
	s.mu.Unlock()
	done := func() {
		s.mu.Lock()
		se.open--
		s.mu.Unlock()
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := se.mux.Open(octx)
	if err != nil {
		done()
		return nil, nil, http.StatusBadGateway
	}
	return st, done, 0
}

func (s *Server) serveViewer(w http.ResponseWriter, r *http.Request, id, path string) {
	if s.dir != nil {
		signed, err := s.dir.Signed(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		// A request another replica forwarded is served from this
		// replica's sessions only: never a second hop.
		if !signed && !s.Connected(id) {
			if u, err := s.dir.Locate(r.Context(), endpointKey(id)); err == nil {
				s.log.Debug("tunnel viewer forwarded to the replica holding the session", "tunnelId", id, "replica", u)
				s.dir.Forward(w, r, u, r.URL.RequestURI())
				return
			}
		}
	}
	st, done, status := s.stream(r.Context(), id)
	if status != 0 {
		msg := map[int]string{http.StatusGatewayTimeout: "No client is connected with that id",
			http.StatusServiceUnavailable: "Too many requests open through this tunnel", http.StatusBadGateway: "The tunnel client did not accept the request"}[status]
		http.Error(w, msg, status)
		return
	}
	defer done()
	defer st.Close()
	out := r.Clone(r.Context())
	out.Header.Set("x-websocktunnel-original-path", r.URL.Path)
	out.Header.Del(hop.Header)
	out.RequestURI = ""
	u := *r.URL
	u.Path, u.RawPath, u.RawQuery = path, "", r.URL.RawQuery
	if p, q, ok := strings.Cut(path, "?"); ok {
		u.Path, u.RawQuery = p, q
	}
	out.URL = &u
	upgrade := strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	if err := out.Write(st); err != nil {
		http.Error(w, "The request could not be sent through the tunnel", http.StatusBadGateway)
		return
	}
	br := bufio.NewReader(st)
	resp, err := http.ReadResponse(br, out)
	if err != nil {
		http.Error(w, "The tunnel client's answer could not be read", http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if upgrade && resp.StatusCode == http.StatusSwitchingProtocols {
		s.pipe(w, resp, br, st)
		return
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	// A live log streams: every chunk goes out as it comes.
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

// pipe joins the viewer's connection to the stream once the worker
// switched protocols (a WebSocket: the shell), byte for byte.
func (s *Server) pipe(w http.ResponseWriter, resp *http.Response, br *bufio.Reader, st *wsmux.Stream) {
	conn, vrw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	if err := resp.Write(vrw); err != nil {
		return
	}
	if err := vrw.Flush(); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(st, vrw.Reader)
		_ = st.Close()
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(conn, br)
		_ = conn.Close()
		done <- struct{}{}
	}()
	<-done
}

// String names the tunnel for logs.
func (s *Server) String() string { return fmt.Sprintf("websocktunnel at %s%s", s.rootURL, Prefix) }
