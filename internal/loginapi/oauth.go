package loginapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/login"
	"github.com/hopper-ci/hopper/internal/store"
)

// Taskcluster's third-party OAuth2 flow (its web-server's oauth2.js): a
// registered website sends a person to /login/oauth/authorize, the person
// consents in the console (#/third-party), the website trades the code at
// /login/oauth/token for an access token, and the token at
// /login/oauth/credentials for temporary Taskcluster credentials no wider
// than the person's scopes and the registration's.

// authorizeQuery is RFC 6749 §4.1.1's request with RFC 7636's PKCE;
// nonce and prompt are OpenID's, which sites' libraries send along.
var authorizeQuery = []string{"response_type", "client_id", "redirect_uri", "scope", "state", "expires",
	"code_challenge", "code_challenge_method", "nonce", "prompt"}

func (s *Server) oauthRoutes() []api.Route {
	return []api.Route{
		{Name: "oauthAuthorize", Method: http.MethodGet, Paths: []string{BasePath + "/oauth/authorize"}, Query: authorizeQuery, Handle: s.authorize},
		{Name: "oauthDecision", Method: http.MethodPost, Paths: []string{BasePath + "/oauth/decision"}, Input: "login-oauth-decision-request", Handle: s.decision},
		{Name: "oauthToken", Method: http.MethodPost, Paths: []string{BasePath + "/oauth/token"}, Handle: s.token,
			BodyLimits: &api.BodyLimits{MaxBytes: 16 << 10, MaxValues: 64, MaxDepth: 1}},
		{Name: "oauthCredentials", Method: http.MethodGet, Paths: []string{BasePath + "/oauth/credentials"}, Handle: s.oauthCredentials},
	}
}

// grantRequest is a website's request, from the authorize URL or the
// console's decision.
type grantRequest struct {
	ClientID, RedirectURI, ResponseType, State, Expires string
	Scopes                                              []string
	Challenge, ChallengeMethod                          string
}

// check refuses a request: first (page != nil) what cannot be sent back
// to the site (an unknown site, a callback not registered: the browser
// never goes there), then what goes back to its callback as RFC 6749
// §4.1.2.1 says (errCode).
func (s *Server) check(q grantRequest) (reg *login.Registration, refused *refusal, errCode, detail string) {
	reg, ok := s.d.Config.Registration(q.ClientID)
	if !ok {
		return nil, &refusal{http.StatusBadRequest, "Unknown website", "No website of that client_id is registered with this deployment."}, "", ""
	}
	if q.RedirectURI == "" || !reg.AllowsRedirect(q.RedirectURI) {
		return nil, &refusal{http.StatusBadRequest, "Unknown redirect URI",
			"The website asked to send you to an address that is not registered for it; nothing was granted."}, "", ""
	}
	if q.ResponseType != "code" {
		return reg, nil, "unsupported_response_type", "only response_type=code is supported"
	}
	if q.ChallengeMethod != "" && q.ChallengeMethod != "S256" || q.ChallengeMethod == "S256" && q.Challenge == "" {
		return reg, nil, "invalid_request", "code_challenge_method must be S256, with a code_challenge"
	}
	if err := reg.CheckScopes(q.Scopes); err != nil {
		return reg, nil, "invalid_scope", err.Error()
	}
	return reg, nil, "", ""
}

// authorize starts a website's request: an unknown site or callback gets
// a page (never a redirect), a bad request goes back to the site with its
// error, and a good one goes to the console's consent page (or, for a
// whitelisted site asking for its registered scopes from a signed-in
// person, straight back with a code).
func (s *Server) authorize(c *api.Call) (any, error) {
	v := c.R.URL.Query()
	q := grantRequest{ClientID: v.Get("client_id"), RedirectURI: v.Get("redirect_uri"), ResponseType: v.Get("response_type"),
		State: v.Get("state"), Expires: v.Get("expires"), Scopes: strings.Fields(v.Get("scope")),
		Challenge: v.Get("code_challenge"), ChallengeMethod: v.Get("code_challenge_method")}
	reg, refused, errCode, detail := s.check(q)
	if refused != nil {
		return page(refused.status, refused.title, refused.detail), nil
	}
	if errCode != "" {
		return redirect(withQuery(q.RedirectURI, url.Values{"error": {errCode}, "error_description": {detail}, "state": {q.State}})), nil
	}
	if reg.SkipsConsent(q.Scopes) {
		if sess, err := s.session(c); err == nil {
			to, err := s.grant(c, sess, reg, q)
			if err != nil {
				return nil, err
			}
			return redirect(to), nil
		}
	}
	consent := url.Values{"client_id": {q.ClientID}, "redirect_uri": {q.RedirectURI}, "scope": {strings.Join(q.Scopes, " ")},
		"expires": {reg.GrantLifetime(q.Expires).String()}}
	for k, val := range map[string]string{"state": q.State, "code_challenge": q.Challenge, "code_challenge_method": q.ChallengeMethod, "description": reg.Description} {
		if val != "" {
			consent.Set(k, val)
		}
	}
	return redirect("/ui/#/third-party?" + consent.Encode()), nil
}

