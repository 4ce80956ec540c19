// Package interactiveapi serves the shells of interactive tasks
// (/api/interactive/v1/, hopper's own: Taskcluster reaches a task's shell
// through its websocktunnel service instead):
//
//	GET /api/interactive/v1/task/<taskId>/shell                              a viewer's shell (WebSocket)
//	GET /api/interactive/v1/task/<taskId>/runs/<runId>/worker                the worker's connection for the run (WebSocket)
//	GET /api/interactive/v1/task/<taskId>/runs/<runId>/sessions/<sessionId>  the worker's side of one shell (WebSocket)
//
// A viewer needs interactive:open-shell:<taskQueueId>; every shell opened
// is in the audit log (the task's entity history) before it opens. The
// worker's two routes need the run's own scope, queue:resolve-task:
// <taskId>/<runId>, which its claim's credentials hold. The relay between
// them is relay.go; the messages and their bounds are package
// interactive's.
package interactiveapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/interactive"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// BasePath is where the API lives below the root URL.
const BasePath = "/api/interactive/v1"

// Store is what the API reads and writes.
type Store interface {
	GetTask(ctx context.Context, taskID string) (*queue.TaskState, error)
	RecordAudit(ctx context.Context, entityType, entityID string, a store.Audit) error
}

// Deps are what the API needs.
type Deps struct {
	Store Store
	Relay *Relay
	// Version is reported by __version__.
	Version string
	Logger  *slog.Logger
}

// Routes returns the routes for api.Options.Routes.
func Routes(d Deps) []api.Route {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	h := &handlers{Deps: d}
	runScope := api.Scope("queue:resolve-task:<taskId>/<runId>")
	return append(api.ServiceHealthRoutes(BasePath, time.Now(), d.Version),
		api.Route{Name: "openShell", Method: http.MethodGet, Paths: []string{BasePath + "/task/{taskId}/shell"}, Handle: h.openShell},
		api.Route{Name: "workerConnect", Method: http.MethodGet, Paths: []string{BasePath + "/task/{taskId}/runs/{runId}/worker"},
			Scopes: runScope, EarlyScopes: true, Handle: h.workerConnect},
		api.Route{Name: "workerSession", Method: http.MethodGet, Paths: []string{BasePath + "/task/{taskId}/runs/{runId}/sessions/{sessionId}"},
			Scopes: runScope, EarlyScopes: true, Handle: h.workerSession},
	)
}

type handlers struct {
	Deps
}

// taskQueueOf is the task's queue, from taskQueueId or, in definitions
// that predate it, provisionerId/workerType.
func taskQueueOf(t *queue.Task) string {
	if t.TaskQueueID != "" {
		return t.TaskQueueID
	}
	return t.ProvisionerID + "/" + t.WorkerType
}

// isInteractive reports whether the payload asks for features.interactive.
func isInteractive(payload json.RawMessage) bool {
	var pl struct {
		Features struct {
			Interactive bool `json:"interactive"`
		} `json:"features"`
	}
	return json.Unmarshal(payload, &pl) == nil && pl.Features.Interactive
}

func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

func notWebSocket(name string) error {
	return api.Errorf(api.CodeInputError, "%s is a WebSocket: connect with an Upgrade: websocket request", name)
}

