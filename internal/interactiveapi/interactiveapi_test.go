package interactiveapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/interactive"
	"github.com/hopper-ci/hopper/internal/interactiveapi"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

type bundle struct {
	srv   *apitest.Server
	relay *interactiveapi.Relay
	ctx   context.Context
}

func setup(t testing.TB) *bundle {
	t.Helper()
	relay := interactiveapi.NewRelay(nil, nil)
	t.Cleanup(relay.Close)
	srv := apitest.Start(t, apitest.Options{Routes: func(s *apitest.Server) []api.Route {
		return append(interactiveapi.Routes(interactiveapi.Deps{Store: s.Store, Relay: relay, Version: "test", Logger: s.Logger}), s.AuthRoutes()...)
	}})
	return &bundle{srv: srv, relay: relay, ctx: context.Background()}
}

// createTask creates a task on queue with payload pl.
func (b *bundle) createTask(t testing.TB, queue string, pl map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(pl)
	require.NoError(t, err)
	id := tcclient.NewTaskID()
	now := time.Now()
	_, err = b.srv.Root.CreateTask(b.ctx, id, &tcclient.TaskDefinition{TaskQueueID: queue, Created: tcclient.NewTime(now),
		Deadline: tcclient.NewTime(now.Add(time.Hour)), Payload: raw,
		Metadata: tcclient.TaskMetadata{Name: "t", Description: "t", Owner: "t@example.com", Source: "https://example.com/t"}})
	require.NoError(t, err)
	return id
}

// claim claims the queue's task and returns a client with its run's
// credentials.
func (b *bundle) claim(t testing.TB, queue string) (*tcclient.Client, tcclient.TaskClaim) {
	t.Helper()
	res, err := b.srv.Root.ClaimWork(b.ctx, queue, &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w", Tasks: 1})
	require.NoError(t, err)
	require.Len(t, res.Tasks, 1)
	c := res.Tasks[0]
	return b.srv.Client(c.Credentials.ClientID, c.Credentials.AccessToken).WithCredentials(&c.Credentials), c
}

// fakeWorker connects as the run's worker and answers each session with a
// terminal that upper-cases what it gets and reports resizes.
func fakeWorker(t testing.TB, runClient *tcclient.Client, taskID string, runID int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	path := tcclient.RunPath(taskID, runID)
	agent, err := runClient.DialInteractive(ctx, path+"/worker")
	require.NoError(t, err)
	go func() {
		defer agent.CloseNow()
		for {
			_, msg, err := agent.Read(ctx)
			if err != nil {
				return
			}
			c, err := interactive.ParseControl(msg)
			if err != nil || c.Session == "" {
				continue
			}
			go func() {
				conn, err := runClient.DialInteractive(ctx, path+"/sessions/"+c.Session)
				if err != nil {
					return
				}
				defer conn.CloseNow()
				for {
					typ, msg, err := conn.Read(ctx)
					if err != nil {
						return
					}
					if typ == websocket.MessageText {
						ctl, _ := interactive.ParseControl(msg)
						msg, _ = json.Marshal(ctl.Resize)
					} else {
						msg = bytes.ToUpper(msg)
					}
					if bytes.Equal(msg, []byte("EXIT")) {
						code := 3
						_ = conn.Write(ctx, websocket.MessageText, interactive.Control{Exit: &code}.Encode())
						_ = conn.Close(websocket.StatusNormalClosure, "")
						return
					}
					if err := conn.Write(ctx, websocket.MessageBinary, msg); err != nil {
						return
					}
				}
			}()
		}
	}()
}

func readBinary(t *testing.T, conn *websocket.Conn) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	typ, msg, err := conn.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, websocket.MessageBinary, typ, string(msg))
	return string(msg)
}

