package authapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// roleJSON is the get-role-response.
type roleJSON struct {
	RoleID         string     `json:"roleId"`
	Scopes         []string   `json:"scopes"`
	Description    string     `json:"description"`
	Created        queue.Time `json:"created"`
	LastModified   queue.Time `json:"lastModified"`
	ExpandedScopes []string   `json:"expandedScopes"`
}

func roleReply(r *store.Role, e *auth.Expander) roleJSON {
	return roleJSON{
		RoleID:         r.RoleID,
		Scopes:         nonNil(r.Scopes),
		Description:    r.Description,
		Created:        queue.NewTime(r.Created),
		LastModified:   queue.NewTime(r.LastModified),
		ExpandedScopes: nonNil(e.ExpandRole(r.RoleID)),
	}
}

// roleInput is the createRole / updateRole body.
type roleInput struct {
	Scopes      []string `json:"scopes"`
	Description string   `json:"description"`
}

func (h *handlers) loadRoles(ctx context.Context) ([]store.Role, *auth.Expander, error) {
	roles, err := h.Store.ListRoles(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("listing roles: %w", err)
	}
	e, err := h.expander(ctx)
	if err != nil {
		return nil, nil, err
	}
	return roles, e, nil
}

func (h *handlers) listRoles(c *api.Call) (any, error) {
	roles, e, err := h.loadRoles(c.Context())
	if err != nil {
		return nil, err
	}
	out := make([]roleJSON, 0, len(roles))
	for i := range roles {
		out = append(out, roleReply(&roles[i], e))
	}
	return out, nil
}

type listRoles2Reply struct {
	Roles             []roleJSON `json:"roles"`
	ContinuationToken string     `json:"continuationToken,omitempty"`
}

func (h *handlers) listRoles2(c *api.Call) (any, error) {
	roles, e, err := h.loadRoles(c.Context())
	if err != nil {
		return nil, err
	}
	start, end, next, err := pageRoles(len(roles), c.Page())
	if err != nil {
		return nil, err
	}
	out := listRoles2Reply{Roles: make([]roleJSON, 0, end-start), ContinuationToken: next}
	for i := start; i < end; i++ {
		out.Roles = append(out.Roles, roleReply(&roles[i], e))
	}
	return out, nil
}

type listRoleIDsReply struct {
	RoleIDs           []string `json:"roleIds"`
	ContinuationToken string   `json:"continuationToken,omitempty"`
}

func (h *handlers) listRoleIDs(c *api.Call) (any, error) {
	roles, err := h.Store.ListRoles(c.Context())
	if err != nil {
		return nil, fmt.Errorf("listing roles: %w", err)
	}
	start, end, next, err := pageRoles(len(roles), c.Page())
	if err != nil {
		return nil, err
	}
	out := listRoleIDsReply{RoleIDs: make([]string, 0, end-start), ContinuationToken: next}
	for _, r := range roles[start:end] {
		out.RoleIDs = append(out.RoleIDs, r.RoleID)
	}
	return out, nil
}

// maxRolePage caps a page of roles when a limit is given.
const maxRolePage = 1000

// roleTokenPrefix marks hopper's role-list continuation tokens, which
// encode an offset into the roles sorted by roleId.
const roleTokenPrefix = "roles@"

func encodeRoleToken(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(roleTokenPrefix + strconv.Itoa(offset)))
}

func decodeRoleToken(token string) (int, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return 0, false
	}
	digits, ok := strings.CutPrefix(string(raw), roleTokenPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil && n >= 0
}

// pageRoles selects [start, end) of n roles for a page: without a limit
// everything from the token on, with one at most min(limit, 1000) roles
// and a token if more remain.
func pageRoles(n int, page store.Page) (start, end int, next string, err error) {
	if page.ContinuationToken != "" {
		var ok bool
		if start, ok = decodeRoleToken(page.ContinuationToken); !ok {
			return 0, 0, "", inputError("Invalid continuationToken")
		}
		start = min(start, n)
	}
	end = n
	if page.Limit > 0 {
		end = min(n, start+min(page.Limit, maxRolePage))
	}
	if end < n {
		next = encodeRoleToken(end)
	}
	return start, end, next, nil
}

