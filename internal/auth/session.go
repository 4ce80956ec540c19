package auth

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Result is a successful authentication.
type Result struct {
	// ClientID is the credential name (the temporary name for named
	// temporary credentials); empty for anonymous requests.
	ClientID string
	// Scopes are the final scopes: role-expanded, normalized, including
	// what the anonymous role grants.
	Scopes []string
	// Expires is when the credentials expire (the earlier of the client's
	// and the certificate's expiry); now+15min for anonymous requests.
	Expires time.Time
	// Issuer is the client whose access token signed the request: the
	// certificate's issuer for temporary credentials, ClientID itself for
	// a permanent client, empty for anonymous requests. It tells
	// credentials the queue issued for a run from others that merely carry
	// a run's name.
	Issuer string
	// HasCredentials is false for anonymous requests.
	HasCredentials bool
	// Scheme is how the request authenticated.
	Scheme Scheme
	// Hash is the payload hash attribute of a Hawk header, if one was sent.
	Hash string
}

// Session authenticates one request lazily: only when a scope check (or
// an explicit Result call) needs it, and at most once. Endpoints without
// a scope requirement therefore ignore even invalid credentials. A
// Session is safe for concurrent use.
type Session struct {
	a    *Authenticator
	req  Request
	once sync.Once
	res  *Result
	err  error
	// known holds the clientId once authentication succeeded, for logs
	// that must not trigger authentication themselves.
	known atomic.Pointer[string]
}

// KnownClientID returns the clientId if the request has already been
// authenticated successfully, and "" otherwise; it never authenticates.
func (s *Session) KnownClientID() string {
	if p := s.known.Load(); p != nil {
		return *p
	}
	return ""
}

// Session returns a lazy authentication of req.
func (a *Authenticator) Session(req Request) *Session {
	return &Session{a: a, req: req}
}

// Result authenticates the request on first use and returns the outcome.
func (s *Session) Result(ctx context.Context) (*Result, error) {
	s.once.Do(func() {
		s.res, s.err = s.a.Authenticate(ctx, s.req)
		if s.err == nil && s.res != nil {
			id := s.res.ClientID
			s.known.Store(&id)
		}
	})
	return s.res, s.err
}

// Authorize authenticates the request and checks that it satisfies
// required. It returns nil, an *AuthenticationError (401), an
// *InsufficientScopesError (403), or an internal error.
func (s *Session) Authorize(ctx context.Context, required Expr) error {
	res, err := s.Result(ctx)
	if err != nil {
		return err
	}
	return res.Authorize(required)
}

// AuthorizeTemplate renders t with params and checks the result like
// Authorize. A template that renders to nothing makes the call public: it
// succeeds without authenticating. Rendering errors (parameters of the
// wrong type) are returned as internal errors.
func (s *Session) AuthorizeTemplate(ctx context.Context, t *Template, params map[string]any) error {
	required, ok, err := t.Render(params)
	if err != nil {
		return fmt.Errorf("rendering scope expression: %w", err)
	}
	if !ok {
		return nil
	}
	return s.Authorize(ctx, required)
}

// Authorize checks that the result's scopes satisfy required, returning
// an *InsufficientScopesError if not.
func (r *Result) Authorize(required Expr) error {
	missing, lacking := required.Missing(r.Scopes)
	if !lacking {
		return nil
	}
	return &InsufficientScopesError{ClientID: r.ClientID, HasCredentials: r.HasCredentials, Required: required, Missing: missing}
}
