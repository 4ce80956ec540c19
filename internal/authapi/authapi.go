// Package authapi serves hopper's subset of Taskcluster's Auth API v1 at
// <rootUrl>/api/auth/v1: clients and roles stored in hopper's database,
// scope expansion, and the authentication test endpoints (auth spec §4).
//
// The routes plug into the queue's request pipeline (package api), so
// they share its error format, body validation and lazy Hawk
// authentication. Access tokens only exist in plain text in the replies of
// createClient and resetAccessToken; the store holds them sealed with the
// server key, bound to their clientId.
package authapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/store"
)

// BasePath is where the Auth API lives below the root URL.
const BasePath = "/api/auth/v1"

// StaticPrefix starts the clientIds reserved for configured clients, which
// the API refuses to create or change.
const StaticPrefix = "static/"

// Deps are what the Auth API needs. Every field is required except Logger
// (default slog.Default()) and Started (default: when Routes is called).
type Deps struct {
	// Store persists clients (with sealed tokens) and roles.
	Store store.AuthStore
	// Sealer encrypts access tokens before they are stored; the clientId
	// is the associated data.
	Sealer *auth.Sealer
	// Clients finds clients for authentication, static ones included; the
	// API uses it to describe static clients, which are not in Store.
	Clients auth.ClientLookup
	// IsStatic reports whether a clientId names a configured client.
	IsStatic func(clientID string) bool
	// Roles provides the expander of the current role set.
	Roles auth.ExpanderSource
	// Authenticator validates requests on behalf of other services
	// (authenticateHawk).
	Authenticator *auth.Authenticator
	// Caller returns who made a call (the pipeline's lazy authentication).
	Caller func(c *api.Call) (*auth.Result, error)
	// Logger receives an audit line per change; never a secret.
	Logger *slog.Logger
	// Started is reported as uptime by ping and used as the timestamps of
	// static clients.
	Started time.Time
	// Version is reported by __version__.
	Version string
	// TunnelSecret signs websocktunnel tokens (websocktunnelToken); empty:
	// no tunnel, the method answers 404.
	TunnelSecret []byte
	// Identity, with its Keys, makes hopper an OpenID issuer for tasks
	// (createIdToken, the discovery document and the key set).
	Identity Identity
	// S3, if set, backs awsS3Credentials; without it every bucket is
	// answered ResourceNotFound, as Taskcluster answers a bucket it has
	// no credentials for.
	S3 *S3STS
	// Azure, if set, backs the Azure methods; without it they know no
	// account (ResourceNotFound, as Taskcluster answers an account it has
	// no key for).
	Azure *AzureStorage
}

// handlers serves the routes with the dependencies.
type handlers struct {
	Deps
}

// Scope-expression templates of the endpoints (auth spec §4.1), in
// Taskcluster's JSON form.
const (
	scopesListClients  = `"auth:list-clients"`
	scopesGetClient    = `"auth:get-client:<clientId>"`
	scopesCreateClient = `{"AllOf":["auth:create-client:<clientId>",{"for":"scope","in":"scopes","each":"<scope>"}]}`
	scopesUpdateClient = `{"AllOf":["auth:update-client:<clientId>",{"for":"scope","in":"scopesAdded","each":"<scope>"}]}`
	scopesResetToken   = `"auth:reset-access-token:<clientId>"`
	scopesEnableClient = `"auth:enable-client:<clientId>"`
	scopesDisable      = `"auth:disable-client:<clientId>"`
	scopesDeleteClient = `"auth:delete-client:<clientId>"`
	scopesListRoles    = `"auth:list-roles"`
	scopesGetRole      = `"auth:get-role:<roleId>"`
	scopesCreateRole   = `{"AllOf":["auth:create-role:<roleId>",{"for":"scope","in":"scopes","each":"<scope>"}]}`
	scopesUpdateRole   = `{"AllOf":["auth:update-role:<roleId>",{"for":"scope","in":"scopesAdded","each":"<scope>"}]}`
	scopesDeleteRole   = `"auth:delete-role:<roleId>"`
	scopesExpand       = `"auth:expand-scopes"`
	scopesCurrent      = `"auth:current-scopes"`
)

