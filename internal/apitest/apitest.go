// Package apitest starts hopper's HTTP API in-process for the tests of the
// service packages: the queue's routes and the routes a test adds, over a
// store, with production security (server.NewSecurity) and a root client.
// Only tests import it.
package apitest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/authapi"
	"github.com/hopper-ci/hopper/internal/clock"
	"github.com/hopper-ci/hopper/internal/queueapi"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/postgres"
	"github.com/hopper-ci/hopper/internal/store/sqlite"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// RootToken is the root client's access token of every Server.
const RootToken = "apitest-root-token-0123456789abcdefghij"

// Options configure Start. Every field is optional.
type Options struct {
	// Store is served (default: SQLite(t)).
	Store store.Store
	// Clock is the server's (default: the system clock).
	Clock clock.Clock
	// Logger receives the server's log (default: discarded).
	Logger *slog.Logger
	// Routes are served beside the queue's; they may use what Start has
	// set up (the security, the queue, the URL).
	Routes func(s *Server) []api.Route
}

// Server is one API server, served by httptest until the test ends.
type Server struct {
	URL      string
	Store    store.Store
	Key      [32]byte
	Security *server.Security
	Queue    *queueapi.Server
	Clock    clock.Clock
	Logger   *slog.Logger
	// Root calls the API as the static root client, without retries.
	Root *tcclient.Client
}

// Start serves the API for the rest of the test.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s := &Server{Store: o.Store, Clock: o.Clock, Logger: o.Logger}
	if s.Store == nil {
		s.Store = SQLite(t)
	}
	if s.Clock == nil {
		s.Clock = clock.System{}
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	_, err := rand.Read(s.Key[:])
	require.NoError(t, err)
	s.Security, err = server.NewSecurity(context.Background(), s.Store, RootToken, s.Key, s.Clock, s.Logger)
	require.NoError(t, err)
	// The handler is set once the routes, which need the URL, are built.
	var handler http.Handler
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	s.Queue = s.NewQueue(t, s.Store)
	routes := queueapi.Routes(queueapi.Deps{Server: s.Queue})
	if o.Routes != nil {
		routes = append(routes, o.Routes(s)...)
	}
	srv, err := api.New(api.Options{Clock: s.Clock, Authorizer: s.Security.Authorizer, Logger: s.Logger, Routes: routes})
	require.NoError(t, err)
	handler = srv.Handler()
	s.Root = s.Client(server.RootClientID, RootToken)
	return s
}

// NewQueue returns a queue server over st with this server's security,
// clock and root URL, as another replica would have.
func (s *Server) NewQueue(t testing.TB, st store.Store) *queueapi.Server {
	t.Helper()
	q, err := queueapi.New(queueapi.Options{Config: queueapi.Config{RootURL: s.URL, Version: "test"}, Store: st, Clock: s.Clock,
		Issuer: s.Security.Issuer, Logger: s.Logger})
	require.NoError(t, err)
	return q
}

// Client returns a client of the server with the given credentials (none
// when clientID is empty) and without retries: failures are the point of
// many tests.
func (s *Server) Client(clientID, token string) *tcclient.Client {
	c := &tcclient.Client{RootURL: s.URL, MaxRetries: -1}
	if clientID != "" {
		c.Credentials = &tcclient.Credentials{ClientID: clientID, AccessToken: token}
	}
	return c
}

// AuthRoutes are the Auth API's routes over the server's store and
// security.
func (s *Server) AuthRoutes() []api.Route {
	sec := s.Security
	return authapi.Routes(authapi.Deps{Store: s.Store, Sealer: sec.Sealer, Clients: sec.Clients, IsStatic: sec.Clients.IsStatic,
		Roles: sec.Roles, Authenticator: sec.Authenticator, Caller: sec.Authorizer.Caller, Logger: s.Logger})
}

// SQLite opens a fresh SQLite store, closed when the test ends.
func SQLite(t testing.TB) store.Store {
	t.Helper()
	db, err := sqlite.Open(context.Background(), t.TempDir()+"/hopper.db")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// Drivers are the stores a test runs on: SQLite, and PostgreSQL when
// HOPPER_TEST_POSTGRES is set.
func Drivers() []string {
	if os.Getenv("HOPPER_TEST_POSTGRES") == "" {
		return []string{"sqlite"}
	}
	return []string{"sqlite", "postgres"}
}

var schemaSeq atomic.Int64

// OpenStore opens a fresh store of the driver ("sqlite" or "postgres": a
// schema of its own on HOPPER_TEST_POSTGRES, dropped when the test ends);
// open opens the same store again (on SQLite, the same handle), as another
// replica would.
func OpenStore(t testing.TB, driver string) (db store.Store, open func() store.Store) {
	t.Helper()
	switch driver {
	case "sqlite":
		db := SQLite(t)
		return db, func() store.Store { return db }
	case "postgres":
		url := os.Getenv("HOPPER_TEST_POSTGRES")
		if url == "" {
			t.Skip("HOPPER_TEST_POSTGRES not set")
		}
		schema := fmt.Sprintf("hopper_apitest_%d_%d", time.Now().UnixNano()%1e9, schemaSeq.Add(1))
		t.Cleanup(func() {
			conn, err := pgx.Connect(context.Background(), url)
			if err == nil {
				_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
				_ = conn.Close(context.Background())
			}
		})
		open := func() store.Store {
			db, err := postgres.Open(context.Background(), url, postgres.Options{Schema: schema, MaxConns: 4,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			return db
		}
		return open(), open
	}
	t.Fatalf("unknown driver %q", driver)
	return nil, nil
}

// Call sends method to path (below the root URL, path parameters
// escaped) with in as its JSON body (nil: none), signed with creds
// restricted to authorizedScopes (creds nil: anonymous; scopes nil: all
// of the client's), and returns the status and the body of the reply.
func (s *Server) Call(t testing.TB, creds *tcclient.Credentials, authorizedScopes []string, method, path string, in any) (int, []byte) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		require.NoError(t, err)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.URL+path, body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if creds != nil {
		header, err := tcclient.AuthorizationHeader(creds, authorizedScopes, method, req.URL.String())
		require.NoError(t, err)
		req.Header.Set("Authorization", header)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}
