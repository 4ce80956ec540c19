package authapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// retryWindow is how long after creation an identical createClient is
// treated as a retry and answered with the original token (auth spec §4.2).
const retryWindow = 15 * time.Minute

// clientJSON is the get-client-response (plus accessToken for the create
// and reset replies).
type clientJSON struct {
	ClientID           string     `json:"clientId"`
	Description        string     `json:"description"`
	Expires            queue.Time `json:"expires"`
	Created            queue.Time `json:"created"`
	LastModified       queue.Time `json:"lastModified"`
	LastDateUsed       queue.Time `json:"lastDateUsed"`
	LastRotated        queue.Time `json:"lastRotated"`
	DeleteOnExpiration bool       `json:"deleteOnExpiration"`
	Scopes             []string   `json:"scopes"`
	ExpandedScopes     []string   `json:"expandedScopes"`
	Disabled           bool       `json:"disabled"`
	AccessToken        string     `json:"accessToken,omitempty"`
}

func clientReply(c *store.Client, e *auth.Expander) clientJSON {
	return clientJSON{
		ClientID:           c.ClientID,
		Description:        c.Description,
		Expires:            queue.NewTime(c.Expires),
		Created:            queue.NewTime(c.Created),
		LastModified:       queue.NewTime(c.LastModified),
		LastDateUsed:       queue.NewTime(c.LastDateUsed),
		LastRotated:        queue.NewTime(c.LastRotated),
		DeleteOnExpiration: c.DeleteOnExpiration,
		Scopes:             nonNil(c.Scopes),
		// Client replies show the role expansion without the anonymous
		// role, as Taskcluster does.
		ExpandedScopes: nonNil(e.Expand(c.Scopes)),
		Disabled:       c.Disabled,
	}
}

// clientInput is the createClient / updateClient body. Scopes stays nil
// when an update leaves them out.
type clientInput struct {
	Expires            queue.Time `json:"expires"`
	Description        string     `json:"description"`
	Scopes             []string   `json:"scopes"`
	DeleteOnExpiration bool       `json:"deleteOnExpiration"`
}

// mutableClientID returns the clientId parameter of a call that changes a
// client, refusing the configured (static) ones.
func mutableClientID(c *api.Call) (string, error) {
	id, err := param(c, "clientId", clientIDPattern)
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(id, StaticPrefix) {
		return "", inputError("clientId %q starts with %q which is reserved for statically configured clients. "+
			"Contact your administrator to change static clients.", id, StaticPrefix)
	}
	return id, nil
}

func clientNotFound() error { return notFound("Client not found") }

type listClientsReply struct {
	Clients           []clientJSON `json:"clients"`
	ContinuationToken string       `json:"continuationToken,omitempty"`
}

func (h *handlers) listClients(c *api.Call) (any, error) {
	prefix := c.R.URL.Query().Get("prefix")
	if prefix != "" && !clientIDPattern.MatchString(prefix) {
		return nil, &api.Error{Code: api.CodeInvalidRequestArguments,
			Message: fmt.Sprintf("Invalid query-string parameter prefix: %q does not match %s", prefix, clientIDPattern)}
	}
	clients, next, err := h.Store.ListClients(c.Context(), prefix, c.Page())
	if err != nil {
		return nil, err
	}
	e, err := h.expander(c.Context())
	if err != nil {
		return nil, err
	}
	out := listClientsReply{Clients: make([]clientJSON, 0, len(clients)), ContinuationToken: next}
	for i := range clients {
		out.Clients = append(out.Clients, clientReply(&clients[i], e))
	}
	return out, nil
}

func (h *handlers) getClient(c *api.Call) (any, error) {
	id, err := param(c, "clientId", clientIDPattern)
	if err != nil {
		return nil, err
	}
	var cl *store.Client
	if h.IsStatic(id) {
		cl, err = h.staticClient(c.Context(), id)
	} else if cl, err = h.Store.GetClient(c.Context(), id); errors.Is(err, store.ErrNotFound) {
		return nil, clientNotFound()
	}
	if err != nil {
		return nil, err
	}
	return h.replyClient(c.Context(), cl, "")
}

