// Package workermanagerapi serves hopper's Worker Manager service at
// <rootUrl>/api/worker-manager/v1: every method of the official client's
// WorkerManager reference, with Taskcluster's scopes, request schemas and
// error bodies, and the WorkerManagerEvents exchanges.
//
// The rules are package workermanager's; this package decodes, checks
// scopes, calls the store and answers. Secrets (a static worker's
// staticSecret, the reregistration secret) appear only in request bodies
// and registration replies: error replies echo them as "(OMITTED)" and the
// store keeps only their hashes.
package workermanagerapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/schema"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/workermanager"
)

// BasePath is where the Worker Manager API lives below the root URL.
const BasePath = "/api/worker-manager/v1"

// Provider is a provider the deployment offers: pools name it by id.
type Provider struct {
	ID   string
	Type string // workermanager.ProviderType*
	// Verifier, if set, checks the proof a registering worker of the
	// provider presents (the provider knows who its workers are, as a
	// cluster knows its Pods); without it the proof is the one-time
	// secret the worker was started with.
	Verifier IdentityVerifier
}

// IdentityVerifier checks a registering worker's workerIdentityProof
// against what runs it; an error is a refusal, whose detail is logged,
// never echoed. What the proof established of what runs the worker
// (providerData, nil: nothing new) is recorded with the registration
// where the worker has none yet: a worker may register before the
// provisioner has recorded what its start returned.
type IdentityVerifier interface {
	VerifyIdentity(ctx context.Context, pool *workermanager.Pool, w *workermanager.Worker, proof map[string]any) (providerData json.RawMessage, err error)
}

// QueueWorkers is what the API reads of the queue's own worker records
// (listWorkers, getWorker): first claim, last activity, quarantine,
// recent tasks.
type QueueWorkers interface {
	GetWorker(ctx context.Context, key store.WorkerKey, now time.Time) (*store.Worker, error)
	ListWorkers(ctx context.Context, now time.Time, filter store.WorkerFilter, page store.Page) ([]store.Worker, string, error)
	// ListHeldRuns and GetTask tell what a removed worker may still be
	// working on (shouldWorkerTerminate).
	ListHeldRuns(ctx context.Context, q store.HeldRunsQuery, now time.Time) ([]store.HeldRun, error)
	GetTask(ctx context.Context, taskID string) (*queue.TaskState, error)
}

// RunResolver resolves what a removed worker had claimed at once
// (exception/worker-shutdown, retried) instead of leaving it to claim
// expiry.
type RunResolver interface {
	ResolveWorkerRuns(ctx context.Context, key store.WorkerKey, now time.Time) (int, error)
}

// Issuer issues a registered worker's temporary credentials, named
// clientID, signed by hopper's issuing identity.
type Issuer interface {
	WorkerCredentials(clientID string, scopes []string, start, expiry time.Time) (auth.Credentials, error)
}

// Deps are what the Worker Manager API needs. Store, Queue, Issuer and
// Providers are required.
type Deps struct {
	Store     store.WorkerManagerStore
	Queue     QueueWorkers
	Issuer    Issuer
	Providers []Provider
	// Resolver, if set, resolves a removed worker's claimed runs.
	Resolver RunResolver
	// Publisher, if set, receives the WorkerManagerEvents messages (short
	// exchange names; see ExchangePrefix).
	Publisher events.Publisher
	// Caller says who made a call, for the audit lines (optional).
	Caller func(c *api.Call) (*auth.Result, error)
	Logger *slog.Logger
	// Schemas validates the pools' provider configs (default: the
	// embedded schemas, compiled at the first use).
	Schemas *schema.Registry
	// Version is reported by __version__; Started as uptime by ping.
	Version string
	Started time.Time
}

type handlers struct {
	Deps
	providers map[string]Provider
	// compiled holds the schemas when Deps gave none.
	compiled   sync.Once
	schemasErr error
}

// schemas is Deps.Schemas, or the embedded schemas compiled once.
func (h *handlers) schemas() (*schema.Registry, error) {
	h.compiled.Do(func() {
		if h.Schemas == nil {
			h.Schemas, h.schemasErr = schema.New()
		}
	})
	return h.Schemas, h.schemasErr
}

