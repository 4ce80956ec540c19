// Package indexapi serves hopper's Index service at <rootUrl>/api/index/v1,
// every method of Taskcluster's Index API v1: finding tasks by index path,
// browsing namespaces and their entries, inserting and deleting entries,
// and redirecting to an indexed task's artifacts; and one of hopper's own,
// indexedAt (GET /indexed-at/<taskId>: the paths a task is found at now).
//
// The routes plug into the queue's request pipeline (package api), so they
// share its error format, body validation and lazy Hawk authentication.
// Entries of completed tasks are written by the store in the transaction
// that resolves the task (routes index.<path>); this package only serves
// them. The rules (paths, rank, expiry) live in package index.
package indexapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/index"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// BasePath is where the Index API lives below the root URL.
const BasePath = "/api/index/v1"

// Deps are what the Index API needs.
type Deps struct {
	// Store holds the entries and namespaces.
	Store store.IndexStore
	// Artifacts answers findArtifactFromTask (the queue's
	// getLatestArtifact).
	Artifacts LatestArtifacts
	// Version is reported by __version__.
	Version string
	// Started is reported as uptime by ping (default: when Routes is
	// called).
	Started time.Time
}

// LatestArtifacts is what the index asks of the queue:
// queueapi.Server.RedirectToLatestArtifact.
type LatestArtifacts interface {
	RedirectToLatestArtifact(c *api.Call, taskID, name string) (any, error)
}

type handlers struct {
	Deps
}

// Scope-expression templates of the endpoints, in Taskcluster's JSON form.
const (
	scopesFindTask       = `"index:find-task:<indexPath>"`
	scopesFindTasks      = `{"AllOf":[{"for":"indexPath","in":"indexPaths","each":"index:find-task:<indexPath>"}]}`
	scopesListNamespaces = `"index:list-namespaces:<namespace>"`
	scopesListTasks      = `"index:list-tasks:<namespace>"`
	scopesInsertTask     = `"index:insert-task:<namespace>"`
	scopesDeleteTask     = `"index:delete-task:<namespace>"`
	// The get-artifact family's template (see api.Call.RedirectToLatestArtifact).
	scopesGetArtifact = `{"AllOf":[{"for":"name","in":"names","each":"queue:get-artifact:<name>"}]}`
)

// Routes returns the Index API routes.
func Routes(d Deps) []api.Route {
	if d.Started.IsZero() {
		d.Started = time.Now()
	}
	if d.Version == "" {
		d.Version = "dev"
	}
	h := &handlers{Deps: d}
	p := func(paths ...string) []string {
		out := make([]string, len(paths))
		for i, path := range paths {
			out[i] = BasePath + path
		}
		return out
	}
	paged := []string{"continuationToken", "limit"}
	return append(api.ServiceHealthRoutes(BasePath, h.Started, h.Version), []api.Route{
		{Name: "findTask", Method: http.MethodGet, Paths: p("/task/{indexPath}"), Scopes: scopesFindTask, Handle: h.findTask},
		{Name: "findTasksAtIndex", Method: http.MethodPost, Paths: p("/tasks/indexes"), Query: paged, Input: "index-find-tasks-request",
			Scopes: scopesFindTasks, Handle: h.findTasksAtIndex},
		{Name: "listNamespaces", Method: http.MethodGet, Paths: p("/namespaces", "/namespaces/{$}", "/namespaces/{namespace}"), Query: paged,
			Scopes: scopesListNamespaces, Handle: h.listNamespaces},
		{Name: "listTasks", Method: http.MethodGet, Paths: p("/tasks", "/tasks/{$}", "/tasks/{namespace}"), Query: paged,
			Scopes: scopesListTasks, Handle: h.listTasks},
		{Name: "insertTask", Method: http.MethodPut, Paths: p("/task/{namespace}"), Input: "index-insert-task-request", KeepsNUL: true,
			Scopes: scopesInsertTask, Handle: h.insertTask},
		{Name: "deleteTask", Method: http.MethodDelete, Paths: p("/task/{namespace}"), Scopes: scopesDeleteTask, Handle: h.deleteTask},
		{Name: "findArtifactFromTask", Method: http.MethodGet, Paths: p("/task/{indexPath}/artifacts/{name...}"),
			Scopes: scopesGetArtifact, Handle: h.findArtifactFromTask},

		// hopper's own: where a task is indexed now (for the web UI).
		{Name: "indexedAt", Method: http.MethodGet, Paths: p("/indexed-at/{taskId}"), Handle: h.indexedAt},
	}...)
}

