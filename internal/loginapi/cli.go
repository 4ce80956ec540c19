package loginapi

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/login"
	"github.com/hopper-ci/hopper/internal/store"
)

// A command on the person's machine (`hopper login`) signs in as a native
// app does under RFC 8252: it listens on a loopback port, sends the
// browser to GET /login/<provider>/cli with its redirect URI, a state and
// a PKCE challenge; the person signs in to the provider (if the browser
// has no session yet) and allows the command on a page of hopper's; the
// browser goes to the loopback redirect with a one-time code, and the
// command trades the code and its PKCE verifier for credentials at POST
// /login/cli/token. The credentials travel only in that POST's answer,
// never in a URL.

// cliGrantPrefix marks a login attempt row that holds a command's
// one-time code rather than a provider sign-in: the row has the same
// shape (a hashed secret used once before it expires) and the prefix is
// not a provider name, so the provider callback never accepts one.
const cliGrantPrefix = "cli:"

// cliCodeLifetime is how long the command has to trade its code: it is
// waiting on the loopback port, so a minute is plenty.
const cliCodeLifetime = time.Minute

// cliQuery are the parameters of the command's request (RFC 6749 §4.1.1
// and RFC 7636).
var cliQuery = []string{"redirect_uri", "state", "code_challenge", "code_challenge_method"}

// pkceChallenge is an S256 challenge: 43 base64url characters.
var pkceChallenge = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// cliState is the command's state: printable, short.
var cliState = regexp.MustCompile(`^[A-Za-z0-9._~-]{16,128}$`)

func (s *Server) cliRoutes() []api.Route {
	return []api.Route{
		{Name: "loginCli", Method: http.MethodGet, Paths: []string{BasePath + "/{provider}/cli"}, Query: cliQuery, Handle: s.cliConsent},
		{Name: "loginCliAllow", Method: http.MethodPost, Paths: []string{BasePath + "/{provider}/cli/allow"}, Query: cliQuery, Handle: s.cliAllow},
		{Name: "loginCliDeny", Method: http.MethodPost, Paths: []string{BasePath + "/{provider}/cli/deny"}, Query: cliQuery, Handle: s.cliDeny},
		{Name: "loginCliToken", Method: http.MethodPost, Paths: []string{BasePath + "/cli/token"}, Input: "login-cli-token-request", Handle: s.cliToken,
			CleanPayloadFunc: omitPayload},
	}
}

// omitPayload keeps a body of one-time secrets (a code and its verifier,
// a device code) out of an error reply's echo of the request.
func omitPayload([]byte) []byte { return []byte(`{}`) }

// cliRequest is a command's request, checked.
type cliRequest struct {
	p                          *login.Provider
	redirect, state, challenge string
}

// query is the request again, for the consent page's forms.
func (r *cliRequest) query() string {
	return url.Values{"redirect_uri": {r.redirect}, "state": {r.state}, "code_challenge": {r.challenge},
		"code_challenge_method": {"S256"}}.Encode()
}

// cliRequestOf checks a command's request; a refusal is a page, since a
// person reads it in the browser (nothing is sent to the redirect URI
// before it is known to be a loopback one).
func (s *Server) cliRequestOf(c *api.Call) (*cliRequest, *api.Response) {
	p, ok := s.d.Config.Provider(c.Params["provider"])
	if !ok {
		return nil, page(http.StatusNotFound, "Unknown sign-in provider", "This deployment has no sign-in provider of that name.")
	}
	q := c.R.URL.Query()
	r := &cliRequest{p: p, redirect: q.Get("redirect_uri"), state: q.Get("state"), challenge: q.Get("code_challenge")}
	if !loopbackRedirect(r.redirect) {
		return nil, page(http.StatusBadRequest, "Command-line sign-in refused",
			"The redirect URI is not a loopback address with a port (http://127.0.0.1:<port>/…): credentials go only to a command on this computer.")
	}
	if q.Get("code_challenge_method") != "S256" || !pkceChallenge.MatchString(r.challenge) || !cliState.MatchString(r.state) {
		return nil, page(http.StatusBadRequest, "Command-line sign-in refused",
			"The command sent no valid state or PKCE challenge (S256): start it again.")
	}
	return r, nil
}

