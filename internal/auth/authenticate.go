package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/hawk"
)

// AnonymousRole is the role every request implicitly assumes.
const AnonymousRole = "anonymous"

// anonymousScope is the scope that reaches AnonymousRole.
const anonymousScope = assumePrefix + AnonymousRole

// anonymousLifetime is the expiry Taskcluster reports for requests without
// credentials.
const anonymousLifetime = 15 * time.Minute

// Client is a permanent client as authentication needs it.
type Client struct {
	ClientID string
	// AccessToken is the plaintext token (the Hawk key).
	AccessToken string
	// Scopes are the client's scopes as stored, before role expansion.
	Scopes   []string
	Disabled bool
	Expires  time.Time
}

// ErrClientNotFound is returned by a ClientLookup for unknown clientIds.
var ErrClientNotFound = errors.New("client not found")

// ClientLookup finds permanent clients (static ones included).
type ClientLookup interface {
	// Client returns the client, or an error wrapping ErrClientNotFound.
	// Any other error is treated as an internal failure, not as an
	// authentication failure.
	Client(ctx context.Context, clientID string) (Client, error)
}

// ExpanderSource provides the role expander for the current role set.
// Roles change at runtime, so the Authenticator asks on every
// authentication.
type ExpanderSource interface {
	Expander(ctx context.Context) (*Expander, error)
}

// StaticExpander is an ExpanderSource for a fixed role set. A nil E
// expands nothing (scopes are only normalized), as testAuthenticate needs.
type StaticExpander struct{ E *Expander }

// Expander returns s.E.
func (s StaticExpander) Expander(context.Context) (*Expander, error) { return s.E, nil }

// Request holds what authentication needs from an HTTP request.
type Request struct {
	// Method is the HTTP method.
	Method string
	// RequestURI is the raw request-target (http.Request.RequestURI).
	RequestURI string
	// Host and Port are what the client addressed (see hawk.HostPort).
	Host string
	Port int
	// Authorization is the Authorization header, empty if absent.
	Authorization string
	// ContentType is the Content-Type header, empty if absent.
	ContentType string
	// Body is the raw request body, checked against a Hawk payload hash.
	Body []byte
	// IgnorePayloadHash skips the payload hash check (the hash is still
	// covered by the MAC and reported in Result.Hash); authenticateHawk
	// needs this because it validates a request it has not received.
	IgnorePayloadHash bool

	// hostErr records a malformed Host header; it only matters if the
	// request carries credentials.
	hostErr error
}

// RequestFromHTTP builds a Request from r and its already-read body.
func RequestFromHTTP(r *http.Request, body []byte) Request {
	host, port, err := hawk.HostPort(r)
	return Request{
		Method:        r.Method,
		RequestURI:    r.RequestURI,
		Host:          host,
		Port:          port,
		Authorization: r.Header.Get("Authorization"),
		ContentType:   r.Header.Get("Content-Type"),
		Body:          body,
		hostErr:       err,
	}
}

// Scheme names how a request authenticated.
type Scheme string

// Authentication schemes.
const (
	SchemeNone  Scheme = "none"
	SchemeHawk  Scheme = "hawk"
	SchemeBewit Scheme = "bewit"
)

// AuthenticationError is an authentication failure (HTTP 401, code
// AuthenticationFailed, header "WWW-Authenticate: hawk"). Error returns
// Taskcluster's message.
type AuthenticationError struct {
	Message string
}

// Error returns the Taskcluster message.
func (e *AuthenticationError) Error() string { return e.Message }

func authFail(msg string) error { return &AuthenticationError{Message: msg} }

// MsgTwoSchemes is the failure of a request with both an Authorization
// header and a bewit.
const MsgTwoSchemes = "Cannot use two authentication schemes at once this request has both bewit in querystring and 'authorization' header"

