// Package hooksapi serves Taskcluster's Hooks API v1 at
// <rootUrl>/api/hooks/v1 over the rules of package hooks: hook
// definitions, triggers (API call, webhook token), trigger tokens and the
// record of fires. Its Firer fires hooks for the routes, for the
// scheduler and for Pulse messages alike.
//
// The routes plug into the queue's request pipeline (package api), so
// they share its error format, body validation and lazy Hawk
// authentication. Trigger tokens exist in plain text only in the replies
// of getTriggerToken and resetTriggerToken; the store holds them sealed
// with the server key, bound to the hook's id, and they are compared in
// constant time and never logged.
package hooksapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/hooks"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// BasePath is where the Hooks API lives below the root URL.
const BasePath = "/api/hooks/v1"

// HooksExchangePrefix starts the names of the exchanges the Hooks service
// publishes hook changes to, as Taskcluster's does.
const HooksExchangePrefix = "exchange/taskcluster-hooks/v1/"

// Store is what the Hooks API reads and writes: its hooks, and the tasks
// of their fires (for listLastFires' task states).
type Store interface {
	store.HookStore
	GetTasks(ctx context.Context, taskIDs []string) ([]*queue.TaskState, error)
}

// Deps are what the Hooks API needs. Every field is required except
// Logger (default slog.Default()) and Started (default: when Routes is
// called).
type Deps struct {
	Store Store
	// Sealer encrypts trigger tokens at rest.
	Sealer *auth.Sealer
	// Firer fires hooks for triggers.
	Firer *Firer
	// Caller returns who made a call (the pipeline's lazy authentication).
	Caller func(c *api.Call) (*auth.Result, error)
	// PulseAvailable says whether an AMQP broker is configured, without
	// which hooks with bindings are refused.
	PulseAvailable bool
	// Changed, if set, is called after a hook is created, updated or
	// removed (the Pulse listener reconciles its bindings).
	Changed func()
	// Events, if set, receives Taskcluster's hook-created, hook-updated
	// and hook-deleted messages (an AMQP publisher whose exchange prefix is
	// HooksExchangePrefix).
	Events  events.Publisher
	Logger  *slog.Logger
	Started time.Time
	// Version is reported by __version__.
	Version string
}

type handlers struct {
	Deps
}

// Scope expressions of the endpoints, as Taskcluster declares them.
const (
	scopesListGroups  = `"hooks:list-hooks:"`
	scopesListHooks   = `"hooks:list-hooks:<hookGroupId>"`
	scopesGetHook     = `"hooks:get:<hookGroupId>:<hookId>"`
	scopesStatus      = `"hooks:status:<hookGroupId>/<hookId>"`
	scopesModify      = `{"AllOf":["hooks:modify-hook:<hookGroupId>/<hookId>","assume:hook-id:<hookGroupId>/<hookId>"]}`
	scopesRemove      = `"hooks:modify-hook:<hookGroupId>/<hookId>"`
	scopesTrigger     = `"hooks:trigger-hook:<hookGroupId>/<hookId>"`
	scopesGetToken    = `"hooks:get-trigger-token:<hookGroupId>/<hookId>"`
	scopesResetToken  = `"hooks:reset-trigger-token:<hookGroupId>/<hookId>"`
	scopesListFires   = `"hooks:list-last-fires:<hookGroupId>/<hookId>"`
	hookPath          = "/hooks/{hookGroupId}/{hookId}"
	tokenAssociatedAD = "hooks trigger token "
)

// Routes returns the Hooks API routes. A hookId containing slashes is sent
// percent-encoded in one path segment, as every official client does.
func Routes(d Deps) []api.Route {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Started.IsZero() {
		d.Started = time.Now()
	}
	h := &handlers{Deps: d}
	p := func(path string) []string { return []string{BasePath + path} }
	return append(api.ServiceHealthRoutes(BasePath, h.Started, h.Version), []api.Route{
		{Name: "listHookGroups", Method: http.MethodGet, Paths: p("/hooks"),
			Scopes: scopesListGroups, EarlyScopes: true, Handle: h.listHookGroups},
		{Name: "listHooks", Method: http.MethodGet, Paths: p("/hooks/{hookGroupId}"),
			Scopes: scopesListHooks, EarlyScopes: true, Handle: h.listHooks},
		{Name: "hook", Method: http.MethodGet, Paths: p(hookPath),
			Scopes: scopesGetHook, EarlyScopes: true, Handle: h.hook},
		{Name: "getHookStatus", Method: http.MethodGet, Paths: p(hookPath + "/status"),
			Scopes: scopesStatus, EarlyScopes: true, Handle: h.getHookStatus},
		{Name: "createHook", Method: http.MethodPut, Paths: p(hookPath), Input: "create-hook-request", KeepsNUL: true,
			Scopes: scopesModify, Handle: h.createHook},
		{Name: "updateHook", Method: http.MethodPost, Paths: p(hookPath), Input: "create-hook-request", KeepsNUL: true,
			Scopes: scopesModify, Handle: h.updateHook},
		{Name: "removeHook", Method: http.MethodDelete, Paths: p(hookPath),
			Scopes: scopesRemove, EarlyScopes: true, Handle: h.removeHook},
		{Name: "triggerHook", Method: http.MethodPost, Paths: p(hookPath + "/trigger"), Input: "trigger-hook-request", KeepsNUL: true,
			Scopes: scopesTrigger, Handle: h.triggerHook},
		{Name: "getTriggerToken", Method: http.MethodGet, Paths: p(hookPath + "/token"),
			Scopes: scopesGetToken, EarlyScopes: true, Handle: h.getTriggerToken},
		{Name: "resetTriggerToken", Method: http.MethodPost, Paths: p(hookPath + "/token"),
			Scopes: scopesResetToken, EarlyScopes: true, Handle: h.resetTriggerToken},
		{Name: "triggerHookWithToken", Method: http.MethodPost, Paths: p(hookPath + "/trigger/{token}"), Input: "trigger-hook-request", KeepsNUL: true,
			SecretParams: []string{"token"}, Handle: h.triggerHookWithToken},
		{Name: "listLastFires", Method: http.MethodGet, Paths: p(hookPath + "/last-fires"), Query: []string{"continuationToken", "limit"},
			Scopes: scopesListFires, EarlyScopes: true, Handle: h.listLastFires},
	}...)
}