// entryJSON is an entry as the API shows it (indexed-task-response).
type entryJSON struct {
	Namespace string          `json:"namespace"`
	TaskID    string          `json:"taskId"`
	Rank      float64         `json:"rank"`
	Data      json.RawMessage `json:"data"`
	Expires   queue.Time      `json:"expires"`
}

func toEntryJSON(e *index.Entry) entryJSON {
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage(`{}`)
	}
	return entryJSON{Namespace: e.Path(), TaskID: e.TaskID, Rank: e.Rank, Data: data, Expires: queue.NewTime(e.Expires)}
}

func entriesJSON(entries []index.Entry) []entryJSON {
	out := make([]entryJSON, len(entries))
	for i := range entries {
		out[i] = toEntryJSON(&entries[i])
	}
	return out
}

// path returns the URL parameter name as an index path; optional allows
// the empty root namespace.
func path(c *api.Call, name string, optional bool) (string, error) {
	v := c.Params[name]
	if (optional && v == "") || index.ValidPath(v) {
		return v, nil
	}
	if !index.PathPattern().MatchString(v) {
		return "", api.InvalidParam(name, v, index.PathPattern())
	}
	return "", &api.Error{Code: api.CodeInvalidRequestArguments,
		Message: fmt.Sprintf("Invalid URL patterns:\nURL parameter '%s' is longer than %d characters", name, index.MaxPathLength)}
}

func notFound() error {
	return &api.Error{Code: api.CodeResourceNotFound, Message: "Indexed task not found"}
}

// findEntry loads the unexpired entry at path, or answers 404.
func (h *handlers) findEntry(c *api.Call, path string) (*index.Entry, error) {
	ns, name := index.Split(path)
	e, err := h.Store.GetIndexedTask(c.Context(), ns, name, c.Now)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound()
	}
	return e, err
}

func (h *handlers) findTask(c *api.Call) (any, error) {
	p, err := path(c, "indexPath", false)
	if err != nil {
		return nil, err
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"indexPath": p}); err != nil {
		return nil, err
	}
	e, err := h.findEntry(c, p)
	if err != nil {
		return nil, err
	}
	return toEntryJSON(e), nil
}