// AuthenticatorOptions configure an Authenticator.
type AuthenticatorOptions struct {
	// Clients looks up permanent clients.
	Clients ClientLookup
	// Roles provides the current role expander.
	Roles ExpanderSource
	// NowFunc returns the current time; nil means time.Now.
	NowFunc func() time.Time
}

// Authenticator authenticates requests: Hawk headers, bewits, temporary
// credentials, authorizedScopes and the anonymous role, with Taskcluster's
// checks in Taskcluster's order. It is safe for concurrent use.
type Authenticator struct {
	clients ClientLookup
	roles   ExpanderSource
	now     func() time.Time
	parser  *hawk.Parser
	// verified caches resolved credentials (see credentialCache).
	verified *credentialCache
}

// NewAuthenticator returns an Authenticator.
func NewAuthenticator(opts AuthenticatorOptions) *Authenticator {
	now := opts.NowFunc
	if now == nil {
		now = time.Now
	}
	return &Authenticator{clients: opts.Clients, roles: opts.Roles, now: now, parser: hawk.NewParser(), verified: newCredentialCache()}
}

// Authenticate authenticates req. It returns a Result, an
// *AuthenticationError (401), or another error for internal failures
// (client or role storage unavailable). Requests without credentials are
// not failures: they get the anonymous role's scopes.
func (a *Authenticator) Authenticate(ctx context.Context, req Request) (*Result, error) {
	now := a.now()
	expander, err := a.roles.Expander(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading roles: %w", err)
	}
	hasHeader := req.Authorization != ""
	hasBewitParam := bewitParam(req.RequestURI)
	switch {
	case hasHeader && hasBewitParam:
		return nil, authFail(MsgTwoSchemes)
	case !hasHeader && !hasBewitParam:
		return anonymous(expander, now), nil
	case req.hostErr != nil:
		return nil, authFail(req.hostErr.Error())
	}
	hreq := hawk.Request{Method: req.Method, Resource: req.RequestURI, Host: req.Host, Port: req.Port}

	if hasHeader {
		h, err := a.parser.ParseHeader(req.Authorization)
		if err != nil {
			return nil, authFail(err.Error())
		}
		creds, err := a.loadCredentials(ctx, h.ID, h.Ext, now, expander)
		if err != nil {
			return nil, err
		}
		if err := h.Verify(creds.key, hreq, now); err != nil {
			return nil, authFail(err.Error())
		}
		a.remember(h.ID, h.Ext, creds)
		// Only a signed hash is checked; clients that send none (the JS
		// and Go clients) are not required to.
		if h.Hash != "" && !req.IgnorePayloadHash {
			if err := hawk.VerifyPayloadHash(h.Hash, req.ContentType, req.Body); err != nil {
				return nil, authFail(err.Error())
			}
		}
		res := creds.result(SchemeHawk)
		res.Hash = h.Hash
		return res, nil
	}

	// Taskcluster decides on bewit mode by matching the raw target, so a
	// bewit parameter it cannot see that way (for example with an encoded
	// name) leaves the request anonymous.
	if !a.parser.HasBewit(req.RequestURI) {
		return anonymous(expander, now), nil
	}
	b, err := a.parser.ParseBewit(hreq)
	if err != nil {
		return nil, authFail(err.Error())
	}
	creds, err := a.loadCredentials(ctx, b.ID, b.Ext, now, expander)
	if err != nil {
		return nil, err
	}
	if err := b.Verify(creds.key, now); err != nil {
		return nil, authFail(err.Error())
	}
	a.remember(b.ID, b.Ext, creds)
	return creds.result(SchemeBewit), nil
}

func anonymous(e *Expander, now time.Time) *Result {
	return &Result{
		Scopes:  e.Expand([]string{anonymousScope}),
		Expires: now.Add(anonymousLifetime),
		Scheme:  SchemeNone,
	}
}

