package tcclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// AuthClient is a client of the Auth API as client, listClients,
// updateClient, enableClient and disableClient describe it. AccessToken is
// only set in the replies of CreateClient and ResetAccessToken, the only
// moments a token is ever shown.
type AuthClient struct {
	ClientID           string   `json:"clientId"`
	Description        string   `json:"description"`
	Expires            Time     `json:"expires"`
	Created            Time     `json:"created"`
	LastModified       Time     `json:"lastModified"`
	LastDateUsed       Time     `json:"lastDateUsed"`
	LastRotated        Time     `json:"lastRotated"`
	DeleteOnExpiration bool     `json:"deleteOnExpiration"`
	Scopes             []string `json:"scopes"`
	ExpandedScopes     []string `json:"expandedScopes"`
	Disabled           bool     `json:"disabled"`
	AccessToken        string   `json:"accessToken,omitempty"`
}

// ClientRequest is the body of CreateClient and UpdateClient. For
// UpdateClient a nil Scopes keeps the client's scopes (an empty non-nil
// slice removes them all); for CreateClient nil means no scopes.
type ClientRequest struct {
	Expires            Time     `json:"expires"`
	Description        string   `json:"description"`
	Scopes             []string `json:"scopes,omitzero"`
	DeleteOnExpiration bool     `json:"deleteOnExpiration,omitempty"`
}

// ListClientsResponse is one page of listClients.
type ListClientsResponse struct {
	Clients           []AuthClient `json:"clients"`
	ContinuationToken string       `json:"continuationToken,omitempty"`
}

// Role is an Auth API role; ExpandedScopes includes "assume:<RoleID>".
type Role struct {
	RoleID         string   `json:"roleId"`
	Scopes         []string `json:"scopes"`
	Description    string   `json:"description"`
	Created        Time     `json:"created"`
	LastModified   Time     `json:"lastModified"`
	ExpandedScopes []string `json:"expandedScopes"`
}

// RoleRequest is the body of CreateRole and UpdateRole.
type RoleRequest struct {
	Scopes      []string `json:"scopes"`
	Description string   `json:"description"`
}

// ListRolesResponse is one page of listRoles2.
type ListRolesResponse struct {
	Roles             []Role `json:"roles"`
	ContinuationToken string `json:"continuationToken,omitempty"`
}

// ListRoleIDsResponse is one page of listRoleIds.
type ListRoleIDsResponse struct {
	RoleIDs           []string `json:"roleIds"`
	ContinuationToken string   `json:"continuationToken,omitempty"`
}

// scopeSet is the body of expandScopes and the reply of it and
// currentScopes.
type scopeSet struct {
	Scopes []string `json:"scopes"`
}

// TestAuthenticateRequest asks testAuthenticate to treat the call as made
// by the fixed "tester" client (access token "no-secret") holding
// ClientScopes, and to require RequiredScopes.
type TestAuthenticateRequest struct {
	ClientScopes   []string `json:"clientScopes"`
	RequiredScopes []string `json:"requiredScopes"`
}

// TestAuthenticateResponse is who the server saw and the scopes it
// granted.
type TestAuthenticateResponse struct {
	ClientID string   `json:"clientId"`
	Scopes   []string `json:"scopes"`
}

// AuthenticateHawkRequest describes a request another service received,
// for AuthenticateHawk to validate.
type AuthenticateHawkRequest struct {
	// Method is the HTTP method in lower case.
	Method string `json:"method"`
	// Resource is the raw request-target (path and query, still encoded).
	Resource string `json:"resource"`
	Host     string `json:"host"`
	Port     int    `json:"port"`
	// Authorization is the request's Authorization header, if it had one.
	Authorization string `json:"authorization,omitempty"`
	SourceIP      string `json:"sourceIp,omitempty"`
}

// AuthenticateHawkResponse is the verdict of AuthenticateHawk. Status is
// "auth-success" (ClientID, Scopes, Expires and possibly Hash set),
// "auth-failed" (Message set) or "no-auth" (anonymous Scopes).
type AuthenticateHawkResponse struct {
	Status   string   `json:"status"`
	Scheme   string   `json:"scheme,omitempty"`
	Scopes   []string `json:"scopes,omitempty"`
	ClientID string   `json:"clientId,omitempty"`
	Expires  Time     `json:"expires,omitzero"`
	Hash     string   `json:"hash,omitempty"`
	Message  string   `json:"message,omitempty"`
}