// Routes returns the Worker Manager API routes. A workerPoolId is accepted
// percent-encoded in one path segment (as the official clients send it)
// and, where no other route is in the way, with a raw slash.
func Routes(d Deps) []api.Route {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Started.IsZero() {
		d.Started = time.Now()
	}
	if d.Version == "" {
		d.Version = "dev"
	}
	h := &handlers{Deps: d, providers: map[string]Provider{}}
	for _, p := range d.Providers {
		h.providers[p.ID] = p
	}
	p := func(paths ...string) []string {
		out := make([]string, len(paths))
		for i, path := range paths {
			out[i] = BasePath + path
		}
		return out
	}
	paged := []string{"continuationToken", "limit"}
	get, put, post, del := http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete
	return append(api.ServiceHealthRoutes(BasePath, d.Started, d.Version), []api.Route{
		{Name: "listProviders", Method: get, Paths: p("/providers"), Query: paged, Scopes: `"worker-manager:list-providers"`, Handle: h.listProviders},
		{Name: "createWorkerPool", Method: put, Paths: p("/worker-pool/{workerPoolId...}"), Input: "create-worker-pool-request",
			Scopes: scopeManagePoolWithProvider, Handle: h.createWorkerPool},
		{Name: "updateWorkerPool", Method: post, Paths: p("/worker-pool/{workerPoolId...}"), Input: "update-worker-pool-request",
			Scopes: scopeManagePoolWithProvider, Handle: h.updateWorkerPool},
		{Name: "deleteWorkerPool", Method: del, Paths: p("/worker-pool/{workerPoolId...}"), Scopes: `"worker-manager:manage-worker-pool:<workerPoolId>"`, Handle: h.deleteWorkerPool},
		{Name: "listWorkerPoolLaunchConfigs", Method: get, Paths: p("/worker-pool/{workerPoolId}/launch-configs", "/worker-pool/{wpProvisioner}/{wpWorkerType}/launch-configs"),
			Query: append(paged, "includeArchived"), Scopes: scopeGetPool, Handle: h.listLaunchConfigs},
		{Name: "workerPoolStats", Method: get, Paths: p("/worker-pool/{workerPoolId}/stats", "/worker-pool/{wpProvisioner}/{wpWorkerType}/stats"),
			Scopes: scopeGetPool, Handle: h.workerPoolStats},
		{Name: "workerPool", Method: get, Paths: p("/worker-pool/{workerPoolId...}"), Scopes: scopeGetPool, Handle: h.workerPool},
		{Name: "listWorkerPools", Method: get, Paths: p("/worker-pools"), Query: paged, Scopes: `"worker-manager:list-worker-pools"`, Handle: h.listWorkerPools},
		{Name: "listWorkerPoolsStats", Method: get, Paths: p("/worker-pools/stats"), Query: paged, Scopes: `"worker-manager:list-worker-pools"`, Handle: h.listWorkerPoolsStats},
		{Name: "reportWorkerError", Method: post, Paths: p("/worker-pool-errors/{workerPoolId...}"), Input: "report-worker-error-request",
			Scopes: `{"AllOf":["assume:worker-pool:<workerPoolId>","assume:worker-id:<workerGroup>/<workerId>"]}`, Handle: h.reportWorkerError},
		{Name: "workerPoolErrorStats", Method: get, Paths: p("/worker-pool-errors/stats"), Query: []string{"workerPoolId"},
			Scopes: scopeListErrors, Handle: h.workerPoolErrorStats},
		{Name: "listWorkerPoolErrors", Method: get, Paths: p("/worker-pool-errors/{workerPoolId...}"), Query: append(paged, "launchConfigId", "errorId"),
			Scopes: scopeListErrors, Handle: h.listWorkerPoolErrors},
		{Name: "listWorkersForWorkerGroup", Method: get, Paths: p("/workers/{workerPoolId}/{workerGroup}"), Query: paged,
			Scopes: `"worker-manager:list-workers:<workerPoolId>/<workerGroup>"`, Handle: h.listWorkersForWorkerGroup},
		{Name: "worker", Method: get, Paths: p("/workers/{workerPoolId}/{workerGroup}/{workerId}"),
			Scopes: `"worker-manager:get-worker:<workerPoolId>/<workerGroup>/<workerId>"`, Handle: h.worker},
		{Name: "createWorker", Method: put, Paths: p("/workers/{workerPoolId}/{workerGroup}/{workerId}"), Input: "create-worker-request",
			Scopes: `"worker-manager:create-worker:<workerPoolId>/<workerGroup>/<workerId>"`, Handle: h.createWorker, CleanPayloadFunc: omitStaticSecret},
		{Name: "updateWorker", Method: post, Paths: p("/workers/{workerPoolId}/{workerGroup}/{workerId}"), Input: "create-worker-request",
			Scopes: `"worker-manager:update-worker:<workerPoolId>/<workerGroup>/<workerId>"`, Handle: h.updateWorker, CleanPayloadFunc: omitStaticSecret},
		{Name: "removeWorker", Method: del, Paths: p("/workers/{workerPoolId}/{workerGroup}/{workerId}"),
			Scopes: `"worker-manager:remove-worker:<workerPoolId>/<workerGroup>/<workerId>"`, Handle: h.removeWorker},
		{Name: "shouldWorkerTerminate", Method: get, Paths: p("/workers/{workerPoolId}/{workerGroup}/{workerId}/should-terminate"),
			Scopes: `"worker-manager:should-worker-terminate:<workerPoolId>/<workerGroup>/<workerId>"`, Handle: h.shouldWorkerTerminate},
		{Name: "listWorkersForWorkerPool", Method: get, Paths: p("/workers/{workerPoolId...}"), Query: append(paged, "launchConfigId", "state"),
			Scopes: `"worker-manager:list-workers:<workerPoolId>"`, Handle: h.listWorkersForWorkerPool},
		{Name: "registerWorker", Method: post, Paths: p("/worker/register"), Input: "register-worker-request", Handle: h.registerWorker, CleanPayloadFunc: omitAll},
		{Name: "reregisterWorker", Method: post, Paths: p("/worker/reregister"), Input: "reregister-worker-request",
			Scopes: `"worker-manager:reregister-worker:<workerPoolId>/<workerGroup>/<workerId>"`, Handle: h.reregisterWorker, CleanPayloadFunc: omitAll},
		{Name: "listWorkers", Method: get, Paths: p("/provisioners/{provisionerId}/worker-types/{workerType}/workers"),
			Query: append(paged, "launchConfigId", "quarantined", "workerState"), Scopes: `"worker-manager:list-workers:<provisionerId>/<workerType>"`,
			EarlyScopes: true, Handle: h.listWorkers},
		{Name: "getWorker", Method: get, Paths: p("/provisioners/{provisionerId}/worker-types/{workerType}/workers/{workerGroup}/{workerId}"),
			Scopes: `"worker-manager:get-worker:<provisionerId>/<workerType>/<workerGroup>/<workerId>"`, EarlyScopes: true, Handle: h.getWorker},
	}...)
}