// TestShellRelay: a viewer with the scope reaches the run's worker through
// the relay, both ways, resizes included; the shell is in the audit log;
// the worker's exit code reaches the viewer.
func TestShellRelay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	queue := "prov/relay"
	id := b.createTask(t, queue, map[string]any{"features": map[string]any{"interactive": true}})
	runClient, claim := b.claim(t, queue)
	fakeWorker(t, runClient, id, claim.RunID)
	require.Eventually(t, func() bool { return b.relay.Connected(id, claim.RunID) }, time.Minute, 10*time.Millisecond)

	_, err := b.srv.Root.CreateClient(b.ctx, "debugger", &tcclient.ClientRequest{Expires: tcclient.NewTime(time.Now().Add(time.Hour)),
		Description: "d", Scopes: []string{interactive.ShellScope(queue)}})
	require.NoError(t, err)
	cl, err := b.srv.Root.ResetAccessToken(b.ctx, "debugger")
	require.NoError(t, err)
	viewer, err := b.srv.Client("debugger", cl.AccessToken).OpenShell(b.ctx, id)
	require.NoError(t, err)
	defer viewer.CloseNow()
	require.NoError(t, viewer.Write(b.ctx, websocket.MessageBinary, []byte("hello")))
	require.Equal(t, "HELLO", readBinary(t, viewer))
	require.NoError(t, viewer.Write(b.ctx, websocket.MessageText, interactive.Control{Resize: &interactive.Size{Cols: 120, Rows: 40}}.Encode()))
	require.JSONEq(t, `{"cols":120,"rows":40}`, readBinary(t, viewer))
	require.NoError(t, viewer.Write(b.ctx, websocket.MessageBinary, []byte("exit")))
	_, msg, err := viewer.Read(b.ctx)
	require.NoError(t, err)
	c, err := interactive.ParseControl(msg)
	require.NoError(t, err)
	require.Equal(t, 3, *c.Exit)

	entries, _, err := b.srv.Store.ListAuditHistory(b.ctx, store.AuditQuery{EntityType: store.AuditTask, EntityID: id}, store.Page{})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, "debugger", entries[0].ClientID)
	require.Equal(t, "interactive shell opened in run 0", entries[0].Action)

	// A viewer's text message must be a resize: anything else ends it.
	viewer2, err := b.srv.Root.OpenShell(b.ctx, id)
	require.NoError(t, err)
	defer viewer2.CloseNow()
	require.NoError(t, viewer2.Write(b.ctx, websocket.MessageText, interactive.Control{Session: "x"}.Encode()))
	_, _, err = viewer2.Read(b.ctx)
	require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(err), "%v", err)

	// Closing the relay (the server stopping) ends the shells.
	viewer3, err := b.srv.Root.OpenShell(b.ctx, id)
	require.NoError(t, err)
	require.NoError(t, viewer3.Write(b.ctx, websocket.MessageBinary, []byte("x")))
	require.Equal(t, "X", readBinary(t, viewer3))
	b.relay.Close()
	_, _, err = viewer3.Read(b.ctx)
	require.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(err), "%v", err)
}

// TestShellRefusals: who may not open a shell, and when there is none.
func TestShellRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	queue := "prov/refuse"
	plain := b.createTask(t, queue, map[string]any{})
	pending := b.createTask(t, "prov/other", map[string]any{"features": map[string]any{"interactive": true}})
	running := b.createTask(t, queue, map[string]any{"features": map[string]any{"interactive": true}})
	runClient, claim := b.claim(t, queue)
	if claim.Status.TaskID != running {
		// The plain task was claimed first; claim again for the other.
		runClient, claim = b.claim(t, queue)
	}
	require.Equal(t, running, claim.Status.TaskID)
	_, err := b.srv.Root.CreateClient(b.ctx, "other-queue", &tcclient.ClientRequest{Expires: tcclient.NewTime(time.Now().Add(time.Hour)),
		Description: "d", Scopes: []string{interactive.ShellScope("prov/other")}})
	require.NoError(t, err)
	other, err := b.srv.Root.ResetAccessToken(b.ctx, "other-queue")
	require.NoError(t, err)
	anonymous := b.srv.Client("", "")
	for _, tc := range []struct {
		name   string
		c      *tcclient.Client
		taskID string
		status int
	}{
		{"unknown task", b.srv.Root, tcclient.NewTaskID(), http.StatusNotFound},
		{"anonymous", anonymous, running, http.StatusForbidden},
		{"scope of another queue", b.srv.Client("other-queue", other.AccessToken), running, http.StatusForbidden},
		{"not interactive", b.srv.Root, plain, http.StatusConflict},
		{"not running", b.srv.Root, pending, http.StatusConflict},
		{"worker not connected", b.srv.Root, running, http.StatusConflict},
	} {
		_, err := tc.c.OpenShell(b.ctx, tc.taskID)
		require.Equal(t, tc.status, tcclient.StatusCode(err), "%s: %v", tc.name, err)
	}
	// The worker's routes take the run's own scope.
	_, err = anonymous.DialInteractive(b.ctx, tcclient.RunPath(running, 0)+"/worker")
	require.Equal(t, http.StatusForbidden, tcclient.StatusCode(err), "%v", err)
	_, err = runClient.DialInteractive(b.ctx, tcclient.RunPath(running, 0)+"/sessions/"+tcclient.NewTaskID())
	require.Equal(t, http.StatusNotFound, tcclient.StatusCode(err), "no viewer waits for a session it made up: %v", err)
	entries, _, err := b.srv.Store.ListAuditHistory(b.ctx, store.AuditQuery{EntityType: store.AuditTask, EntityID: running}, store.Page{})
	require.NoError(t, err)
	require.Empty(t, entries, "a refused shell is not in the audit log")
}
