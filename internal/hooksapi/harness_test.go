package hooksapi_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/authapi"
	"github.com/hopper-ci/hopper/internal/hooksapi"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/queueapi"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/postgres"
	"github.com/hopper-ci/hopper/internal/store/sqlite"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

const rootToken = "hooksapi-test-root-token-0123456789abcdef"

// bundle is one API server with the queue, auth and hooks routes over a
// fresh store, and the firer its scheduler would use.
type bundle struct {
	// clock is the server's fake clock; it starts at the wall time, so
	// requests tcclient signs stay within Hawk's 15-minute skew.
	clock *testclock.Clock
	store store.Store
	root  *tcclient.Client
	firer *hooksapi.Firer
	// newFirer returns another firer on the same store, as another
	// replica would have.
	newFirer func() *hooksapi.Firer
	// newReplica returns a firer as another replica would have: on
	// PostgreSQL with a connection pool and a queue of its own.
	newReplica func() *hooksapi.Firer
}

// setup is a bundle over SQLite.
func setup(t testing.TB) *bundle { return setupOn(t, "sqlite") }

// drivers are the stores a test runs on: SQLite, and PostgreSQL when
// HOPPER_TEST_POSTGRES is set.
func drivers() []string {
	if os.Getenv("HOPPER_TEST_POSTGRES") == "" {
		return []string{"sqlite"}
	}
	return []string{"sqlite", "postgres"}
}

var schemaSeq atomic.Int64

// openStore opens a fresh store of the driver; open opens the same store
// again (on SQLite, the same handle).
func openStore(t testing.TB, driver string) (db store.Store, open func() store.Store) {
	t.Helper()
	ctx := context.Background()
	switch driver {
	case "sqlite":
		db, err := sqlite.Open(ctx, t.TempDir()+"/hopper.db")
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		return db, func() store.Store { return db }
	case "postgres":
		url := os.Getenv("HOPPER_TEST_POSTGRES")
		schema := fmt.Sprintf("hopper_hooksapi_%d_%d", time.Now().UnixNano()%1e9, schemaSeq.Add(1))
		t.Cleanup(func() {
			conn, err := pgx.Connect(context.Background(), url)
			if err == nil {
				_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
				_ = conn.Close(context.Background())
			}
		})
		open := func() store.Store {
			db, err := postgres.Open(ctx, url, postgres.Options{Schema: schema, MaxConns: 4,
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

func setupOn(t testing.TB, driver string) *bundle {
	t.Helper()
	ctx := context.Background()
	db, openAgain := openStore(t, driver)
	var key [32]byte
	_, err := rand.Read(key[:])
	require.NoError(t, err)
	clock := testclock.New(time.Now().UTC())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sec, err := server.NewSecurity(ctx, db, rootToken, key, clock, log)
	require.NoError(t, err)

	var srv *queueapi.Server
	tasks := hooksapi.TaskCreatorFunc(func(ctx context.Context, taskID string, body []byte, clientID string, scopes []string) (*queue.TaskState, error) {
		return srv.CreateTaskAs(ctx, taskID, body, clientID, scopes)
	})
	newFirer := func() *hooksapi.Firer {
		return &hooksapi.Firer{Store: db, Tasks: tasks, Roles: sec.Roles, Clock: clock, Log: log}
	}
	firer := newFirer()
	var rootURL string
	newReplica := func() *hooksapi.Firer {
		db := openAgain()
		srv, err := queueapi.New(queueapi.Options{Config: queueapi.Config{RootURL: rootURL, Version: "test"}, Store: db, Clock: clock,
			Issuer: sec.Issuer, Logger: log})
		require.NoError(t, err)
		return &hooksapi.Firer{Store: db, Tasks: srv, Roles: sec.Roles, Clock: clock, Log: log}
	}
	var handler http.Handler
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(hs.Close)
	rootURL = hs.URL
	srv, err = queueapi.New(queueapi.Options{Config: queueapi.Config{RootURL: hs.URL, Version: "test"}, Store: db, Clock: clock,
		Issuer: sec.Issuer, Logger: log})
	require.NoError(t, err)
	httpSrv, err := api.New(api.Options{Clock: clock, Authorizer: sec.Authorizer, Logger: log,
		Routes: slices.Concat(srv.Routes(), hooksapi.Routes(hooksapi.Deps{Store: db, Sealer: sec.Sealer, Firer: firer, Caller: sec.Authorizer.Caller, Logger: log}),
			authapi.Routes(authapi.Deps{Store: db, Sealer: sec.Sealer, Clients: sec.Clients, IsStatic: sec.Clients.IsStatic,
				Roles: sec.Roles, Authenticator: sec.Authenticator, Caller: sec.Authorizer.Caller, Logger: log})),
	})
	require.NoError(t, err)
	handler = httpSrv.Handler()
	root := &tcclient.Client{RootURL: hs.URL, MaxRetries: -1, Credentials: &tcclient.Credentials{ClientID: server.RootClientID, AccessToken: rootToken}}
	return &bundle{clock: clock, store: db, root: root, firer: firer, newFirer: newFirer, newReplica: newReplica}
}

// hookRole lets the hooks of group create tasks on testQueue.
func (b *bundle) hookRole(t testing.TB, group string) {
	t.Helper()
	_, err := b.root.CreateRole(context.Background(), "hook-id:"+group+"/*", &tcclient.RoleRequest{Description: "test",
		Scopes: []string{"queue:create-task:lowest:" + testQueue, "queue:create-task:project:none", "queue:scheduler-id:-"}})
	require.NoError(t, err)
}

const testQueue = "hooks-test/q"

// taskTemplate is a task template for testQueue with extra fields.
func taskTemplate(extra string) json.RawMessage {
	return json.RawMessage(`{"taskQueueId":"` + testQueue + `","payload":{},"deadline":{"$fromNow":"1 hour"},
		"metadata":{"name":"${firedBy}","description":"d","owner":"o@example.com","source":"https://example.com"}` + extra + `}`)
}

func (b *bundle) createHook(t testing.TB, group, id string, schedule []string, task json.RawMessage) {
	t.Helper()
	_, err := b.root.CreateHook(context.Background(), group, id, &tcclient.Hook{
		Metadata: json.RawMessage(`{"name":"n","description":"d","owner":"o@example.com"}`),
		Schedule: schedule, Task: task,
	})
	require.NoError(t, err)
}

// nextDue reads the hook's next due time.
func (b *bundle) nextDue(t testing.TB, group, id string) time.Time {
	t.Helper()
	st, err := b.root.GetHookStatus(context.Background(), group, id)
	require.NoError(t, err)
	at, err := time.Parse(time.RFC3339, st.NextScheduledDate)
	require.NoError(t, err)
	return at
}

// fireDue runs the firer and returns how many hooks it fired.
func (b *bundle) fireDue(t *testing.T, f *hooksapi.Firer) int {
	t.Helper()
	n, err := f.FireDue(context.Background())
	require.NoError(t, err)
	return n
}

func (b *bundle) fires(t *testing.T, group, id string) []tcclient.HookFire {
	t.Helper()
	fires, _, err := b.store.ListLastFires(context.Background(), group, id, store.Page{})
	require.NoError(t, err)
	out := make([]tcclient.HookFire, 0, len(fires))
	for _, f := range fires {
		out = append(out, tcclient.HookFire{FiredBy: f.FiredBy, TaskID: f.TaskID, Result: f.Result, Error: f.Error})
	}
	return out
}
