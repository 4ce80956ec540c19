// Package secretsapi serves hopper's Secrets service at
// <rootUrl>/api/secrets/v1, every method of Taskcluster's Secrets API v1:
// set, get, remove and list secrets, each a JSON object kept sealed with
// the server key until it expires.
//
// The routes plug into the queue's request pipeline (package api). A
// secret's value exists in plain text only in the body of set and the
// reply of get: error replies echo the request with the value replaced by
// "(OMITTED)", and log lines name secrets, never their values.
package secretsapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/secrets"
	"github.com/hopper-ci/hopper/internal/store"
)

// BasePath is where the Secrets API lives below the root URL.
const BasePath = "/api/secrets/v1"

// Deps are what the Secrets API needs. Store and Sealer are required.
type Deps struct {
	Store  store.SecretStore
	Sealer secrets.Sealer
	// Caller says who made a call, for the audit lines (optional).
	Caller func(c *api.Call) (*auth.Result, error)
	// Revoked, when set, says whether credentials named clientId were
	// revoked before their expiry (a worker its pool's manager removed
	// keeps its credentials for days): get refuses them.
	Revoked func(ctx context.Context, clientID string) (bool, error)
	// Logger receives an audit line per change: the secret's name and the
	// caller, never the value (default slog.Default()).
	Logger *slog.Logger
	// Version is reported by __version__; Started as uptime by ping.
	Version string
	Started time.Time
}

type handlers struct {
	Deps
}

// Scope-expression templates of the endpoints, in Taskcluster's JSON form.
const (
	scopesSet  = `"secrets:set:<name>"`
	scopesGet  = `"secrets:get:<name>"`
	scopesList = `"secrets:list-secrets"`
)

// Routes returns the Secrets API routes. Names are accepted
// percent-encoded in one path segment (as the official clients send them)
// and with raw slashes.
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
	h := &handlers{Deps: d}
	p := func(path string) []string { return []string{BasePath + path} }
	return append(api.ServiceHealthRoutes(BasePath, h.Started, h.Version), []api.Route{
		{Name: "set", Method: http.MethodPut, Paths: p("/secret/{name...}"), Input: "secret", KeepsNUL: true,
			Scopes: scopesSet, EarlyScopes: true, Handle: h.set, CleanPayloadFunc: omitSecret},
		{Name: "remove", Method: http.MethodDelete, Paths: p("/secret/{name...}"),
			Scopes: scopesSet, EarlyScopes: true, Handle: h.remove, CleanPayloadFunc: omitSecret},
		{Name: "get", Method: http.MethodGet, Paths: p("/secret/{name...}"),
			Scopes: scopesGet, EarlyScopes: true, Handle: h.get, CleanPayloadFunc: omitSecret},
		{Name: "list", Method: http.MethodGet, Paths: p("/secrets"), Query: []string{"continuationToken", "limit"},
			Scopes: scopesList, EarlyScopes: true, Handle: h.list},
	}...)
}

// omitSecret replaces the value in an echoed request body, as Taskcluster
// does. A body that is not an object carrying "secret" is echoed as {}:
// whatever it holds might be a value sent the wrong way.
func omitSecret(payload []byte) []byte {
	var body map[string]json.RawMessage
	if json.Unmarshal(payload, &body) != nil {
		return []byte(`{}`)
	}
	if _, ok := body["secret"]; ok {
		body["secret"] = json.RawMessage(`"(OMITTED)"`)
	}
	for k := range body {
		if k != "secret" && k != "expires" {
			delete(body, k)
		}
	}
	out, err := json.Marshal(body)
	if err != nil {
		return []byte(`{}`)
	}
	return out
}

// refuseRevoked answers 401 to revoked credentials.
func (h *handlers) refuseRevoked(c *api.Call) error {
	if h.Revoked == nil || h.Caller == nil {
		return nil
	}
	res, err := h.Caller(c)
	if err != nil || res == nil {
		return err
	}
	revoked, err := h.Revoked(c.Context(), res.ClientID)
	if err != nil {
		return err
	}
	if revoked {
		return &api.Error{Code: api.CodeAuthenticationFailed, Message: "The credentials of " + res.ClientID + " were revoked: the worker was removed from its pool"}
	}
	return nil
}

func notFound() error {
	return &api.Error{Code: api.CodeResourceNotFound, Message: "Secret not found"}
}

// audit logs a change: the secret's name and who made it.
func (h *handlers) audit(c *api.Call, action, name string) {
	clientID := ""
	if h.Caller != nil {
		if res, err := h.Caller(c); err == nil && res != nil {
			clientID = res.ClientID
		}
	}
	h.Logger.Info("secret "+action, "name", name, "clientId", clientID)
}

func (h *handlers) set(c *api.Call) (any, error) {
	name := c.Params["name"]
	var in struct {
		Secret  json.RawMessage `json:"secret"`
		Expires queue.Time      `json:"expires"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	sec, err := secrets.Seal(h.Sealer, name, in.Secret, in.Expires.Time)
	if err != nil {
		return nil, err
	}
	created, err := h.Store.PutSecret(c.Context(), sec)
	if err != nil {
		return nil, err
	}
	action := "updated"
	if created {
		action = "created"
	}
	h.audit(c, action, name)
	return map[string]any{}, nil
}

func (h *handlers) get(c *api.Call) (any, error) {
	name := c.Params["name"]
	if err := h.refuseRevoked(c); err != nil {
		return nil, err
	}
	sec, err := h.Store.GetSecret(c.Context(), name)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !secrets.Readable(sec.Expires, c.Now)) {
		return nil, notFound()
	}
	if err != nil {
		return nil, err
	}
	value, err := secrets.Open(h.Sealer, sec)
	if err != nil {
		return nil, err
	}
	return struct {
		Secret  json.RawMessage `json:"secret"`
		Expires queue.Time      `json:"expires"`
	}{value, queue.NewTime(sec.Expires)}, nil
}

func (h *handlers) remove(c *api.Call) (any, error) {
	name := c.Params["name"]
	if err := h.Store.DeleteSecret(c.Context(), name); err != nil {
		return nil, err
	}
	h.audit(c, "deleted", name)
	return map[string]any{}, nil
}

func (h *handlers) list(c *api.Call) (any, error) {
	names, next, err := h.Store.ListSecrets(c.Context(), c.Now, c.Page())
	if err != nil {
		return nil, err
	}
	if names == nil {
		names = []string{}
	}
	return struct {
		Secrets           []string `json:"secrets"`
		ContinuationToken string   `json:"continuationToken,omitempty"`
	}{names, next}, nil
}