type decisionRequest struct {
	ClientID            string   `json:"clientId"`
	RedirectURI         string   `json:"redirectUri"`
	Scope               []string `json:"scope"`
	State               string   `json:"state"`
	Expires             string   `json:"expires"`
	CodeChallenge       string   `json:"codeChallenge"`
	CodeChallengeMethod string   `json:"codeChallengeMethod"`
	Allow               bool     `json:"allow"`
}

// decision records the signed-in person's answer from the console (its
// own origin only) and says where the browser goes: back to the website
// with a code, or with access_denied.
func (s *Server) decision(c *api.Call) (any, error) {
	if err := s.sameOrigin(c); err != nil {
		return nil, err
	}
	var in decisionRequest
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	sess, err := s.session(c)
	if err != nil {
		return nil, err
	}
	q := grantRequest{ClientID: in.ClientID, RedirectURI: in.RedirectURI, ResponseType: "code", State: in.State, Expires: in.Expires,
		Scopes: in.Scope, Challenge: in.CodeChallenge, ChallengeMethod: in.CodeChallengeMethod}
	reg, refused, errCode, detail := s.check(q)
	if refused != nil {
		return nil, api.Errorf(api.CodeInputError, "the website's request is refused: %s", refused.detail)
	}
	if errCode != "" {
		return nil, api.Errorf(api.CodeInputError, "the website's request is refused: %s", detail)
	}
	if !in.Allow {
		return map[string]string{"redirectTo": withQuery(q.RedirectURI, url.Values{"error": {"access_denied"}, "state": {q.State}})}, nil
	}
	to, err := s.grant(c, sess, reg, q)
	if err != nil {
		return nil, err
	}
	return map[string]string{"redirectTo": to}, nil
}

// grant records a code for what the person consented to and returns the
// website's callback with it.
func (s *Server) grant(c *api.Call, sess *store.LoginSession, reg *login.Registration, q grantRequest) (string, error) {
	code := randomToken()
	err := s.d.Store.CreateOAuthCode(c.Context(), store.OAuthGrant{Hash: hashOf(code), ClientID: reg.ClientID, RedirectURI: q.RedirectURI,
		Provider: sess.Provider, Identity: sess.Identity, Roles: sess.Roles, Scopes: q.Scopes, Challenge: q.Challenge,
		GrantExpires: c.Now.Add(reg.GrantLifetime(q.Expires)), Expires: c.Now.Add(login.CodeLifetime)})
	if err != nil {
		return "", err
	}
	s.d.Logger.Info("login: a website was granted credentials", "client", reg.ClientID, "identity", sess.Identity, "scopes", q.Scopes)
	v := url.Values{"code": {code}}
	if q.State != "" {
		v.Set("state", q.State)
	}
	return withQuery(q.RedirectURI, v), nil
}

// tokenError is RFC 6749 §5.2's answer, which OAuth2 clients read (as
// Taskcluster's oauth2orize answers).
func tokenError(status int, code, detail string) *api.Response {
	h := http.Header{}
	h.Set("Pragma", "no-cache")
	return &api.Response{Status: status, Header: h, Body: map[string]string{"error": code, "error_description": detail}}
}