func (h *handlers) openShell(c *api.Call) (any, error) {
	ctx := c.Context()
	taskID := c.Params["taskId"]
	st, err := h.Store.GetTask(ctx, taskID)
	if errors.Is(err, store.ErrNotFound) || err == nil && st == nil {
		return nil, api.NotFoundf("Task %s not found", taskID)
	} else if err != nil {
		return nil, err
	}
	if err := c.Authorize(api.Scope(interactive.ScopePrefix+"<taskQueueId>"), map[string]any{"taskQueueId": taskQueueOf(&st.Task)}); err != nil {
		return nil, err
	}
	if !isInteractive(st.Task.Payload) {
		return nil, api.Errorf(api.CodeRequestConflict, "Task %s is not interactive (its payload does not set features.interactive): create an interactive copy of it", taskID)
	}
	if len(st.Runs) == 0 || st.Runs[len(st.Runs)-1].State != queue.StateRunning {
		return nil, api.Errorf(api.CodeRequestConflict, "Task %s is not running: a shell opens while an interactive task runs and during its keep-alive after its commands", taskID)
	}
	run := runKey{taskID, len(st.Runs) - 1}
	if !isWebSocket(c.R) {
		return nil, notWebSocket("openShell")
	}
	holder := ""
	if !h.Relay.Connected(run.taskID, run.runID) {
		if h.Relay.dir != nil {
			holder, err = h.Relay.dir.Locate(ctx, run.endpointKey())
		}
		if holder == "" {
			return nil, api.Errorf(api.CodeRequestConflict, "The worker of task %s run %d is not connected to hopper yet; try again in a moment", taskID, run.runID)
		}
	}
	who := c.CallerClientID()
	if err := h.Store.RecordAudit(ctx, store.AuditTask, taskID, store.Audit{ClientID: who,
		Action: fmt.Sprintf("interactive shell opened in run %d", run.runID), At: c.Now}); err != nil {
		return nil, fmt.Errorf("recording the shell in the audit log: %w", err)
	}
	if holder != "" {
		// The worker's agent is held by another replica: the shell is
		// served there, one signed hop away, authorized and audited here.
		h.Logger.Info("interactive shell forwarded to the replica holding the worker", "taskId", taskID, "runId", run.runID, "clientId", who, "replica", holder)
		h.Relay.dir.Forward(c.W, c.R, holder, hopShellPath(run))
		return &api.Response{Status: http.StatusSwitchingProtocols, Streamed: true}, nil
	}
	viewer, err := websocket.Accept(c.W, c.R, nil)
	if err != nil {
		// Accept has answered.
		return &api.Response{Status: http.StatusBadRequest, Streamed: true}, nil
	}
	h.Logger.Info("interactive shell opened", "taskId", taskID, "runId", run.runID, "clientId", who)
	h.serveViewer(ctx, run, viewer)
	h.Logger.Info("interactive shell closed", "taskId", taskID, "runId", run.runID, "clientId", who)
	return &api.Response{Status: http.StatusSwitchingProtocols, Streamed: true}, nil
}

// serveViewer joins a viewer's WebSocket to a session of the run's worker.
func (h *handlers) serveViewer(ctx context.Context, run runKey, viewer *websocket.Conn) {
	if err := h.Relay.track(viewer, true); err != nil {
		_ = viewer.Close(websocket.StatusGoingAway, err.Error())
		return
	}
	defer h.Relay.untrack(viewer)
	worker, end, err := h.Relay.openSession(ctx, run, ident.NewSlugID())
	if err != nil {
		_ = viewer.Write(ctx, websocket.MessageText, interactive.Control{Error: "No shell: " + err.Error()}.Encode())
		_ = viewer.Close(websocket.StatusTryAgainLater, "no shell")
		return
	}
	defer end()
	splice(ctx, viewer, worker)
	_ = viewer.Close(websocket.StatusNormalClosure, "")
	_ = worker.Close(websocket.StatusNormalClosure, "")
}

func runOf(c *api.Call) runKey { return runKey{c.Params["taskId"], c.IntParam("runId")} }

func (h *handlers) workerConnect(c *api.Call) (any, error) {
	if !isWebSocket(c.R) {
		return nil, notWebSocket("workerConnect")
	}
	conn, err := websocket.Accept(c.W, c.R, nil)
	if err != nil {
		return &api.Response{Status: http.StatusBadRequest, Streamed: true}, nil
	}
	h.Relay.serveAgent(c.Context(), runOf(c), conn)
	_ = conn.CloseNow()
	return &api.Response{Status: http.StatusSwitchingProtocols, Streamed: true}, nil
}

var sessionPattern = ident.SlugID()

func (h *handlers) workerSession(c *api.Call) (any, error) {
	id := c.Params["sessionId"]
	if !sessionPattern.MatchString(id) {
		return nil, api.InvalidParam("sessionId", id, sessionPattern)
	}
	if !isWebSocket(c.R) {
		return nil, notWebSocket("workerSession")
	}
	p := h.Relay.takeSession(runOf(c), id)
	if p == nil {
		return nil, api.NotFoundf("No viewer waits for session %s of task %s run %s", id, c.Params["taskId"], c.Params["runId"])
	}
	conn, err := websocket.Accept(c.W, c.R, nil)
	if err != nil {
		close(p.worker)
		return &api.Response{Status: http.StatusBadRequest, Streamed: true}, nil
	}
	if err := h.Relay.track(conn, false); err != nil {
		close(p.worker)
		_ = conn.Close(websocket.StatusGoingAway, err.Error())
		return &api.Response{Status: http.StatusSwitchingProtocols, Streamed: true}, nil
	}
	defer h.Relay.untrack(conn)
	// Closed here too: the viewer may have given up just before.
	defer conn.CloseNow()
	p.join(conn)
	return &api.Response{Status: http.StatusSwitchingProtocols, Streamed: true}, nil
}
