package authapi

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/queue"
)

type scopeSet struct {
	Scopes []string `json:"scopes"`
}

func (h *handlers) expandScopes(c *api.Call) (any, error) {
	var in scopeSet
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	e, err := h.expander(c.Context())
	if err != nil {
		return nil, err
	}
	// No anonymous role here: this expands exactly what was given.
	return scopeSet{Scopes: nonNil(e.Expand(in.Scopes))}, nil
}

func (h *handlers) currentScopes(c *api.Call) (any, error) {
	res, err := h.Caller(c)
	if err != nil {
		return nil, err
	}
	return scopeSet{Scopes: nonNil(res.Scopes)}, nil
}

// Fixed identity of the authentication test endpoints: a client that
// exists only for them, with a well-known token.
const (
	testerClientID    = "tester"
	testerAccessToken = "no-secret"
)

// testerGetScopes and testerGetRequired are testAuthenticateGet's fixed
// client scopes and requirement.
var (
	testerGetScopes   = []string{"test:*", "auth:create-client:test:*"}
	testerGetRequired = []string{"test:authenticate-get"}
)

// testerClients is a ClientLookup knowing only the tester client, with the
// scopes of one request.
type testerClients struct{ scopes []string }

// Client implements auth.ClientLookup.
func (t testerClients) Client(_ context.Context, clientID string) (auth.Client, error) {
	if clientID != testerClientID {
		return auth.Client{}, auth.ErrClientNotFound
	}
	return auth.Client{
		ClientID:    testerClientID,
		AccessToken: testerAccessToken,
		Scopes:      t.scopes,
		Expires:     time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC),
	}, nil
}

type testAuthenticateInput struct {
	ClientScopes   []string `json:"clientScopes"`
	RequiredScopes []string `json:"requiredScopes"`
}

type testAuthenticateReply struct {
	ClientID string   `json:"clientId"`
	Scopes   []string `json:"scopes"`
}

func (h *handlers) testAuthenticate(c *api.Call) (any, error) {
	var in testAuthenticateInput
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	return h.authenticateAsTester(c, in.ClientScopes, in.RequiredScopes)
}

func (h *handlers) testAuthenticateGet(c *api.Call) (any, error) {
	return h.authenticateAsTester(c, testerGetScopes, testerGetRequired)
}

// authenticateAsTester authenticates the call as if the tester client
// existed with clientScopes (certificates and authorizedScopes included,
// no roles) and requires every scope of required.
func (h *handlers) authenticateAsTester(c *api.Call, clientScopes, required []string) (any, error) {
	a := auth.NewAuthenticator(auth.AuthenticatorOptions{
		Clients: testerClients{scopes: clientScopes},
		// A nil expander only normalizes: the tester's scopes are taken
		// literally.
		Roles:   auth.StaticExpander{},
		NowFunc: func() time.Time { return c.Now },
	})
	res, err := a.Authenticate(c.Context(), auth.RequestFromHTTP(c.R, c.Body))
	if err != nil {
		return nil, authFailure(err)
	}
	if err := res.Authorize(auth.AllOfScopes(required...)); err != nil {
		return nil, authFailure(err)
	}
	clientID := res.ClientID
	if !res.HasCredentials {
		// What Taskcluster reports for a request without credentials.
		clientID = "auth-failed:no-auth"
	}
	return testAuthenticateReply{ClientID: clientID, Scopes: nonNil(res.Scopes)}, nil
}

type authenticateHawkInput struct {
	Method        string `json:"method"`
	Resource      string `json:"resource"`
	Host          string `json:"host"`
	Port          int    `json:"port"`
	Authorization string `json:"authorization"`
}

// authenticateHawkReply is one of the three authenticate-hawk-response
// shapes, told apart by Status.
type authenticateHawkReply struct {
	Status   string      `json:"status"`
	Scheme   string      `json:"scheme,omitempty"`
	Scopes   []string    `json:"scopes,omitempty"`
	ClientID string      `json:"clientId,omitempty"`
	Expires  *queue.Time `json:"expires,omitempty"`
	Hash     string      `json:"hash,omitempty"`
	Message  string      `json:"message,omitempty"`
}

// authenticateHawk validates a request another service received. The
// answer is always 200; failures are reported in the body.
func (h *handlers) authenticateHawk(c *api.Call) (any, error) {
	var in authenticateHawkInput
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	res, err := h.Authenticator.Authenticate(c.Context(), auth.Request{
		Method:        strings.ToUpper(in.Method),
		RequestURI:    in.Resource,
		Host:          in.Host,
		Port:          in.Port,
		Authorization: in.Authorization,
		// The body stayed with the other service; a signed hash is
		// reported for it to compare.
		IgnorePayloadHash: true,
	})
	var authErr *auth.AuthenticationError
	switch {
	case errors.As(err, &authErr):
		return authenticateHawkReply{Status: "auth-failed", Message: authErr.Message}, nil
	case err != nil:
		return nil, err
	}
	expires := queue.NewTime(res.Expires)
	if !res.HasCredentials {
		return authenticateHawkReply{Status: "no-auth", Scheme: "none", Scopes: nonNil(res.Scopes), Expires: &expires}, nil
	}
	// Bewits are reported as hawk too, as Taskcluster does.
	return authenticateHawkReply{Status: "auth-success", Scheme: "hawk", Scopes: nonNil(res.Scopes),
		ClientID: res.ClientID, Expires: &expires, Hash: res.Hash}, nil
}