// token trades a code for an access token (RFC 6749 §4.1.3): the code
// once, within its minutes, from the site it was given to, with the same
// callback and, where the site sent a PKCE challenge, its verifier.
func (s *Server) token(c *api.Call) (any, error) {
	ct, _, _ := strings.Cut(c.R.Header.Get("Content-Type"), ";")
	if strings.TrimSpace(strings.ToLower(ct)) != "application/x-www-form-urlencoded" {
		return tokenError(http.StatusBadRequest, "invalid_request", "send the request as application/x-www-form-urlencoded"), nil
	}
	form, err := url.ParseQuery(string(c.Body))
	if err != nil {
		return tokenError(http.StatusBadRequest, "invalid_request", "the body is not a form"), nil
	}
	clientID := form.Get("client_id")
	if id, _, ok := c.R.BasicAuth(); ok {
		clientID, _ = url.QueryUnescape(id) // RFC 6749 §2.3.1 form-encodes it
	}
	if form.Get("grant_type") != "authorization_code" {
		return tokenError(http.StatusBadRequest, "unsupported_grant_type", "only grant_type=authorization_code is supported"), nil
	}
	if _, ok := s.d.Config.Registration(clientID); !ok {
		return tokenError(http.StatusUnauthorized, "invalid_client", "no website of that client_id is registered"), nil
	}
	code := form.Get("code")
	if code == "" {
		return tokenError(http.StatusBadRequest, "invalid_request", "code is required"), nil
	}
	// The checks run in the exchange's transaction: a refused exchange
	// uses the code up too (RFC 6749 §4.1.2: a code is used once).
	accessToken := randomToken()
	var refused string
	g, err := s.d.Store.ExchangeOAuthCode(c.Context(), hashOf(code), c.Now, func(g store.OAuthGrant) *store.OAuthGrant {
		switch {
		case g.ClientID != clientID || g.RedirectURI != form.Get("redirect_uri"):
			refused = "the code was given to another website or callback"
		case g.Challenge != "" && !pkceMatches(g.Challenge, form.Get("code_verifier")):
			refused = "the code_verifier does not match the code_challenge"
		default:
			refused = ""
			tok := g
			tok.Hash, tok.Expires = hashOf(accessToken), g.GrantExpires
			return &tok
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return tokenError(http.StatusBadRequest, "invalid_grant", "the code is unknown, expired or used already"), nil
	}
	if err != nil {
		return nil, err
	}
	if refused != "" {
		return tokenError(http.StatusBadRequest, "invalid_grant", refused), nil
	}
	g.Expires = g.GrantExpires
	h := http.Header{}
	h.Set("Pragma", "no-cache")
	return &api.Response{Status: http.StatusOK, Header: h, Body: map[string]any{"access_token": accessToken, "token_type": "Bearer",
		"expires_in": int64(g.Expires.Sub(c.Now).Seconds()), "scope": strings.Join(g.Scopes, " ")}}, nil
}

// pkceMatches checks RFC 7636's S256: base64url(sha256(verifier)).
func pkceMatches(challenge, verifier string) bool {
	sum := sha256.Sum256([]byte(verifier))
	return subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(challenge)) == 1
}

// oauthCredentials answers a website's bearer access token with temporary
// credentials: the person's expanded scopes (as their roles say now)
// within those consented to, named <identity>/<site>, ending no later
// than the grant.
func (s *Server) oauthCredentials(c *api.Call) (any, error) {
	bearer, ok := strings.CutPrefix(c.R.Header.Get("Authorization"), "Bearer ")
	if !ok || bearer == "" {
		return nil, bearerRefused("send the access token as Authorization: Bearer <token>")
	}
	g, err := s.d.Store.GetOAuthToken(c.Context(), hashOf(strings.TrimSpace(bearer)), c.Now)
	if errors.Is(err, store.ErrNotFound) {
		return nil, bearerRefused("could not generate credentials for this access token (unknown or expired)")
	}
	if err != nil {
		return nil, err
	}
	expanded, err := s.d.Expand(c.Context(), login.Scopes(g.Identity, g.Roles))
	if err != nil {
		return nil, err
	}
	scopes := login.Intersect(expanded, g.Scopes)
	expires := g.Expires
	creds, err := s.d.Issue(g.Identity+"/"+g.ClientID, scopes, c.Now.Add(-5*time.Minute), expires)
	if err != nil {
		return nil, err
	}
	return map[string]any{"expires": expires.UTC(), "scopes": nonNilList(scopes),
		"credentials": map[string]string{"clientId": creds.ClientID, "accessToken": creds.AccessToken, "certificate": creds.Certificate}}, nil
}

func bearerRefused(msg string) error {
	return api.Errorf(api.CodeAuthenticationFailed, "%s", msg)
}

func nonNilList(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// withQuery adds v to uri's query (a registered callback may have one).
func withQuery(uri string, v url.Values) string {
	u, err := url.Parse(uri)
	if err != nil {
		return uri
	}
	q := u.Query()
	for k, vals := range v {
		for _, val := range vals {
			if val != "" {
				q.Add(k, val)
			}
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// ExpandFunc expands scopes through the roles (auth's role expansion).
type ExpandFunc func(ctx context.Context, scopes []string) ([]string, error)