// findTasksAtIndex answers the entries at the given paths (0 or 1 each,
// in the order asked), a page at a time; the continuation token is the
// offset of the next page in that answer.
func (h *handlers) findTasksAtIndex(c *api.Call) (any, error) {
	var in struct {
		Indexes []string `json:"indexes"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	paths := make([]any, len(in.Indexes))
	for i, p := range in.Indexes {
		paths[i] = p
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"indexPaths": paths}); err != nil {
		return nil, err
	}
	page := c.Page()
	offset, err := decodeOffset(page.ContinuationToken)
	if err != nil {
		return nil, err
	}
	var found []index.Entry
	for start := 0; start < len(in.Indexes); start += maxPathsPerQuery {
		chunk := in.Indexes[start:min(start+maxPathsPerQuery, len(in.Indexes))]
		entries, err := h.Store.FindIndexedTasks(c.Context(), chunk, c.Now)
		if err != nil {
			return nil, err
		}
		found = append(found, entries...)
	}
	limit := page.Limit
	if limit <= 0 || limit > maxPage {
		limit = maxPage
	}
	reply := struct {
		Tasks             []entryJSON `json:"tasks"`
		ContinuationToken string      `json:"continuationToken,omitempty"`
	}{Tasks: []entryJSON{}}
	if offset < len(found) {
		end := min(offset+limit, len(found))
		reply.Tasks = entriesJSON(found[offset:end])
		if end < len(found) {
			reply.ContinuationToken = encodeOffset(end)
		}
	}
	return reply, nil
}

// maxPathsPerQuery bounds the paths looked up in one statement; maxPage is
// the largest (and default) page.
const (
	maxPathsPerQuery = 200
	maxPage          = 1000
)

func encodeOffset(n int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(n)))
}

func decodeOffset(token string) (int, error) {
	if token == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	n, convErr := strconv.Atoi(string(b))
	if err != nil || convErr != nil || n < 0 {
		return 0, store.ErrBadContinuationToken
	}
	return n, nil
}

func (h *handlers) listNamespaces(c *api.Call) (any, error) {
	ns, err := path(c, "namespace", true)
	if err != nil {
		return nil, err
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"namespace": ns}); err != nil {
		return nil, err
	}
	list, next, err := h.Store.ListIndexNamespaces(c.Context(), ns, c.Now, c.Page())
	if err != nil {
		return nil, err
	}
	type namespaceJSON struct {
		Namespace string     `json:"namespace"`
		Name      string     `json:"name"`
		Expires   queue.Time `json:"expires"`
	}
	reply := struct {
		Namespaces        []namespaceJSON `json:"namespaces"`
		ContinuationToken string          `json:"continuationToken,omitempty"`
	}{Namespaces: make([]namespaceJSON, len(list)), ContinuationToken: next}
	for i, n := range list {
		reply.Namespaces[i] = namespaceJSON{Namespace: n.Path(), Name: n.Name, Expires: queue.NewTime(n.Expires)}
	}
	return reply, nil
}

func (h *handlers) listTasks(c *api.Call) (any, error) {
	ns, err := path(c, "namespace", true)
	if err != nil {
		return nil, err
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"namespace": ns}); err != nil {
		return nil, err
	}
	list, next, err := h.Store.ListIndexedTasks(c.Context(), ns, c.Now, c.Page())
	if err != nil {
		return nil, err
	}
	return struct {
		Tasks             []entryJSON `json:"tasks"`
		ContinuationToken string      `json:"continuationToken,omitempty"`
	}{Tasks: entriesJSON(list), ContinuationToken: next}, nil
}

func (h *handlers) insertTask(c *api.Call) (any, error) {
	p, err := path(c, "namespace", false)
	if err != nil {
		return nil, err
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"namespace": p}); err != nil {
		return nil, err
	}
	var in struct {
		TaskID  string          `json:"taskId"`
		Rank    float64         `json:"rank"`
		Data    json.RawMessage `json:"data"`
		Expires queue.Time      `json:"expires"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	ns, name := index.Split(p)
	stored, err := h.Store.InsertIndexedTask(c.Context(), index.Entry{Namespace: ns, Name: name, Rank: in.Rank,
		TaskID: in.TaskID, Data: in.Data, Expires: in.Expires.Time}, c.Now)
	if err != nil {
		return nil, err
	}
	return toEntryJSON(stored), nil
}

func (h *handlers) deleteTask(c *api.Call) (any, error) {
	p, err := path(c, "namespace", false)
	if err != nil {
		return nil, err
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"namespace": p}); err != nil {
		return nil, err
	}
	ns, name := index.Split(p)
	if err := h.Store.DeleteIndexedTask(c.Context(), ns, name); err != nil {
		return nil, err
	}
	return map[string]any{}, nil
}

// findArtifactFromTask redirects to the artifact of the indexed task's
// last run with the rules and scopes of the queue's getLatestArtifact.
func (h *handlers) findArtifactFromTask(c *api.Call) (any, error) {
	name := c.Params["name"]
	if err := c.Authorize(c.Route.Scopes, map[string]any{"names": []any{name}}); err != nil {
		return nil, err
	}
	p, err := path(c, "indexPath", false)
	if err != nil {
		return nil, err
	}
	e, err := h.findEntry(c, p)
	if err != nil {
		return nil, err
	}
	return h.Artifacts.RedirectToLatestArtifact(c, e.TaskID, name)
}

// indexedAt lists the unexpired entries that hold a task (hopper's own
// method, not Taskcluster's): the paths a findTask would answer it at,
// each shown only to callers with its index:find-task:<path> scope.
func (h *handlers) indexedAt(c *api.Call) (any, error) {
	entries, err := h.Store.IndexedTaskPaths(c.Context(), c.Params["taskId"], c.Now)
	if err != nil {
		return nil, err
	}
	visible := []index.Entry{}
	for _, e := range entries {
		err := c.Authorize(scopesFindTask, map[string]any{"indexPath": e.Path()})
		var apiErr *api.Error
		if errors.As(err, &apiErr) && apiErr.Code == api.CodeInsufficientScopes {
			continue
		}
		if err != nil {
			return nil, err
		}
		visible = append(visible, e)
	}
	return struct {
		TaskID string      `json:"taskId"`
		Tasks  []entryJSON `json:"tasks"`
	}{c.Params["taskId"], entriesJSON(visible)}, nil
}
