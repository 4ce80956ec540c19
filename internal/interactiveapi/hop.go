package interactiveapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/coder/websocket"
)

// HopPrefix is where a replica serves the shells other replicas forward
// to it, outside the API: only a request a replica signed is served
// (package hop). The path is <HopPrefix><taskId>/runs/<runId>/shell.
const HopPrefix = "/internal/interactive/v1/task/"

func hopShellPath(run runKey) string {
	return fmt.Sprintf("%s%s/runs/%d/shell", HopPrefix, run.taskID, run.runID)
}

// HopHandler serves a viewer's shell that another replica authorized,
// audited and forwarded here because this replica holds the run's agent.
// It never forwards again.
func HopHandler(d Deps) http.Handler {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	h := &handlers{Deps: d}
	return http.HandlerFunc(h.serveHop)
}

func (h *handlers) serveHop(w http.ResponseWriter, r *http.Request) {
	if h.Relay.dir == nil {
		http.NotFound(w, r)
		return
	}
	if signed, err := h.Relay.dir.Signed(r); err != nil || !signed {
		http.Error(w, "only another replica of this deployment may call this", http.StatusForbidden)
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, HopPrefix)
	taskID, rest, _ := strings.Cut(rest, "/runs/")
	runStr, ok := strings.CutSuffix(rest, "/shell")
	runID, err := strconv.Atoi(runStr)
	if !ok || err != nil || !sessionPattern.MatchString(taskID) {
		http.NotFound(w, r)
		return
	}
	run := runKey{taskID, runID}
	if !h.Relay.Connected(taskID, runID) {
		http.Error(w, "the worker's agent is no longer connected to this replica", http.StatusConflict)
		return
	}
	viewer, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept has answered
	}
	h.Logger.Info("interactive shell opened for another replica", "taskId", taskID, "runId", runID)
	h.serveViewer(r.Context(), run, viewer)
	h.Logger.Info("interactive shell closed", "taskId", taskID, "runId", runID)
}
