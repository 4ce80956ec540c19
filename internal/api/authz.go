package api

import (
	"errors"
	"fmt"
	"sync"

	"github.com/hopper-ci/hopper/internal/auth"
)

// HawkAuthorizer enforces scope expressions on Hawk-authenticated (or
// anonymous) callers. Authentication is lazy and happens at most once per
// call, so endpoints without a scope requirement ignore credentials.
type HawkAuthorizer struct {
	Authenticator *auth.Authenticator

	templates sync.Map // template text → *auth.Template
}

func (h *HawkAuthorizer) template(text string) (*auth.Template, error) {
	if t, ok := h.templates.Load(text); ok {
		return t.(*auth.Template), nil
	}
	t, err := auth.ParseTemplate([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("parsing scope template %s: %w", text, err)
	}
	h.templates.Store(text, t)
	return t, nil
}

// session returns the call's lazy authentication.
func (h *HawkAuthorizer) session(c *Call) *auth.Session {
	if s, ok := c.Auth.(*auth.Session); ok {
		return s
	}
	s := h.Authenticator.Session(auth.RequestFromHTTP(c.R, c.Body))
	c.Auth = s
	return s
}

// Authorize implements Authorizer.
func (h *HawkAuthorizer) Authorize(c *Call, template string, params map[string]any) error {
	t, err := h.template(template)
	if err != nil {
		return err
	}
	return AuthError(h.session(c).AuthorizeTemplate(c.Context(), t, params))
}

// Preauthenticate implements Preauthenticator: the call's credentials are
// checked before its body is read, all but the payload hash, which the
// call's session checks against the body later.
func (h *HawkAuthorizer) Preauthenticate(c *Call) error {
	req := auth.RequestFromHTTP(c.R, nil)
	req.IgnorePayloadHash = true
	_, err := h.Authenticator.Authenticate(c.Context(), req)
	return AuthError(err)
}

// Caller authenticates the call (if not done yet) and returns who called.
func (h *HawkAuthorizer) Caller(c *Call) (*auth.Result, error) {
	res, err := h.session(c).Result(c.Context())
	return res, AuthError(err)
}

// AuthError maps the auth package's failures onto API errors.
func AuthError(err error) error {
	if err == nil {
		return nil
	}
	var authErr *auth.AuthenticationError
	if errors.As(err, &authErr) {
		return &Error{Code: CodeAuthenticationFailed, Message: authErr.Message}
	}
	var scopeErr *auth.InsufficientScopesError
	if errors.As(err, &scopeErr) {
		return &Error{Code: CodeInsufficientScopes, Message: scopeErr.Error()}
	}
	return err
}

// CallerIdentity is implemented by authorizers that can say who called.
type CallerIdentity interface {
	Caller(c *Call) (*auth.Result, error)
}

// CallerClientID returns the authenticated clientId, or "" if unknown.
func (c *Call) CallerClientID() string {
	if ci, ok := c.srv.authz.(CallerIdentity); ok {
		if res, err := ci.Caller(c); err == nil && res != nil {
			return res.ClientID
		}
	}
	return ""
}

// Caller returns the authenticated caller of a call.
func (c *Call) Caller() (*auth.Result, error) {
	ci, ok := c.srv.authz.(CallerIdentity)
	if !ok {
		return nil, errors.New("the authorizer cannot identify callers")
	}
	return ci.Caller(c)
}