// replyClient answers with a client, its scopes expanded by the current
// roles, and token when the call made one (create and reset only).
func (h *handlers) replyClient(ctx context.Context, cl *store.Client, token string) (any, error) {
	e, err := h.expander(ctx)
	if err != nil {
		return nil, err
	}
	out := clientReply(cl, e)
	out.AccessToken = token
	return out, nil
}

// staticClient describes a configured client. Its token stays in memory
// and out of the reply; its timestamps are the server's start.
func (h *handlers) staticClient(ctx context.Context, id string) (*store.Client, error) {
	sc, err := h.Clients.Client(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("describing static client %s: %w", id, err)
	}
	return &store.Client{
		ClientID:     id,
		Description:  "Static client configured by the operator; it cannot be changed through the API.",
		Scopes:       sc.Scopes,
		Expires:      sc.Expires,
		Created:      h.Started,
		LastModified: h.Started,
		LastDateUsed: h.Started,
		LastRotated:  h.Started,
		Disabled:     sc.Disabled,
	}, nil
}

func (h *handlers) createClient(c *api.Call) (any, error) {
	id, err := mutableClientID(c)
	if err != nil {
		return nil, err
	}
	var in clientInput
	if err := decodeInput(c, &in); err != nil {
		return nil, err
	}
	in.Scopes = nonNil(in.Scopes)
	if err := c.Authorize(c.Route.Scopes, map[string]any{"clientId": id, "scopes": in.Scopes}); err != nil {
		return nil, err
	}
	token, sealed, err := h.newAccessToken(id)
	if err != nil {
		return nil, err
	}
	now := stamp(c)
	audit, err := h.audit(c, auditCreated)
	if err != nil {
		return nil, err
	}
	stored, err := h.Store.CreateClient(c.Context(), &store.Client{
		ClientID:           id,
		Description:        in.Description,
		AccessToken:        sealed,
		Scopes:             in.Scopes,
		Created:            now,
		LastModified:       now,
		LastDateUsed:       now,
		LastRotated:        now,
		Expires:            in.Expires.Time,
		DeleteOnExpiration: in.DeleteOnExpiration,
	}, audit)
	switch {
	case errors.Is(err, store.ErrExists):
		if !isRetryOf(stored, &in, now) {
			return nil, conflict("Client already exists")
		}
		// A retry of a create whose reply was lost: it gets the token the
		// first attempt minted, which is why tokens are sealed rather than
		// hashed.
		if token, err = h.Sealer.Open(stored.AccessToken, id); err != nil {
			return nil, fmt.Errorf("opening the access token of %s: %w", id, err)
		}
	case err != nil:
		return nil, err
	default:
		h.Logger.Info("client created", "clientId", id, "scopes", len(in.Scopes), "expires", in.Expires.String())
	}
	return h.replyClient(c.Context(), stored, token)
}

// isRetryOf reports whether a createClient body repeats the creation of
// existing: same scopes, expiry and description, still enabled, and
// created within the retry window.
func isRetryOf(existing *store.Client, in *clientInput, now time.Time) bool {
	return existing != nil &&
		existing.Description == in.Description &&
		existing.Expires.Equal(in.Expires.Time) &&
		slices.Equal(existing.Scopes, in.Scopes) &&
		!existing.Disabled &&
		!existing.Created.Before(now.Add(-retryWindow))
}

func (h *handlers) updateClient(c *api.Call) (any, error) {
	id, err := mutableClientID(c)
	if err != nil {
		return nil, err
	}
	var in clientInput
	if err := decodeInput(c, &in); err != nil {
		return nil, err
	}
	current, err := h.Store.GetClient(c.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, clientNotFound()
	}
	if err != nil {
		return nil, err
	}
	// Authorize before the transaction, so authentication (which reads
	// clients and roles) never runs while the client row is locked.
	if err := c.Authorize(c.Route.Scopes, map[string]any{"clientId": id, "scopesAdded": scopesAdded(in.Scopes, current.Scopes)}); err != nil {
		return nil, err
	}
	now := stamp(c)
	audit, err := h.audit(c, auditUpdated)
	if err != nil {
		return nil, err
	}
	updated, err := h.Store.UpdateClient(c.Context(), id, func(cl *store.Client) error {
		// The scopes may have changed since the check above; the caller's
		// authentication is cached by now, so re-checking is cheap.
		if err := c.Authorize(c.Route.Scopes, map[string]any{"clientId": id, "scopesAdded": scopesAdded(in.Scopes, cl.Scopes)}); err != nil {
			return err
		}
		cl.Description = in.Description
		cl.Expires = in.Expires.Time
		cl.DeleteOnExpiration = in.DeleteOnExpiration
		cl.LastModified = now
		if in.Scopes != nil {
			cl.Scopes = in.Scopes
		}
		return nil
	}, audit)
	if errors.Is(err, store.ErrNotFound) {
		return nil, clientNotFound()
	}
	if err != nil {
		return nil, err
	}
	h.Logger.Info("client updated", "clientId", id, "scopes", len(updated.Scopes), "expires", in.Expires.String())
	return h.replyClient(c.Context(), updated, "")
}