// Scope templates shared by several methods.
const (
	scopeManagePoolWithProvider = `{"AllOf":["worker-manager:manage-worker-pool:<workerPoolId>","worker-manager:provider:<providerId>"]}`
	scopeGetPool                = `"worker-manager:get-worker-pool:<workerPoolId>"`
	scopeListErrors             = `"worker-manager:list-worker-pool-errors:<workerPoolId>"`
)

// omitStaticSecret keeps a worker's staticSecret out of echoed bodies.
func omitStaticSecret(payload []byte) []byte {
	var body map[string]any
	if json.Unmarshal(payload, &body) != nil {
		return []byte(`{}`)
	}
	if info, ok := body["providerInfo"].(map[string]any); ok {
		if _, ok := info["staticSecret"]; ok {
			info["staticSecret"] = "(OMITTED)"
		}
	}
	out, err := json.Marshal(body)
	if err != nil {
		return []byte(`{}`)
	}
	return out
}

// omitAll echoes a registration body as "(OMITTED)": it carries the
// worker's proof of identity or its reregistration secret.
func omitAll([]byte) []byte { return []byte(`"(OMITTED)"`) }

// poolIDOf reads and checks the workerPoolId URL parameter (one segment,
// percent-encoded, or two with a raw slash).
func poolIDOf(c *api.Call) (string, error) {
	id, ok := c.Params["workerPoolId"]
	if !ok {
		id = c.Params["wpProvisioner"] + "/" + c.Params["wpWorkerType"]
	}
	if !workermanager.ValidPoolID(id) {
		return "", api.InvalidParam("workerPoolId", id, workermanager.PoolIDPattern())
	}
	return id, nil
}

// authorizedPool reads the workerPoolId parameter and checks the route's
// scopes for it (with the other parameters given as name, value pairs).
func authorizedPool(c *api.Call, more ...string) (string, error) {
	id, err := poolIDOf(c)
	if err != nil {
		return "", err
	}
	params := map[string]any{"workerPoolId": id}
	for i := 0; i+1 < len(more); i += 2 {
		params[more[i]] = more[i+1]
	}
	return id, authorize(c, params)
}

// authorize checks the route's scopes rendered with params.
func authorize(c *api.Call, params map[string]any) error {
	return c.Authorize(c.Route.Scopes, params)
}

func (h *handlers) clientID(c *api.Call) string {
	if h.Caller == nil {
		return ""
	}
	if res, err := h.Caller(c); err == nil && res != nil {
		return res.ClientID
	}
	return ""
}

func inputError(format string, args ...any) error {
	e := &api.Error{Code: api.CodeInputError}
	e.Message = sprintf(format, args...)
	return e
}

func notFound(format string, args ...any) error { return api.NotFoundf(format, args...) }

func conflict(msg string) error { return &api.Error{Code: api.CodeRequestConflict, Message: msg} }

func (h *handlers) listProviders(c *api.Call) (any, error) {
	if err := authorize(c, nil); err != nil {
		return nil, err
	}
	type entry struct {
		ProviderID   string `json:"providerId"`
		ProviderType string `json:"providerType"`
	}
	all := make([]entry, 0, len(h.providers))
	for _, p := range h.providers {
		all = append(all, entry{p.ID, p.Type})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ProviderID < all[j].ProviderID })
	page, next, err := offsetPage(c, len(all))
	if err != nil {
		return nil, err
	}
	return struct {
		Providers         []entry `json:"providers"`
		ContinuationToken string  `json:"continuationToken,omitempty"`
	}{all[page.start:page.end], next}, nil
}

// timeOut is a time in Taskcluster's JSON form.
func timeOut(t time.Time) queue.Time { return queue.NewTime(t) }