func roleNotFound(id string) error { return notFound("Role with roleId '%s' not found", id) }

func (h *handlers) getRole(c *api.Call) (any, error) {
	id, err := param(c, "roleId", roleIDPattern)
	if err != nil {
		return nil, err
	}
	roles, e, err := h.loadRoles(c.Context())
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(roles, func(r store.Role) bool { return r.RoleID == id })
	if i < 0 {
		return nil, roleNotFound(id)
	}
	return roleReply(&roles[i], e), nil
}

// unchangedRole is how createRole's store callback reports an identical
// existing role: the request is a retry, answered without writing.
type unchangedRole struct{ role *store.Role }

func (unchangedRole) Error() string { return "role unchanged" }

func (h *handlers) createRole(c *api.Call) (any, error) {
	id, err := param(c, "roleId", roleIDPattern)
	if err != nil {
		return nil, err
	}
	var in roleInput
	if err := decodeInput(c, &in); err != nil {
		return nil, err
	}
	in.Scopes = nonNil(in.Scopes)
	if err := c.Authorize(c.Route.Scopes, map[string]any{"roleId": id, "scopes": in.Scopes}); err != nil {
		return nil, err
	}
	scopes := slices.Clone(in.Scopes)
	auth.SortScopes(scopes)
	now := stamp(c)
	// PutRole names the action (created or updated) by what it finds.
	audit, err := h.audit(c, "")
	if err != nil {
		return nil, err
	}
	role, err := h.Store.PutRole(c.Context(), id, func(existing *store.Role) (*store.Role, error) {
		if existing != nil {
			if existing.Description == in.Description && slices.Equal(existing.Scopes, scopes) {
				return nil, unchangedRole{existing}
			}
			return nil, conflict("Role with roleId '%s' already exists", id)
		}
		role := &store.Role{RoleID: id, Scopes: scopes, Description: in.Description, Created: now, LastModified: now}
		if err := h.validateWith(c.Context(), role); err != nil {
			return nil, err
		}
		return role, nil
	}, audit)
	h.rolesChanged()
	var same unchangedRole
	switch {
	case errors.As(err, &same):
		role = same.role
	case err != nil:
		return nil, err
	default:
		h.Logger.Info("role created", "roleId", id, "scopes", len(scopes))
	}
	return h.replyRole(c.Context(), role)
}

// replyRole answers with a role as the current roles expand it.
func (h *handlers) replyRole(ctx context.Context, r *store.Role) (any, error) {
	e, err := h.expander(ctx)
	if err != nil {
		return nil, err
	}
	return roleReply(r, e), nil
}

// validateWith checks the role set that results from storing role (a new
// role or a new version of one): no malformed parameterized scope and no
// dependency cycle, or 400. It runs inside PutRole, which serializes role
// changes, so concurrent changes cannot combine into a cycle.
func (h *handlers) validateWith(ctx context.Context, role *store.Role) error {
	roles, err := h.Store.ListRoles(ctx)
	if err != nil {
		return fmt.Errorf("listing roles: %w", err)
	}
	// The changed role goes last, as in Taskcluster, so the same cycle is
	// reported.
	set := make([]auth.Role, 0, len(roles)+1)
	for _, r := range roles {
		if r.RoleID != role.RoleID {
			set = append(set, auth.Role{RoleID: r.RoleID, Scopes: r.Scopes})
		}
	}
	set = append(set, auth.Role{RoleID: role.RoleID, Scopes: role.Scopes})
	var setErr *auth.RoleSetError
	if err := auth.ValidateRoles(set); errors.As(err, &setErr) {
		return inputError("%s", setErr.Error())
	} else if err != nil {
		return fmt.Errorf("validating roles: %w", err)
	}
	return nil
}