// ids returns the URL's hookGroupId and hookId after checking their
// patterns.
func ids(c *api.Call) (string, string, error) {
	group, id := c.Params["hookGroupId"], c.Params["hookId"]
	if err := checkParam("hookGroupId", group, hooks.GroupIDPattern); err != nil {
		return "", "", err
	}
	if _, ok := c.Params["hookId"]; ok {
		if err := checkParam("hookId", id, hooks.HookIDPattern); err != nil {
			return "", "", err
		}
	}
	return group, id, nil
}

func checkParam(name, value string, pattern *regexp.Regexp) error {
	if !pattern.MatchString(value) {
		return api.InvalidParam(name, value, pattern)
	}
	return nil
}

// apiError turns the rules' refusals into API errors.
func apiError(err error) error {
	var he *hooks.Error
	if errors.As(err, &he) {
		return &api.Error{Code: he.Code, Message: he.Message, Details: he.Details}
	}
	return err
}

func notFound(msg string) error { return &api.Error{Code: api.CodeResourceNotFound, Message: msg} }

// loadHook loads a hook or answers Taskcluster's 404.
func (h *handlers) loadHook(c *api.Call, group, id string) (*store.Hook, *hooks.Definition, error) {
	stored, err := h.Store.GetHook(c.Context(), group, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, notFound("No such hook")
	}
	if err != nil {
		return nil, nil, err
	}
	def, err := definitionOf(stored)
	return stored, def, err
}

func (h *handlers) listHookGroups(c *api.Call) (any, error) {
	groups, err := h.Store.ListHookGroups(c.Context())
	if err != nil {
		return nil, err
	}
	return map[string]any{"groups": groups}, nil
}

func (h *handlers) listHooks(c *api.Call) (any, error) {
	group, _, err := ids(c)
	if err != nil {
		return nil, err
	}
	stored, err := h.Store.ListHooks(c.Context(), group)
	if err != nil {
		return nil, err
	}
	if len(stored) == 0 {
		return nil, notFound("No such group")
	}
	out := make([]*hooks.Definition, 0, len(stored))
	for i := range stored {
		def, err := definitionOf(&stored[i])
		if err != nil {
			return nil, err
		}
		out = append(out, def)
	}
	return map[string]any{"hooks": out}, nil
}

func (h *handlers) hook(c *api.Call) (any, error) {
	group, id, err := ids(c)
	if err != nil {
		return nil, err
	}
	_, def, err := h.loadHook(c, group, id)
	return def, err
}

func (h *handlers) getHookStatus(c *api.Call) (any, error) {
	group, id, err := ids(c)
	if err != nil {
		return nil, err
	}
	stored, def, err := h.loadHook(c, group, id)
	if err != nil {
		return nil, err
	}
	fires, _, err := h.Store.ListLastFires(c.Context(), group, id, store.Page{Limit: 1})
	if err != nil {
		return nil, err
	}
	reply := map[string]any{"lastFire": map[string]any{"result": "no-fire"}}
	if len(fires) > 0 {
		f := fires[0]
		at := queue.NewTime(f.TaskCreateTime).String()
		if f.Result == hooks.ResultSuccess {
			reply["lastFire"] = map[string]any{"result": f.Result, "taskId": f.TaskID, "time": at}
		} else {
			// The error is JSON for the queue's refusals and plain text for
			// template errors, as in Taskcluster.
			var detail map[string]any
			if json.Unmarshal([]byte(f.Error), &detail) != nil {
				detail = map[string]any{"message": f.Error}
			}
			reply["lastFire"] = map[string]any{"result": f.Result, "error": detail, "time": at}
		}
	}
	if len(def.Schedule) > 0 && !stored.NextScheduled.IsZero() {
		reply["nextScheduledDate"] = queue.NewTime(stored.NextScheduled).String()
	}
	return reply, nil
}

// notFoundIfMissing answers Taskcluster's 404 for a hook the store does
// not have, nil for any other error.
func notFoundIfMissing(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return notFound("No such hook")
	}
	return nil
}
