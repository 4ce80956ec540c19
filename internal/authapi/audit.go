package authapi

import (
	"regexp"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// Action types of the audit log, as Taskcluster's auth service names them.
const (
	auditCreated    = "created"
	auditUpdated    = "updated"
	auditDeleted    = "deleted"
	auditEnabled    = "client enabled"
	auditDisabled   = "client disabled"
	auditTokenReset = "access token reset"
)

// Scope templates of the audit endpoints (Taskcluster's auth service).
const (
	scopesClientAudit = `"auth:client-audit-history:<clientId>"`
	scopesEntityAudit = `"auth:audit-history:<entityType>"`
)

// entityTypePattern is getEntityHistory's entityType parameter: the types
// Taskcluster audits. hopper records clients and roles; the others are
// refused with a sentence saying so rather than answered with an empty
// history that would read as "never changed".
var entityTypePattern = regexp.MustCompile(`^(client|role|secret|hook|worker-pool)$`)

// audit says who is making a change through this call, for the audit log.
// The caller is authenticated by now (every changing endpoint checks
// scopes first), so this costs nothing.
func (h *handlers) audit(c *api.Call, action string) (*store.Audit, error) {
	res, err := h.Caller(c)
	if err != nil {
		return nil, err
	}
	return &store.Audit{ClientID: res.ClientID, Action: action, At: stamp(c)}, nil
}

// auditRoutes are listAuditHistory and getEntityHistory.
func (h *handlers) auditRoutes(p func(...string) []string, paged []string) []api.Route {
	return []api.Route{
		{Name: "listAuditHistory", Method: "GET", Paths: p("/clients/{clientId}/audit"), Query: paged,
			Scopes: scopesClientAudit, EarlyScopes: true, Handle: h.listAuditHistory},
		{Name: "getEntityHistory", Method: "GET", Paths: p("/audit/{entityType}/{entityId...}"), Query: paged,
			Scopes: scopesEntityAudit, EarlyScopes: true, Handle: h.getEntityHistory},
	}
}

// auditEntryJSON is an entry of get-entity-history-response.
type auditEntryJSON struct {
	ClientID   string     `json:"clientId"`
	ActionType string     `json:"actionType"`
	Created    queue.Time `json:"created"`
	EntityID   string     `json:"entityId"`
	EntityType string     `json:"entityType"`
}

type auditReply struct {
	AuditHistory      []auditEntryJSON `json:"auditHistory"`
	ContinuationToken string           `json:"continuationToken,omitempty"`
}

// listAuditHistory lists the changes a client made (Taskcluster's
// listAuditHistory: entries whose actor is the client), oldest first.
func (h *handlers) listAuditHistory(c *api.Call) (any, error) {
	id, err := param(c, "clientId", clientIDPattern)
	if err != nil {
		return nil, err
	}
	return h.auditPage(c, store.AuditQuery{ByClient: id})
}

// getEntityHistory lists the changes made to one client or role, oldest
// first.
func (h *handlers) getEntityHistory(c *api.Call) (any, error) {
	kind, err := param(c, "entityType", entityTypePattern)
	if err != nil {
		return nil, err
	}
	if kind != store.AuditClient && kind != store.AuditRole {
		return nil, inputError("hopper keeps the audit history of clients and roles only, not of %s entities", kind)
	}
	idPattern := clientIDPattern
	if kind == store.AuditRole {
		idPattern = roleIDPattern
	}
	id, err := param(c, "entityId", idPattern)
	if err != nil {
		return nil, err
	}
	return h.auditPage(c, store.AuditQuery{EntityType: kind, EntityID: id})
}

func (h *handlers) auditPage(c *api.Call, q store.AuditQuery) (any, error) {
	entries, next, err := h.Store.ListAuditHistory(c.Context(), q, c.Page())
	if err != nil {
		return nil, err
	}
	out := auditReply{AuditHistory: make([]auditEntryJSON, 0, len(entries)), ContinuationToken: next}
	for _, e := range entries {
		out.AuditHistory = append(out.AuditHistory, auditEntryJSON{ClientID: e.ClientID, ActionType: e.Action,
			Created: queue.NewTime(e.Created), EntityID: e.EntityID, EntityType: e.EntityType})
	}
	return out, nil
}