// bewitParam reports whether the query string has a non-empty bewit
// parameter (or several), which is how Taskcluster detects that a bewit
// was sent at all.
func bewitParam(requestURI string) bool {
	_, query, ok := strings.Cut(requestURI, "?")
	if !ok || !strings.Contains(query, "bewit") {
		return false
	}
	// ParseQuery keeps the well-formed pairs when it reports an error.
	values, _ := url.ParseQuery(query)
	v := values["bewit"]
	return len(v) > 1 || len(v) == 1 && v[0] != ""
}

type loadedCredentials struct {
	clientID string
	issuer   string
	key      string
	scopes   []string
	expires  time.Time

	// cert is set when a certificate applied; certStart and certExpiry
	// are then its bounds in milliseconds.
	cert                  bool
	certStart, certExpiry float64
	// fresh is the cache entry of credentials resolved from scratch, to
	// be remembered once the request's MAC verified.
	fresh *cachedCredentials
}

// remember caches credentials that were resolved from scratch and have
// just verified a request's MAC.
func (a *Authenticator) remember(id, ext string, c *loadedCredentials) {
	if c.fresh != nil {
		a.verified.put(id, ext, c.fresh)
	}
}

func (c *loadedCredentials) result(s Scheme) *Result {
	return &Result{ClientID: c.clientID, Issuer: c.issuer, Scopes: c.scopes, Expires: c.expires, HasCredentials: true, Scheme: s}
}

// loadCredentials resolves the Hawk id and ext of a request into the key
// to verify the MAC with and the resulting scopes (Taskcluster's
// credentials function). Every check here precedes the MAC check.
//
// A resolution cached for the same id and ext is reused when the issuing
// client and the roles are as they were (see credentialCache); it skips
// only work whose outcome is then known, so the same failures come out in
// the same order.
func (a *Authenticator) loadCredentials(ctx context.Context, id, ext string, now time.Time, e *Expander) (*loadedCredentials, error) {
	cached := a.verified.get(id, ext)
	issuing := id
	var extObj map[string]any
	if cached != nil {
		// Decoding the ext depends on nothing else, and it succeeded.
		issuing = cached.issuing
	} else {
		var err error
		if issuing, extObj, err = decodeExt(id, ext); err != nil {
			return nil, err
		}
	}

	client, err := a.clients.Client(ctx, issuing)
	switch {
	case errors.Is(err, ErrClientNotFound):
		return nil, authFail("Client with clientId '" + issuing + "' not found")
	case err != nil:
		return nil, fmt.Errorf("loading client %s: %w", issuing, err)
	case client.Disabled:
		return nil, authFail("Client with clientId '" + issuing + "' is disabled")
	case client.Expires.Before(now):
		return nil, authFail("Client with clientId: '" + issuing + "' has expired")
	}
	if cached != nil {
		if cached.validFor(client, e) {
			return cached.credentials(id, client, now)
		}
		// The issuer's token or scopes, or the roles, changed: resolve
		// afresh.
		if _, extObj, err = decodeExt(id, ext); err != nil {
			return nil, err
		}
	}
	c := &loadedCredentials{
		clientID: id,
		issuer:   issuing,
		key:      client.AccessToken,
		scopes:   e.Expand(client.Scopes),
		expires:  client.Expires,
	}
	if extObj != nil {
		if err := c.applyExt(id, issuing, extObj, now, e); err != nil {
			return nil, err
		}
	}
	// The anonymous role is granted last, so a restriction can never take
	// away what everyone has.
	c.scopes = e.Expand(withAnonymous(c.scopes))
	c.fresh = &cachedCredentials{
		issuing:      issuing,
		issuerToken:  client.AccessToken,
		issuerScopes: slices.Clone(client.Scopes),
		expander:     e,
		key:          c.key,
		scopes:       slices.Clone(c.scopes),
		hasCert:      c.cert,
		certStart:    c.certStart,
		certExpiry:   c.certExpiry,
		certExpires:  jsDate(c.certExpiry),
	}
	return c, nil
}