// scopesAdded returns the requested scopes not literally held already (a
// plain set difference: updateClient asks the caller to satisfy only
// what is new).
func scopesAdded(requested, current []string) []string {
	added := []string{}
	for _, s := range requested {
		if !slices.Contains(current, s) {
			added = append(added, s)
		}
	}
	return added
}

func (h *handlers) resetAccessToken(c *api.Call) (any, error) {
	id, err := mutableClientID(c)
	if err != nil {
		return nil, err
	}
	token, sealed, err := h.newAccessToken(id)
	if err != nil {
		return nil, err
	}
	now := stamp(c)
	updated, err := h.modifyClient(c, id, auditTokenReset, func(cl *store.Client) {
		cl.AccessToken = sealed
		cl.LastRotated = now
	})
	if err != nil {
		return nil, err
	}
	h.Logger.Info("client access token reset", "clientId", id)
	return h.replyClient(c.Context(), updated, token)
}

func (h *handlers) enableClient(c *api.Call) (any, error) { return h.setDisabled(c, false) }

func (h *handlers) disableClient(c *api.Call) (any, error) { return h.setDisabled(c, true) }

// setDisabled enables or disables a client; doing it twice is harmless.
func (h *handlers) setDisabled(c *api.Call, disabled bool) (any, error) {
	id, err := mutableClientID(c)
	if err != nil {
		return nil, err
	}
	action := auditEnabled
	if disabled {
		action = auditDisabled
	}
	updated, err := h.modifyClient(c, id, action, func(cl *store.Client) { cl.Disabled = disabled })
	if err != nil {
		return nil, err
	}
	h.Logger.Info("client access changed", "clientId", id, "disabled", disabled)
	return h.replyClient(c.Context(), updated, "")
}

// modifyClient applies fn to a stored client, answering 404 if it does
// not exist, and records the change in the audit log as action.
func (h *handlers) modifyClient(c *api.Call, id, action string, fn func(*store.Client)) (*store.Client, error) {
	audit, err := h.audit(c, action)
	if err != nil {
		return nil, err
	}
	updated, err := h.Store.UpdateClient(c.Context(), id, func(cl *store.Client) error {
		fn(cl)
		return nil
	}, audit)
	if errors.Is(err, store.ErrNotFound) {
		return nil, clientNotFound()
	}
	return updated, err
}

func (h *handlers) deleteClient(c *api.Call) (any, error) {
	id, err := mutableClientID(c)
	if err != nil {
		return nil, err
	}
	audit, err := h.audit(c, auditDeleted)
	if err != nil {
		return nil, err
	}
	if err := h.Store.DeleteClient(c.Context(), id, audit); err != nil {
		return nil, fmt.Errorf("deleting client %s: %w", id, err)
	}
	h.Logger.Info("client deleted", "clientId", id)
	return noContent(), nil
}

// newAccessToken makes a fresh access token for a client, in the clear for
// the one reply that shows it and sealed to the client's id for the store.
func (h *handlers) newAccessToken(clientID string) (token, sealed string, err error) {
	token, err = auth.NewAccessToken()
	if err != nil {
		return "", "", fmt.Errorf("making an access token for %s: %w", clientID, err)
	}
	sealed, err = h.Sealer.Seal(token, clientID)
	if err != nil {
		return "", "", fmt.Errorf("sealing the access token of %s: %w", clientID, err)
	}
	return token, sealed, nil
}