// AuthBaseURL returns the Auth API base URL without a trailing slash.
func (c *Client) AuthBaseURL() string {
	return strings.TrimRight(c.RootURL, "/") + "/api/auth/v1"
}

// doAuth calls the Auth API like Do calls the queue: same signing, retries
// and error mapping, with path relative to AuthBaseURL.
func (c *Client) doAuth(ctx context.Context, method, path string, query url.Values, in, out any) error {
	_, err := c.doAt(ctx, c.AuthBaseURL(), method, path, query, in, out)
	return err
}

func clientPath(clientID string) string { return "/clients/" + EscapePathParam(clientID) }

func rolePath(roleID string) string { return "/roles/" + EscapePathParam(roleID) }

// CreateClient creates a client and returns it with its access token.
// Repeating an identical request within 15 minutes returns the same token.
func (c *Client) CreateClient(ctx context.Context, clientID string, req *ClientRequest) (*AuthClient, error) {
	var out AuthClient
	if err := c.doAuth(ctx, http.MethodPut, clientPath(clientID), nil, req, &out); err != nil {
		return nil, fmt.Errorf("creating client %s: %w", clientID, err)
	}
	return &out, nil
}

// GetClient returns a client (without its access token).
func (c *Client) GetClient(ctx context.Context, clientID string) (*AuthClient, error) {
	var out AuthClient
	if err := c.doAuth(ctx, http.MethodGet, clientPath(clientID), nil, nil, &out); err != nil {
		return nil, fmt.Errorf("getting client %s: %w", clientID, err)
	}
	return &out, nil
}

// ListClients returns one page of the clients whose clientId starts with
// prefix ("" for all).
func (c *Client) ListClients(ctx context.Context, prefix string, opts ListOptions) (*ListClientsResponse, error) {
	q := listQuery(opts)
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	var out ListClientsResponse
	if err := c.doAuth(ctx, http.MethodGet, "/clients/", q, nil, &out); err != nil {
		return nil, fmt.Errorf("listing clients: %w", err)
	}
	return &out, nil
}

// AllClients lists every client whose clientId starts with prefix,
// following continuation tokens.
func (c *Client) AllClients(ctx context.Context, prefix string) ([]AuthClient, error) {
	return allPages("clients", func(opts ListOptions) ([]AuthClient, string, error) {
		page, err := c.ListClients(ctx, prefix, opts)
		if err != nil {
			return nil, "", err
		}
		return page.Clients, page.ContinuationToken, nil
	})
}

// UpdateClient replaces a client's description, expiry, deleteOnExpiration
// and (unless req.Scopes is nil) scopes.
func (c *Client) UpdateClient(ctx context.Context, clientID string, req *ClientRequest) (*AuthClient, error) {
	var out AuthClient
	if err := c.doAuth(ctx, http.MethodPost, clientPath(clientID), nil, req, &out); err != nil {
		return nil, fmt.Errorf("updating client %s: %w", clientID, err)
	}
	return &out, nil
}

// DeleteClient deletes a client; deleting one that does not exist
// succeeds.
func (c *Client) DeleteClient(ctx context.Context, clientID string) error {
	if err := c.doAuth(ctx, http.MethodDelete, clientPath(clientID), nil, nil, nil); err != nil {
		return fmt.Errorf("deleting client %s: %w", clientID, err)
	}
	return nil
}

// ResetAccessToken gives a client a new access token (the old one stops
// working at once) and returns it.
func (c *Client) ResetAccessToken(ctx context.Context, clientID string) (*AuthClient, error) {
	var out AuthClient
	if err := c.doAuth(ctx, http.MethodPost, clientPath(clientID)+"/reset", nil, nil, &out); err != nil {
		return nil, fmt.Errorf("resetting the access token of client %s: %w", clientID, err)
	}
	return &out, nil
}