// loopbackRedirect accepts http://127.0.0.1:<port>/path, [::1] or
// localhost, without a query, fragment or user (RFC 8252 §7.3).
func loopbackRedirect(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Port() == "" {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

var consentTemplate = template.Must(template.New("consent").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Command-line sign-in · hopper</title></head>
<body><main><h1>Command-line sign-in</h1>
<p id="detail">A command on this computer (<code>hopper login</code>, answering at <code>{{.Redirect}}</code>) asks for credentials
that act as <strong id="identity">{{.Identity}}</strong> through {{.Provider}} for up to an hour.</p>
<p>Allow it only if you started it yourself.</p>
<form method="post" action="{{.Allow}}"><button id="allow" type="submit">Allow</button></form>
<form method="post" action="{{.Deny}}"><button id="deny" type="submit">Deny</button></form>
</main></body></html>
`))

// cliConsent asks the signed-in person whether the command may act as
// them; a person not signed in through that provider signs in first and
// comes back here.
func (s *Server) cliConsent(c *api.Call) (any, error) {
	r, refused := s.cliRequestOf(c)
	if refused != nil {
		return refused, nil
	}
	sess, err := s.cliSession(c, r.p)
	if err != nil {
		return nil, err
	}
	if sess == nil {
		// A provider that cannot be reached is told to the command at once
		// (RFC 6749's temporarily_unavailable), rather than left waiting
		// while the browser shows the error.
		if r.p.Kind != login.KindGitHub {
			if _, err := s.discover(c.Context(), r.p); err != nil {
				s.d.Logger.Warn("login: the provider cannot be reached", "provider", r.p.Name, "error", err)
				return redirect(r.redirect + "?" + url.Values{"error": {"temporarily_unavailable"}, "state": {r.state},
					"error_description": {r.p.DisplayName + " cannot be reached"}}.Encode()), nil
			}
		}
		return redirect(BasePath + "/" + r.p.Name + "?" + url.Values{"returnTo": {c.R.URL.Path + "?" + r.query()}}.Encode()), nil
	}
	var b bytes.Buffer
	err = consentTemplate.Execute(&b, map[string]string{"Redirect": r.redirect, "Identity": sess.Identity, "Provider": r.p.DisplayName,
		"Allow": c.R.URL.Path + "/allow?" + r.query(), "Deny": c.R.URL.Path + "/deny?" + r.query()})
	if err != nil {
		return nil, err
	}
	resp := page(http.StatusOK, "", "")
	resp.RawBody = b.Bytes()
	// The page must not be framed: a click on Allow is the consent.
	resp.Header.Set("X-Frame-Options", "DENY")
	resp.Header.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	resp.Header.Set("Cache-Control", "no-store")
	// same-origin, not no-referrer: under no-referrer a browser sends
	// "Origin: null" with the form's POST, which sameOrigin must refuse;
	// other sites still get no Referer.
	resp.Header.Set("Referrer-Policy", "same-origin")
	return resp, nil
}

// cliSession is the browser's session with provider p, or nil.
func (s *Server) cliSession(c *api.Call, p *login.Provider) (*store.LoginSession, error) {
	ck, err := c.R.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return nil, nil
	}
	sess, err := s.d.Store.GetLoginSession(c.Context(), hashOf(ck.Value), c.Now)
	if errors.Is(err, store.ErrNotFound) || (err == nil && sess.Provider != p.Name) {
		return nil, nil
	}
	return sess, err
}

// cliAllow records a one-time code bound to the session and the PKCE
// challenge and sends the browser to the command with it.
func (s *Server) cliAllow(c *api.Call) (any, error) {
	if err := s.sameOrigin(c); err != nil {
		return nil, err
	}
	r, refused := s.cliRequestOf(c)
	if refused != nil {
		return refused, nil
	}
	sess, err := s.cliSession(c, r.p)
	if err != nil {
		return nil, err
	}
	if sess == nil {
		return page(http.StatusUnauthorized, "Command-line sign-in refused", "The sign-in ended: start the command again."), nil
	}
	code := randomToken()
	err = s.d.Store.CreateLoginAttempt(c.Context(), store.LoginAttempt{StateHash: hashOf(code), Provider: cliGrantPrefix + r.p.Name,
		Nonce: sess.IDHash, Verifier: r.challenge, ReturnTo: r.redirect, Expires: c.Now.Add(cliCodeLifetime)})
	if err != nil {
		return nil, err
	}
	s.d.Logger.Info("login: a command-line sign-in was allowed", "provider", r.p.Name, "identity", sess.Identity)
	return seeOther(r.redirect + "?" + url.Values{"code": {code}, "state": {r.state}}.Encode()), nil
}

// cliDeny tells the command the person refused (RFC 6749 §4.1.2.1).
func (s *Server) cliDeny(c *api.Call) (any, error) {
	if err := s.sameOrigin(c); err != nil {
		return nil, err
	}
	r, refused := s.cliRequestOf(c)
	if refused != nil {
		return refused, nil
	}
	return seeOther(r.redirect + "?" + url.Values{"error": {"access_denied"}, "state": {r.state},
		"error_description": {"the person denied the command's sign-in"}}.Encode()), nil
}

// seeOther is redirect after a form's POST: the browser follows with GET.
func seeOther(to string) *api.Response {
	resp := redirect(to)
	resp.Status = http.StatusSeeOther
	return resp
}

type cliTokenRequest struct {
	Code         string `json:"code"`
	CodeVerifier string `json:"codeVerifier"`
	RedirectURI  string `json:"redirectUri"`
}

// cliToken trades a command's one-time code and PKCE verifier for the
// signed-in person's temporary credentials.
func (s *Server) cliToken(c *api.Call) (any, error) {
	var in cliTokenRequest
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	refused := api.Errorf(api.CodeInputError, "the code is unknown, expired or used already: run the command again")
	grant, err := s.d.Store.TakeLoginAttempt(c.Context(), hashOf(in.Code), c.Now)
	if errors.Is(err, store.ErrNotFound) {
		return nil, refused
	}
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(grant.Provider, cliGrantPrefix) || grant.ReturnTo != in.RedirectURI {
		return nil, refused
	}
	sum := sha256.Sum256([]byte(in.CodeVerifier))
	if subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(grant.Verifier)) != 1 {
		return nil, api.Errorf(api.CodeInputError, "the code verifier does not match the code's challenge (PKCE)")
	}
	sess, err := s.d.Store.GetLoginSession(c.Context(), grant.Nonce, c.Now)
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.Errorf(api.CodeAuthenticationFailed, "the sign-in ended before the code was used: run the command again")
	}
	if err != nil {
		return nil, err
	}
	return s.issueReply(c, sess.Provider, sess.Identity, sess.Roles, sess.Expires)
}

// issueReply signs temporary credentials for a signed-in person that
// expire within CredentialsLifetime and never after notAfter.
func (s *Server) issueReply(c *api.Call, provider, identity string, roles []string, notAfter time.Time) (*credentialsReply, error) {
	expires := c.Now.Add(login.CredentialsLifetime)
	if notAfter.Before(expires) {
		expires = notAfter
	}
	scopes := login.Scopes(identity, roles)
	// Start a little in the past, as Taskcluster's web-server does, so a
	// caller whose clock is behind can use them at once.
	creds, err := s.d.Issue(identity, scopes, c.Now.Add(-5*time.Minute), expires)
	if err != nil {
		return nil, err
	}
	if roles == nil {
		roles = []string{}
	}
	return &credentialsReply{Identity: identity, Provider: provider, Roles: roles, Scopes: scopes, Expires: expires.UTC(),
		Credentials: map[string]string{"clientId": creds.ClientID, "accessToken": creds.AccessToken, "certificate": creds.Certificate}}, nil
}
