package auth

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

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
	// HasCredentials is false for anonymous requests.
	HasCredentials bool
	// Scheme is how the request authenticated.
	Scheme Scheme
	// Hash is the payload hash attribute of a Hawk header, if one was sent.
	Hash string
}

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
	return &Result{ClientID: c.clientID, Scopes: c.scopes, Expires: c.expires, HasCredentials: true, Scheme: s}
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

// decodeExt decodes the ext attribute of a request by id, if any, and
// returns the clientId whose token signs (the certificate's issuer for
// named temporary credentials, else id) with the decoded object (nil if
// ext is absent or not an object).
func decodeExt(id, ext string) (issuing string, extObj map[string]any, err error) {
	if ext == "" {
		return id, nil, nil
	}
	parsed, err := parseExt(ext)
	if err != nil {
		return "", nil, err
	}
	extObj, _ = parsed.(map[string]any)
	if cert, ok := extObj["certificate"].(map[string]any); ok && truthy(cert["issuer"]) {
		issuer, ok := cert["issuer"].(string)
		if !ok {
			return "", nil, authFail("ext.certificate.issuer must be a string")
		}
		if issuer == id {
			return "", nil, authFail("ext.certificate.issuer must differ from the supplied clientId")
		}
		return issuer, extObj, nil
	}
	return id, extObj, nil
}

// withAnonymous returns a copy of scopes plus the anonymous role's scope
// (a copy, so a caller's backing array is never written).
func withAnonymous(scopes []string) []string {
	return append(slices.Clip(scopes), anonymousScope)
}

// parseExt decodes the ext attribute: base64 (decoded leniently, like
// Node's Buffer) of UTF-8 JSON.
func parseExt(ext string) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(nodeBase64Decode(ext)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, authFail("Failed to parse ext")
	}
	if v == nil {
		// JSON "null" parses, but Taskcluster then dereferences it.
		return nil, authFail("Cannot read properties of null (reading 'certificate')")
	}
	return v, nil
}

// applyExt applies a certificate and authorizedScopes to c.
func (c *loadedCredentials) applyExt(name, issuing string, ext map[string]any, now time.Time, e *Expander) error {
	if raw := ext["certificate"]; truthy(raw) {
		if err := c.applyCertificate(name, issuing, raw, now); err != nil {
			return err
		}
	}
	if raw := ext["authorizedScopes"]; truthy(raw) {
		list, ok := raw.([]any)
		if !ok {
			return authFail("ext.authorizedScopes must be an array")
		}
		authorized, ok := scopeList(list)
		if !ok {
			return authFail("ext.authorizedScopes must be an array of valid scopes")
		}
		have := e.Expand(withAnonymous(c.scopes))
		if !AllOfScopes(authorized...).SatisfiedBy(have) {
			return authFail("Supplied credentials do not satisfy authorizedScopes; credentials have scopes:\n\n```\n" +
				strings.Join(have, "\n") + "\n```\n\nauthorizedScopes are:\n\n```\n" +
				strings.Join(authorized, "\n") + "\n```")
		}
		c.scopes = authorized
	}
	return nil
}