func (h *handlers) updateRole(c *api.Call) (any, error) {
	id, err := param(c, "roleId", roleIDPattern)
	if err != nil {
		return nil, err
	}
	var in roleInput
	if err := decodeInput(c, &in); err != nil {
		return nil, err
	}
	in.Scopes = nonNil(in.Scopes)
	roles, e, err := h.loadRoles(c.Context())
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(roles, func(r store.Role) bool { return r.RoleID == id })
	if i < 0 {
		return nil, roleNotFound(id)
	}
	// Authorize outside the transaction (authentication reads roles and
	// clients); inside it the check is repeated against the locked state
	// with the cached authentication.
	if err := c.Authorize(c.Route.Scopes, map[string]any{"roleId": id, "scopesAdded": roleScopesAdded(e, roles[i].Scopes, in.Scopes)}); err != nil {
		return nil, err
	}
	now := stamp(c)
	// PutRole names the action (created or updated) by what it finds.
	audit, err := h.audit(c, "")
	if err != nil {
		return nil, err
	}
	role, err := h.Store.PutRole(c.Context(), id, func(existing *store.Role) (*store.Role, error) {
		if existing == nil {
			return nil, roleNotFound(id)
		}
		if !slices.Equal(existing.Scopes, roles[i].Scopes) {
			current, err := h.currentExpander(c.Context())
			if err != nil {
				return nil, err
			}
			if err := c.Authorize(c.Route.Scopes, map[string]any{"roleId": id, "scopesAdded": roleScopesAdded(current, existing.Scopes, in.Scopes)}); err != nil {
				return nil, err
			}
		}
		role := &store.Role{RoleID: id, Scopes: in.Scopes, Description: in.Description, Created: existing.Created, LastModified: now}
		if err := h.validateWith(c.Context(), role); err != nil {
			return nil, err
		}
		return role, nil
	}, audit)
	h.rolesChanged()
	if err != nil {
		return nil, err
	}
	h.Logger.Info("role updated", "roleId", id, "scopes", len(in.Scopes))
	return h.replyRole(c.Context(), role)
}

// currentExpander builds an expander from the roles as they are now in
// the store (inside a role transaction, where the cached one may lag).
func (h *handlers) currentExpander(ctx context.Context) (*auth.Expander, error) {
	roles, err := h.Store.ListRoles(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing roles: %w", err)
	}
	set := make([]auth.Role, 0, len(roles))
	for _, r := range roles {
		set = append(set, auth.Role{RoleID: r.RoleID, Scopes: r.Scopes})
	}
	e, err := auth.NewExpander(set)
	if err != nil {
		return nil, fmt.Errorf("building role expansion: %w", err)
	}
	return e, nil
}

// roleScopesAdded returns the new scopes of a role that its former scopes,
// role-expanded, do not already satisfy: updateRole asks the caller to
// hold only those.
func roleScopesAdded(e *auth.Expander, former, requested []string) []string {
	have := e.Expand(former)
	added := []string{}
	for _, s := range requested {
		if !auth.SetSatisfies(have, s) {
			added = append(added, s)
		}
	}
	return added
}

func (h *handlers) deleteRole(c *api.Call) (any, error) {
	id, err := param(c, "roleId", roleIDPattern)
	if err != nil {
		return nil, err
	}
	audit, err := h.audit(c, auditDeleted)
	if err != nil {
		return nil, err
	}
	err = h.Store.DeleteRole(c.Context(), id, audit)
	h.rolesChanged()
	if err != nil {
		return nil, fmt.Errorf("deleting role %s: %w", id, err)
	}
	h.Logger.Info("role deleted", "roleId", id)
	return noContent(), nil
}

// rolesChanged tells a caching expander source that this process changed
// the roles, so the very next request sees them.
func (h *handlers) rolesChanged() {
	if inv, ok := h.Roles.(interface{ Invalidate() }); ok {
		inv.Invalidate()
	}
}
