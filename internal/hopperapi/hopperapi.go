// Package hopperapi serves hopper's own operator views, beside the
// Taskcluster services and under a path of hopper's own (Taskcluster has
// no such methods, so nothing is borrowed from its namespaces):
//
//	GET /api/hopper/v1/tasks    tasks found by state, queue, group, name and creation time
//
// They answer from the store's indexed queries (store.HistoryStore), for
// the web console's Tasks page, `hopper task list` and scripts.
package hopperapi

import (
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// BasePath is where hopper's own API lives below the root URL.
const BasePath = "/api/hopper/v1"

// ScopeListTasks is what listing tasks needs. hopper's default anonymous
// role grants it, as it grants reading each task.
const ScopeListTasks = "hopper:list-tasks"

// Deps are what the API needs.
type Deps struct {
	Store store.HistoryStore
	// Version is reported by __version__.
	Version string
}

// Routes returns the routes for api.Options.Routes.
func Routes(d Deps) []api.Route {
	h := &handlers{Deps: d}
	return append(api.ServiceHealthRoutes(BasePath, time.Now(), d.Version), api.Route{
		Name: "listTasks", Method: http.MethodGet, Paths: []string{BasePath + "/tasks"},
		Query:  []string{"state", "taskQueueId", "taskGroupId", "name", "createdFrom", "createdTo", "limit", "continuationToken"},
		Scopes: `"` + ScopeListTasks + `"`, EarlyScopes: true,
		Handle: h.listTasks,
	})
}

type handlers struct {
	Deps
}

// Query-string patterns of listTasks.
var (
	statePattern = regexp.MustCompile(`^(unscheduled|pending|running|completed|failed|exception)$`)
	namePattern  = regexp.MustCompile(`^[^\x00-\x1f]{1,200}$`)
	timePattern  = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`)
)

// maxLimit bounds a page; defaultLimit is a page when limit is not given.
const (
	maxLimit     = 1000
	defaultLimit = 100
)

// TaskEntry is one task of a listTasks reply: its status and definition,
// as listTaskGroup gives them.
type TaskEntry struct {
	Status queue.Status `json:"status"`
	Task   queue.Task   `json:"task"`
}

// ListTasksResponse is listTasks' reply, newest task first.
type ListTasksResponse struct {
	Tasks             []TaskEntry `json:"tasks"`
	ContinuationToken string      `json:"continuationToken,omitempty"`
}

func (h *handlers) listTasks(c *api.Call) (any, error) {
	q := c.R.URL.Query()
	var f store.TaskFilter
	for _, p := range []struct {
		name    string
		pattern *regexp.Regexp
		into    *string
	}{
		{"state", statePattern, &f.State},
		{"taskQueueId", ident.TaskQueueID(), &f.TaskQueueID},
		{"taskGroupId", ident.SlugID(), &f.TaskGroupID},
		{"name", namePattern, &f.Name},
	} {
		if !q.Has(p.name) {
			continue
		}
		v := q.Get(p.name)
		if !p.pattern.MatchString(v) {
			return nil, api.InvalidQuery(p.name, v, p.pattern)
		}
		*p.into = v
	}
	for _, p := range []struct {
		name string
		into *time.Time
	}{{"createdFrom", &f.CreatedFrom}, {"createdTo", &f.CreatedTo}} {
		if !q.Has(p.name) {
			continue
		}
		v := q.Get(p.name)
		t, err := time.Parse(time.RFC3339Nano, v)
		if !timePattern.MatchString(v) || err != nil {
			return nil, api.InvalidQuery(p.name, v, timePattern)
		}
		*p.into = t
	}
	if !f.CreatedFrom.IsZero() && !f.CreatedTo.IsZero() && !f.CreatedFrom.Before(f.CreatedTo) {
		return nil, api.Errorf(api.CodeInvalidRequestArguments, "createdFrom (%s) must be before createdTo (%s)",
			q.Get("createdFrom"), q.Get("createdTo"))
	}
	page := c.Page()
	if raw := q.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > maxLimit {
			return nil, api.Errorf(api.CodeInvalidRequestArguments, "limit must be a number from 1 to %d, not %q", maxLimit, raw)
		}
	} else {
		page.Limit = defaultLimit
	}
	tasks, next, err := h.Store.ListTasks(c.Context(), f, page)
	if err != nil {
		return nil, err
	}
	out := ListTasksResponse{Tasks: make([]TaskEntry, 0, len(tasks)), ContinuationToken: next}
	for _, t := range tasks {
		out.Tasks = append(out.Tasks, TaskEntry{Status: t.Status(), Task: t.Task})
	}
	return out, nil
}