// EnableClient re-enables a disabled client.
func (c *Client) EnableClient(ctx context.Context, clientID string) (*AuthClient, error) {
	var out AuthClient
	if err := c.doAuth(ctx, http.MethodPost, clientPath(clientID)+"/enable", nil, nil, &out); err != nil {
		return nil, fmt.Errorf("enabling client %s: %w", clientID, err)
	}
	return &out, nil
}

// DisableClient disables a client: its credentials (and temporary
// credentials it issued) stop authenticating.
func (c *Client) DisableClient(ctx context.Context, clientID string) (*AuthClient, error) {
	var out AuthClient
	if err := c.doAuth(ctx, http.MethodPost, clientPath(clientID)+"/disable", nil, nil, &out); err != nil {
		return nil, fmt.Errorf("disabling client %s: %w", clientID, err)
	}
	return &out, nil
}

// CreateRole creates a role; repeating an identical request returns the
// existing role.
func (c *Client) CreateRole(ctx context.Context, roleID string, req *RoleRequest) (*Role, error) {
	var out Role
	if err := c.doAuth(ctx, http.MethodPut, rolePath(roleID), nil, roleBody(req), &out); err != nil {
		return nil, fmt.Errorf("creating role %s: %w", roleID, err)
	}
	return &out, nil
}

// UpdateRole replaces a role's scopes and description.
func (c *Client) UpdateRole(ctx context.Context, roleID string, req *RoleRequest) (*Role, error) {
	var out Role
	if err := c.doAuth(ctx, http.MethodPost, rolePath(roleID), nil, roleBody(req), &out); err != nil {
		return nil, fmt.Errorf("updating role %s: %w", roleID, err)
	}
	return &out, nil
}

// roleBody makes sure scopes are sent as a list: the API requires the key.
func roleBody(req *RoleRequest) *RoleRequest {
	if req == nil || req.Scopes != nil {
		return req
	}
	cp := *req
	cp.Scopes = []string{}
	return &cp
}

// GetRole returns a role with its expanded scopes.
func (c *Client) GetRole(ctx context.Context, roleID string) (*Role, error) {
	var out Role
	if err := c.doAuth(ctx, http.MethodGet, rolePath(roleID), nil, nil, &out); err != nil {
		return nil, fmt.Errorf("getting role %s: %w", roleID, err)
	}
	return &out, nil
}

// ListRoles returns every role in one reply (listRoles).
func (c *Client) ListRoles(ctx context.Context) ([]Role, error) {
	var out []Role
	if err := c.doAuth(ctx, http.MethodGet, "/roles/", nil, nil, &out); err != nil {
		return nil, fmt.Errorf("listing roles: %w", err)
	}
	return out, nil
}

// ListRoles2 returns one page of roles.
func (c *Client) ListRoles2(ctx context.Context, opts ListOptions) (*ListRolesResponse, error) {
	var out ListRolesResponse
	if err := c.doAuth(ctx, http.MethodGet, "/roles2/", listQuery(opts), nil, &out); err != nil {
		return nil, fmt.Errorf("listing roles: %w", err)
	}
	return &out, nil
}

// ListRoleIDs returns one page of role ids.
func (c *Client) ListRoleIDs(ctx context.Context, opts ListOptions) (*ListRoleIDsResponse, error) {
	var out ListRoleIDsResponse
	if err := c.doAuth(ctx, http.MethodGet, "/roleids/", listQuery(opts), nil, &out); err != nil {
		return nil, fmt.Errorf("listing role ids: %w", err)
	}
	return &out, nil
}

// DeleteRole deletes a role; deleting one that does not exist succeeds.
func (c *Client) DeleteRole(ctx context.Context, roleID string) error {
	if err := c.doAuth(ctx, http.MethodDelete, rolePath(roleID), nil, nil, nil); err != nil {
		return fmt.Errorf("deleting role %s: %w", roleID, err)
	}
	return nil
}

// ExpandScopes returns scopes with every role they reach expanded.
func (c *Client) ExpandScopes(ctx context.Context, scopes []string) ([]string, error) {
	if scopes == nil {
		scopes = []string{}
	}
	var out scopeSet
	if err := c.doAuth(ctx, http.MethodPost, "/scopes/expand", nil, scopeSet{Scopes: scopes}, &out); err != nil {
		return nil, fmt.Errorf("expanding scopes: %w", err)
	}
	return out.Scopes, nil
}

