// Package livetunnel is the worker's side of hopper's websocktunnel: the
// worker connects out to <root>/websocktunnel with a token from
// auth.websocktunnelToken and serves HTTP (its runs' live logs) on the
// streams hopper opens down the connection, so a worker with no inbound
// port is followed through hopper's URL. When the connection drops (the
// replica it reached restarted) it connects again, to whichever replica
// the load balancer picks, with backing off; the viewers' URLs stay the
// same.
package livetunnel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/hopper-ci/hopper/internal/wsmux"
)

// Audience is the wstAudience hopper's tunnel honours.
const Audience = "hopper"

// maxBackoff bounds the wait between reconnection attempts.
const maxBackoff = 15 * time.Second

// Options configure a Client.
type Options struct {
	// RootURL is hopper's root URL; the tunnel is <RootURL>/websocktunnel.
	RootURL string
	// ID is the tunnel's id (ID makes one from the worker's names).
	ID string
	// Token asks auth.websocktunnelToken for a token for ID; it is called
	// on every connection, so a token never outlives its use.
	Token func(ctx context.Context) (string, error)
	// HTTPClient dials the tunnel (nil: the default transport).
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// Client is a worker's tunnel: Handle adds what it serves, and the
// connection is kept up until Close.
type Client struct {
	opts   Options
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	paths     map[string]http.Handler
	connected chan struct{} // closed while a session is up; replaced when it ends
	session   *wsmux.Session
}

var unsafeID = regexp.MustCompile(`[^a-zA-Z0-9_~.-]`)

// ID is the tunnel id of a worker: its group and id, with anything the
// tunnel's ids do not allow replaced.
func ID(workerGroup, workerID string) string {
	return unsafeID.ReplaceAllString(workerGroup+"."+workerID, "_")
}

// Start connects in the background and keeps the connection up until
// Close.
func Start(opts Options) *Client {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = http.DefaultClient
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{opts: opts, paths: map[string]http.Handler{}, cancel: cancel, done: make(chan struct{}), connected: make(chan struct{})}
	go c.loop(ctx)
	return c
}

// URL is where viewers reach path (starting with /) through hopper.
func (c *Client) URL(path string) string {
	return strings.TrimRight(c.opts.RootURL, "/") + "/websocktunnel/" + c.opts.ID + path
}

// Handle serves h at path (exactly) through the tunnel until Remove.
func (c *Client) Handle(path string, h http.Handler) {
	c.mu.Lock()
	c.paths[path] = h
	c.mu.Unlock()
}

// Remove stops serving path; requests under way go on.
func (c *Client) Remove(path string) {
	c.mu.Lock()
	delete(c.paths, path)
	c.mu.Unlock()
}

// ServeHTTP serves a viewer's request that came down the tunnel.
func (c *Client) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	h := c.paths[r.URL.Path]
	c.mu.Unlock()
	if h == nil {
		http.NotFound(w, r)
		return
	}
	h.ServeHTTP(w, r)
}

// Connected is closed while a connection is up (for tests and for
// waiting before publishing a URL).
func (c *Client) Connected() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connected
}

// Close ends the connection and stops reconnecting.
func (c *Client) Close() {
	c.cancel()
	c.mu.Lock()
	s := c.session
	c.mu.Unlock()
	if s != nil {
		_ = s.Close()
	}
	<-c.done
}

func (c *Client) loop(ctx context.Context) {
	defer close(c.done)
	backoff := 250 * time.Millisecond
	for ctx.Err() == nil {
		started := time.Now()
		err := c.connectOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > time.Minute {
			backoff = 250 * time.Millisecond // it was up for a while: a fresh drop
		}
		c.opts.Logger.Warn("the live-log tunnel to hopper dropped; connecting again", "error", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// connectOnce registers, serves the session's streams until it ends, and
// says why it ended.
func (c *Client) connectOnce(ctx context.Context) error {
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	token, err := c.opts.Token(tctx)
	cancel()
	if err != nil {
		return fmt.Errorf("getting a websocktunnel token: %w", err)
	}
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	conn, _, err := websocket.Dial(dctx, strings.TrimRight(c.opts.RootURL, "/")+"/websocktunnel", &websocket.DialOptions{
		HTTPClient: c.opts.HTTPClient,
		HTTPHeader: http.Header{"x-websocktunnel-id": {c.opts.ID}, "Authorization": {"Bearer " + token}},
	})
	cancel()
	if err != nil {
		return fmt.Errorf("connecting to hopper's websocktunnel: %w", err)
	}
	// wsmux bounds what each stream buffers (its window), not the frames.
	conn.SetReadLimit(-1)
	s := wsmux.NewSession(conn, false)
	c.mu.Lock()
	c.session = s
	close(c.connected)
	c.mu.Unlock()
	c.opts.Logger.Info("live-log tunnel connected", "tunnelId", c.opts.ID)
	srv := &http.Server{Handler: c, ReadHeaderTimeout: 30 * time.Second}
	err = srv.Serve(listener{s})
	_ = s.Close()
	c.mu.Lock()
	c.session = nil
	c.connected = make(chan struct{})
	c.mu.Unlock()
	if err == nil {
		err = errors.New("the session ended")
	}
	return err
}

// listener accepts the streams hopper opens, one viewer's request each.
type listener struct{ s *wsmux.Session }

func (l listener) Accept() (net.Conn, error) {
	st, err := l.s.Accept(context.Background())
	if err != nil {
		return nil, err
	}
	return conn{st}, nil
}
func (l listener) Close() error   { return l.s.Close() }
func (l listener) Addr() net.Addr { return addr{} }

// conn is a stream as the net.Conn http.Server wants; a stream has no
// deadlines (hopper bounds the viewer's side).
type conn struct{ *wsmux.Stream }

type addr struct{}

func (addr) Network() string                  { return "websocktunnel" }
func (addr) String() string                   { return "websocktunnel" }
func (conn) LocalAddr() net.Addr              { return addr{} }
func (conn) RemoteAddr() net.Addr             { return addr{} }
func (conn) SetDeadline(time.Time) error      { return nil }
func (conn) SetReadDeadline(time.Time) error  { return nil }
func (conn) SetWriteDeadline(time.Time) error { return nil }
