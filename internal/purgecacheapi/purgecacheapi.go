// Package purgecacheapi serves the Purge-Cache API v1
// (/api/purge-cache/v1/…) over the rules of package purgecache.
package purgecacheapi

import (
	"net/http"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/clock"
	"github.com/hopper-ci/hopper/internal/purgecache"
	"github.com/hopper-ci/hopper/internal/store"
)

// BasePath is where the Purge-Cache API lives below the root URL.
const BasePath = "/api/purge-cache/v1"

// Scope templates, as Taskcluster declares them (purgeRequests' double
// colon included, so roles written for Taskcluster keep working).
const (
	scopePurge       = `"purge-cache:<workerPoolId>:<cacheName>"`
	scopeAllRequests = `"purge-cache:all-purge-requests"`
	scopeRequests    = `"purge-cache:purge-requests::<workerPoolId>"`
)

// Deps are what the Purge-Cache API needs.
type Deps struct {
	Store store.PurgeCacheStore
	Clock clock.Clock // default the system clock
	// Version is reported by __version__.
	Version string
}

// Routes declares the Purge-Cache API v1 (served through package api's
// request pipeline).
func Routes(d Deps) []api.Route {
	c := d.Clock
	if c == nil {
		c = clock.System{}
	}
	h := &handlers{store: d.Store, clock: c, started: c.Now()}
	p := func(path string) []string { return []string{BasePath + path} }
	return append(api.ServiceHealthRoutes(BasePath, h.started, d.Version), []api.Route{
		{Name: "purgeCache", Method: http.MethodPost, Paths: p("/purge-cache/{workerPoolId...}"), Input: "purge-cache-request",
			Scopes: scopePurge, Handle: h.purgeCache},
		{Name: "allPurgeRequests", Method: http.MethodGet, Paths: p("/purge-cache/list"), Query: []string{"continuationToken", "limit"},
			Scopes: scopeAllRequests, EarlyScopes: true, Handle: h.allPurgeRequests},
		{Name: "purgeRequests", Method: http.MethodGet, Paths: p("/purge-cache/{workerPoolId...}"), Query: []string{"since"},
			Scopes: scopeRequests, Handle: h.purgeRequests},
	}...)
}

type handlers struct {
	store   store.PurgeCacheStore
	clock   clock.Clock
	started time.Time
}

func workerPoolID(c *api.Call) (string, error) {
	id := c.Params["workerPoolId"]
	if !purgecache.ValidWorkerPoolID(id) {
		return "", api.InvalidParam("workerPoolId", id, purgecache.WorkerPoolIDPattern())
	}
	return id, nil
}

func (h *handlers) purgeCache(c *api.Call) (any, error) {
	var in struct {
		CacheName string `json:"cacheName"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	pool, err := workerPoolID(c)
	if err != nil {
		return nil, err
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"workerPoolId": pool, "cacheName": in.CacheName}); err != nil {
		return nil, err
	}
	if err := h.store.PutPurgeRequest(c.Context(), purgecache.NewRequest(pool, in.CacheName, c.Now)); err != nil {
		return nil, err
	}
	return &api.Response{Status: http.StatusNoContent}, nil
}

func (h *handlers) allPurgeRequests(c *api.Call) (any, error) {
	reqs, next, err := h.store.ListPurgeRequests(c.Context(), "", c.Page())
	if err != nil {
		return nil, err
	}
	return struct {
		Requests          []purgecache.Entry `json:"requests"`
		ContinuationToken string             `json:"continuationToken,omitempty"`
	}{purgecache.Entries(reqs), next}, nil
}

func (h *handlers) purgeRequests(c *api.Call) (any, error) {
	pool, err := workerPoolID(c)
	if err != nil {
		return nil, err
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"workerPoolId": pool}); err != nil {
		return nil, err
	}
	since, err := purgecache.ParseSince(c.R.URL.Query().Get("since"))
	if err != nil {
		return nil, &api.Error{Code: api.CodeInvalidRequestArguments, Message: err.Error()}
	}
	var all []purgecache.Request
	page := store.Page{}
	for {
		reqs, next, err := h.store.ListPurgeRequests(c.Context(), pool, page)
		if err != nil {
			return nil, err
		}
		all = append(all, reqs...)
		if next == "" {
			break
		}
		page.ContinuationToken = next
	}
	return struct {
		Requests []purgecache.Entry `json:"requests"`
	}{purgecache.Entries(purgecache.Since(all, since))}, nil
}