// CurrentScopes returns the scopes the server grants this client's
// requests (after certificate, authorizedScopes, roles and the anonymous
// role).
func (c *Client) CurrentScopes(ctx context.Context) ([]string, error) {
	var out scopeSet
	if err := c.doAuth(ctx, http.MethodGet, "/scopes/current", nil, nil, &out); err != nil {
		return nil, fmt.Errorf("getting current scopes: %w", err)
	}
	return out.Scopes, nil
}

// TestAuthenticate checks how the server authenticates this client's
// requests, posing as the "tester" client.
func (c *Client) TestAuthenticate(ctx context.Context, req *TestAuthenticateRequest) (*TestAuthenticateResponse, error) {
	body := TestAuthenticateRequest{ClientScopes: []string{}, RequiredScopes: []string{}}
	if req != nil {
		body.ClientScopes = append(body.ClientScopes, req.ClientScopes...)
		body.RequiredScopes = append(body.RequiredScopes, req.RequiredScopes...)
	}
	var out TestAuthenticateResponse
	if err := c.doAuth(ctx, http.MethodPost, "/test-authenticate", nil, body, &out); err != nil {
		return nil, fmt.Errorf("testing authentication: %w", err)
	}
	return &out, nil
}

// TestAuthenticateGet is TestAuthenticate with GET and fixed scopes, so it
// works with signed URLs too.
func (c *Client) TestAuthenticateGet(ctx context.Context) (*TestAuthenticateResponse, error) {
	var out TestAuthenticateResponse
	if err := c.doAuth(ctx, http.MethodGet, "/test-authenticate-get/", nil, nil, &out); err != nil {
		return nil, fmt.Errorf("testing authentication: %w", err)
	}
	return &out, nil
}

// AuthenticateHawk asks the server to validate a request another service
// received. A failed validation is a successful call whose Status is
// "auth-failed".
func (c *Client) AuthenticateHawk(ctx context.Context, req *AuthenticateHawkRequest) (*AuthenticateHawkResponse, error) {
	var out AuthenticateHawkResponse
	if err := c.doAuth(ctx, http.MethodPost, "/authenticate-hawk", nil, req, &out); err != nil {
		return nil, fmt.Errorf("authenticating a hawk request: %w", err)
	}
	return &out, nil
}

// AuditEntry is one change of a client or role in the Auth service's
// audit history.
type AuditEntry struct {
	ClientID   string `json:"clientId"`
	ActionType string `json:"actionType"`
	Created    Time   `json:"created"`
	EntityID   string `json:"entityId"`
	EntityType string `json:"entityType"`
}

// AuditHistoryResponse is one page of getEntityHistory or
// listAuditHistory, oldest first.
type AuditHistoryResponse struct {
	AuditHistory      []AuditEntry `json:"auditHistory"`
	ContinuationToken string       `json:"continuationToken,omitempty"`
}

// GetEntityHistory returns one page of the changes made to a client or
// role (entityType "client" or "role"; getEntityHistory).
func (c *Client) GetEntityHistory(ctx context.Context, entityType, entityID string, opts ListOptions) (*AuditHistoryResponse, error) {
	var out AuditHistoryResponse
	path := "/audit/" + EscapePathParam(entityType) + "/" + EscapePathParam(entityID)
	if err := c.doAuth(ctx, http.MethodGet, path, listQuery(opts), nil, &out); err != nil {
		return nil, fmt.Errorf("getting the history of %s %s: %w", entityType, entityID, err)
	}
	return &out, nil
}

// ListAuditHistory returns one page of the changes a client made
// (listAuditHistory).
func (c *Client) ListAuditHistory(ctx context.Context, clientID string, opts ListOptions) (*AuditHistoryResponse, error) {
	var out AuditHistoryResponse
	if err := c.doAuth(ctx, http.MethodGet, clientPath(clientID)+"/audit", listQuery(opts), nil, &out); err != nil {
		return nil, fmt.Errorf("listing the changes client %s made: %w", clientID, err)
	}
	return &out, nil
}