// applyCertificate validates a temporary-credentials certificate against
// the issuing client (whose expanded scopes are in c.scopes) and, if
// valid, switches c to the derived key, the certificate's scopes and the
// earlier expiry.
func (c *loadedCredentials) applyCertificate(name, issuing string, raw any, now time.Time) error {
	var cert map[string]any
	switch v := raw.(type) {
	case map[string]any:
		cert = v
	case []any:
		// A JSON array is an object in JavaScript, just one without the
		// fields checked next.
		cert = map[string]any{}
	default:
		return authFail("ext.certificate must be a JSON object")
	}
	if v, ok := number(cert["version"]); !ok || v != 1 {
		return authFail("ext.certificate.version must be 1")
	}
	seed, ok := cert["seed"].(string)
	if !ok {
		return authFail("ext.certificate.seed must be a string")
	}
	if utf16Len(seed) != 44 {
		return authFail("ext.certificate.seed must be 44 characters")
	}
	start, ok := number(cert["start"])
	if !ok {
		return authFail("ext.certificate.start must be a number")
	}
	expiry, ok := number(cert["expiry"])
	if !ok {
		return authFail("ext.certificate.expiry must be a number")
	}
	list, ok := cert["scopes"].([]any)
	if !ok {
		return authFail("ext.certificate.scopes must be an array")
	}
	scopes, ok := scopeList(list)
	if !ok {
		return authFail("ext.certificate.scopes must be an array of valid scopes")
	}
	if err := checkCertificateTimes(start, expiry, now); err != nil {
		return err
	}
	if expiry-start > float64(MaxTemporaryCredentialsSpan.Milliseconds()) {
		return authFail("ext.certificate cannot last longer than 31 days!")
	}
	if issuing != name {
		createScope := "auth:create-client:" + name
		if !SetSatisfies(c.scopes, createScope) {
			return authFail("ext.certificate issuer `" + issuing + "` doesn't have `" + createScope + "` for supplied clientId.")
		}
	} else if _, has := cert["clientId"]; has {
		return authFail("ext.certificate.clientId must only be used with ext.certificate.issuer")
	}
	if !AllOfScopes(scopes...).SatisfiedBy(c.scopes) {
		return authFail("ext.certificate issuer `" + issuing + "` doesn't satisfy all certificate scopes " +
			strings.Join(scopes, ", ") + ".  The temporary credentials were not generated correctly.")
	}

	// An issuer that is truthy was checked to be a string above.
	issuer, _ := cert["issuer"].(string)
	sigName := ""
	if issuer != "" {
		sigName = name
	}
	text := SignatureString(sigName, issuer, seed, jsNumberString(start), jsNumberString(expiry), scopes)
	valid := signatureMatches(cert["signature"], CertificateSignature(c.key, text))
	if !valid && len(scopes) == 0 {
		// The JS client signs empty scope lists with a trailing newline
		// after "scopes:"; Taskcluster rejects those, hopper accepts both.
		valid = signatureMatches(cert["signature"], CertificateSignature(c.key, text+"\n"))
	}
	if !valid {
		if issuer != "" {
			return authFail("ext.certificate.signature is not valid, or wrong clientId provided")
		}
		return authFail("ext.certificate.signature is not valid")
	}

	c.key = DeriveAccessToken(c.key, seed)
	if certExpires := jsDate(expiry); certExpires.Before(c.expires) {
		c.expires = certExpires
	}
	c.scopes = scopes
	c.cert, c.certStart, c.certExpiry = true, start, expiry
	return nil
}

// checkCertificateTimes checks a certificate's start and expiry
// (milliseconds since the epoch) against now, with certificateSkew of
// tolerance either way.
func checkCertificateTimes(start, expiry float64, now time.Time) error {
	nowMs := float64(now.UnixMilli())
	skew := float64(certificateSkew.Milliseconds())
	if start > nowMs+skew {
		return authFail("ext.certificate.start > now")
	}
	if expiry < nowMs-skew {
		return authFail("ext.certificate.expiry < now")
	}
	return nil
}

func signatureMatches(sent any, want string) bool {
	s, ok := sent.(string)
	return ok && subtle.ConstantTimeCompare([]byte(s), []byte(want)) == 1
}

// truthy is JavaScript truthiness of a decoded JSON value.
func truthy(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case json.Number:
		f, _ := number(v)
		return f != 0 && !math.IsNaN(f)
	}
	return true
}

// number returns a decoded JSON number as JavaScript sees it (overflowing
// literals become ±Infinity).
func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	if err != nil && !math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// scopeList converts a decoded JSON array to scopes if every member is a
// valid scope string.
func scopeList(list []any) ([]string, bool) {
	out := make([]string, len(list))
	for i, v := range list {
		s, ok := v.(string)
		if !ok || !ValidScope(s) {
			return nil, false
		}
		out[i] = s
	}
	return out, true
}

// utf16Len is the JavaScript length of s.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}

// jsDate converts milliseconds since the epoch to a time, clamping values
// outside what time.Time can represent.
func jsDate(ms float64) time.Time {
	const limit = 8.64e15 // JavaScript's Date range
	switch {
	case math.IsNaN(ms) || ms > limit:
		ms = limit
	case ms < -limit:
		ms = -limit
	}
	return time.UnixMilli(int64(ms))
}

// nodeBase64Decode decodes base64 the way Node's Buffer.from(s, "base64")
// does: both alphabets accepted, other characters skipped, decoding stops
// at the first "=", and a dangling final character is dropped.
func nodeBase64Decode(s string) []byte {
	out := make([]byte, 0, len(s)*3/4)
	var acc uint32
	bits := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		var v byte
		switch {
		case c >= 'A' && c <= 'Z':
			v = c - 'A'
		case c >= 'a' && c <= 'z':
			v = c - 'a' + 26
		case c >= '0' && c <= '9':
			v = c - '0' + 52
		case c == '+' || c == '-':
			v = 62
		case c == '/' || c == '_':
			v = 63
		case c == '=':
			return out
		default:
			if c >= utf8.RuneSelf {
				// Skip the whole multi-byte character.
				_, size := utf8.DecodeRuneInString(s[i:])
				i += size - 1
			}
			continue
		}
		acc = acc<<6 | uint32(v)
		bits += 6
		if bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
		}
	}
	return out
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
