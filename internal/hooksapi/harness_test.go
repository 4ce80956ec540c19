package hooksapi_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/hooksapi"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

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

// drivers are the stores a test runs on.
func drivers() []string { return apitest.Drivers() }

func setupOn(t testing.TB, driver string) *bundle {
	t.Helper()
	db, openAgain := apitest.OpenStore(t, driver)
	clock := testclock.New(time.Now().UTC())
	var firer *hooksapi.Firer
	var newFirer func() *hooksapi.Firer
	srv := apitest.Start(t, apitest.Options{Store: db, Clock: clock, Routes: func(s *apitest.Server) []api.Route {
		newFirer = func() *hooksapi.Firer {
			return &hooksapi.Firer{Store: db, Tasks: s.Queue, Roles: s.Security.Roles, Clock: clock, Log: s.Logger}
		}
		firer = newFirer()
		sec := s.Security
		return append(hooksapi.Routes(hooksapi.Deps{Store: db, Sealer: sec.Sealer, Firer: firer, Caller: sec.Authorizer.Caller, Logger: s.Logger}),
			s.AuthRoutes()...)
	}})
	newReplica := func() *hooksapi.Firer {
		db := openAgain()
		return &hooksapi.Firer{Store: db, Tasks: srv.NewQueue(t, db), Roles: srv.Security.Roles, Clock: clock, Log: srv.Logger}
	}
	return &bundle{clock: clock, store: db, root: srv.Root, firer: firer, newFirer: newFirer, newReplica: newReplica}
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
