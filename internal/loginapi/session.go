package loginapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/store"
)

// CookieName is the session cookie: HttpOnly, SameSite=Lax and scoped to
// /login, so scripts never read it and other sites cannot send it with a
// POST.
const CookieName = "hopper_login"

func (s *Server) sessionCookie(secret string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: secret, Path: BasePath, MaxAge: maxAge,
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode}
}

// sameOrigin refuses a browser request another site made: a POST from
// another origin (the cookie is Lax, but a sibling site on the same
// registrable domain counts as same-site).
func (s *Server) sameOrigin(c *api.Call) error {
	if o := c.R.Header.Get("Origin"); o != "" && o != s.origin {
		return api.Errorf(api.CodeInsufficientScopes, "the login service answers only the console's own origin")
	}
	if site := c.R.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return api.Errorf(api.CodeInsufficientScopes, "the login service answers only the console's own origin")
	}
	return nil
}

func (s *Server) session(c *api.Call) (*store.LoginSession, error) {
	ck, err := c.R.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return nil, api.Errorf(api.CodeAuthenticationFailed, "not signed in: sign in through one of %s/providers", BasePath)
	}
	sess, err := s.d.Store.GetLoginSession(c.Context(), hashOf(ck.Value), c.Now)
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.Errorf(api.CodeAuthenticationFailed, "the sign-in expired or ended: sign in again")
	}
	return sess, err
}

// credentialsReply is what the console receives: the person, and
// temporary credentials named after their identity that expire within
// CredentialsLifetime (never after the session).
type credentialsReply struct {
	Identity    string            `json:"identity"`
	Provider    string            `json:"provider"`
	Roles       []string          `json:"roles"`
	Scopes      []string          `json:"scopes"`
	Expires     time.Time         `json:"expires"`
	Credentials map[string]string `json:"credentials"`
}

// credentials hands the signed-in console temporary credentials in the
// body of a POST (never a URL).
func (s *Server) credentials(c *api.Call) (any, error) {
	if err := s.sameOrigin(c); err != nil {
		return nil, err
	}
	sess, err := s.session(c)
	if err != nil {
		return nil, err
	}
	return s.issueReply(c, sess.Provider, sess.Identity, sess.Roles, sess.Expires)
}

// logout ends the session and clears its cookie.
func (s *Server) logout(c *api.Call) (any, error) {
	if err := s.sameOrigin(c); err != nil {
		return nil, err
	}
	if ck, err := c.R.Cookie(CookieName); err == nil && ck.Value != "" {
		if err := s.d.Store.DeleteLoginSession(c.Context(), hashOf(ck.Value)); err != nil {
			return nil, err
		}
	}
	h := http.Header{}
	h.Add("Set-Cookie", s.sessionCookie("", -1).String())
	return &api.Response{Status: http.StatusOK, Header: h, Body: map[string]any{}}, nil
}

// redirect sends the browser on, telling it to send no Referer (the
// provider's authorize URL and our callback's query carry state and code).
func redirect(to string) *api.Response {
	h := http.Header{}
	h.Set("Location", to)
	h.Set("Referrer-Policy", "no-referrer")
	return &api.Response{Status: http.StatusFound, Header: h, RawBody: []byte{}}
}