// Routes returns the Auth API routes. Client and role ids are accepted
// percent-encoded in one path segment (as every official client sends
// them) and, for roles and the plain client paths, also with raw slashes.
func Routes(d Deps) []api.Route {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Started.IsZero() {
		d.Started = time.Now()
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
	routes := append(api.ServiceHealthRoutes(BasePath, h.Started, h.Version), []api.Route{
		{Name: "listClients", Method: http.MethodGet, Paths: p("/clients/{$}"), Query: append([]string{"prefix"}, paged...),
			Scopes: scopesListClients, EarlyScopes: true, Handle: h.listClients},
		{Name: "client", Method: http.MethodGet, Paths: p("/clients/{clientId...}"),
			Scopes: scopesGetClient, EarlyScopes: true, Handle: h.getClient},
		{Name: "createClient", Method: http.MethodPut, Paths: p("/clients/{clientId...}"), Input: "create-client-request",
			Scopes: scopesCreateClient, Handle: h.createClient},
		{Name: "updateClient", Method: http.MethodPost, Paths: p("/clients/{clientId...}"), Input: "update-client-request",
			Scopes: scopesUpdateClient, Handle: h.updateClient},
		{Name: "resetAccessToken", Method: http.MethodPost, Paths: p("/clients/{clientId}/reset"),
			Scopes: scopesResetToken, EarlyScopes: true, Handle: h.resetAccessToken},
		{Name: "enableClient", Method: http.MethodPost, Paths: p("/clients/{clientId}/enable"),
			Scopes: scopesEnableClient, EarlyScopes: true, Handle: h.enableClient},
		{Name: "disableClient", Method: http.MethodPost, Paths: p("/clients/{clientId}/disable"),
			Scopes: scopesDisable, EarlyScopes: true, Handle: h.disableClient},
		{Name: "deleteClient", Method: http.MethodDelete, Paths: p("/clients/{clientId...}"),
			Scopes: scopesDeleteClient, EarlyScopes: true, Handle: h.deleteClient},

		{Name: "listRoles", Method: http.MethodGet, Paths: p("/roles/{$}"),
			Scopes: scopesListRoles, EarlyScopes: true, Handle: h.listRoles},
		{Name: "listRoles2", Method: http.MethodGet, Paths: p("/roles2/{$}"), Query: paged,
			Scopes: scopesListRoles, EarlyScopes: true, Handle: h.listRoles2},
		{Name: "listRoleIds", Method: http.MethodGet, Paths: p("/roleids/{$}"), Query: paged,
			Scopes: scopesListRoles, EarlyScopes: true, Handle: h.listRoleIDs},
		{Name: "role", Method: http.MethodGet, Paths: p("/roles/{roleId...}"),
			Scopes: scopesGetRole, EarlyScopes: true, Handle: h.getRole},
		{Name: "createRole", Method: http.MethodPut, Paths: p("/roles/{roleId...}"), Input: "create-role-request",
			Scopes: scopesCreateRole, Handle: h.createRole},
		{Name: "updateRole", Method: http.MethodPost, Paths: p("/roles/{roleId...}"), Input: "create-role-request",
			Scopes: scopesUpdateRole, Handle: h.updateRole},
		{Name: "deleteRole", Method: http.MethodDelete, Paths: p("/roles/{roleId...}"),
			Scopes: scopesDeleteRole, EarlyScopes: true, Handle: h.deleteRole},

		{Name: "expandScopes", Method: http.MethodPost, Paths: p("/scopes/expand"), Input: "scopeset",
			Scopes: scopesExpand, EarlyScopes: true, Handle: h.expandScopes},
		{Name: "currentScopes", Method: http.MethodGet, Paths: p("/scopes/current"),
			Scopes: scopesCurrent, EarlyScopes: true, Handle: h.currentScopes},
		{Name: "authenticateHawk", Method: http.MethodPost, Paths: p("/authenticate-hawk"), Input: "authenticate-hawk-request",
			Handle: h.authenticateHawk},
		{Name: "testAuthenticate", Method: http.MethodPost, Paths: p("/test-authenticate"), Input: "test-authenticate-request",
			Handle: h.testAuthenticate},
		{Name: "testAuthenticateGet", Method: http.MethodGet, Paths: p("/test-authenticate-get/{$}"),
			Handle: h.testAuthenticateGet},
	}...)
	routes = append(routes, h.websocktunnelRoute(p))
	return append(routes, h.auditRoutes(p, paged)...)
}

// URL parameter patterns (Taskcluster's auth service).
var (
	clientIDPattern = regexp.MustCompile(`^[A-Za-z0-9!@/:.+|_-]+$`)
	roleIDPattern   = regexp.MustCompile(`^[\x20-\x7e]+$`)
)

// param returns a URL parameter after checking it against its pattern.
func param(c *api.Call, name string, pattern *regexp.Regexp) (string, error) {
	v := c.Params[name]
	if !pattern.MatchString(v) {
		return "", api.InvalidParam(name, v, pattern)
	}
	return v, nil
}

func inputError(format string, args ...any) error {
	return &api.Error{Code: api.CodeInputError, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &api.Error{Code: api.CodeResourceNotFound, Message: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) error {
	return &api.Error{Code: api.CodeRequestConflict, Message: fmt.Sprintf(format, args...)}
}

// scopedInput is a body that grants scopes: a client's or a role's.
type scopedInput interface{ grantedScopes() []string }

func (in *clientInput) grantedScopes() []string { return in.Scopes }
func (in *roleInput) grantedScopes() []string   { return in.Scopes }

// decodeInput reads a client's or role's body, refusing scopes no client
// or role may hold.
func decodeInput(c *api.Call, in scopedInput) error {
	if err := c.Decode(in); err != nil {
		return err
	}
	return checkScopeSyntax(in.grantedScopes())
}

// stamp is the call's time as the store keeps it (UTC, milliseconds).
func stamp(c *api.Call) time.Time { return c.Now.UTC().Truncate(time.Millisecond) }

// checkScopeSyntax refuses scopes ending in "**", which clients and roles
// may not hold (auth spec §3.1).
func checkScopeSyntax(scopes []string) error {
	for _, s := range scopes {
		if strings.HasSuffix(s, "**") {
			return inputError("scopes must not end with `**`")
		}
	}
	return nil
}

// authFailure maps a failure of the auth package onto the API's errors,
// for the endpoints that authenticate with their own Authenticator.
func authFailure(err error) error {
	var authErr *auth.AuthenticationError
	if errors.As(err, &authErr) {
		return &api.Error{Code: api.CodeAuthenticationFailed, Message: authErr.Message}
	}
	var scopeErr *auth.InsufficientScopesError
	if errors.As(err, &scopeErr) {
		return &api.Error{Code: api.CodeInsufficientScopes, Message: scopeErr.Error()}
	}
	return err
}

// expander returns the current role expander.
func (h *handlers) expander(ctx context.Context) (*auth.Expander, error) {
	e, err := h.Roles.Expander(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading roles: %w", err)
	}
	return e, nil
}

// noContent is the empty 204 reply of the delete methods.
func noContent() *api.Response { return &api.Response{Status: http.StatusNoContent} }

// nonNil turns a nil list into an empty one, so replies carry [] not null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
