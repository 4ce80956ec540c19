package loginapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/login"
	"github.com/hopper-ci/hopper/internal/store"
)

func (s *Server) oauth2Config(p *login.Provider, op *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{
		ClientID: p.ClientID, ClientSecret: p.ClientSecret, Endpoint: op.Endpoint(),
		RedirectURL: s.d.RootURL + BasePath + "/" + p.Name + "/callback",
		Scopes:      append([]string{oidc.ScopeOpenID}, p.Scopes...),
	}
}

// start sends the person to their provider with a fresh state, nonce and
// PKCE verifier, recorded (state hashed) until they come back. GitHub
// takes no nonce (it issues no ID token).
func (s *Server) start(c *api.Call) (any, error) {
	p, ok := s.d.Config.Provider(c.Params["provider"])
	if !ok {
		return page(http.StatusNotFound, "Unknown sign-in provider", "This deployment has no sign-in provider of that name."), nil
	}
	state, nonce, verifier := randomToken(), randomToken(), oauth2.GenerateVerifier()
	var to string
	if p.Kind == login.KindGitHub {
		nonce = ""
		to = s.githubConfig(p).AuthCodeURL(state, oauth2.S256ChallengeOption(verifier))
	} else {
		op, err := s.discover(c.Context(), p)
		if err != nil {
			s.d.Logger.Warn("login: the provider cannot be reached", "provider", p.Name, "error", err)
			return page(http.StatusBadGateway, "The sign-in provider cannot be reached",
				fmt.Sprintf("%s did not answer; try again later.", p.DisplayName)), nil
		}
		to = s.oauth2Config(p, op).AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier))
	}
	err := s.d.Store.CreateLoginAttempt(c.Context(), store.LoginAttempt{
		StateHash: hashOf(state), Provider: p.Name, Nonce: nonce, Verifier: verifier,
		ReturnTo: safeReturn(c.R.URL.Query().Get("returnTo")), Expires: c.Now.Add(login.AttemptLifetime),
	})
	if err != nil {
		return nil, err
	}
	return redirect(to), nil
}

// refusal is a sign-in refused: the page says why, nothing is granted.
type refusal struct {
	status        int
	title, detail string
}

// callback finishes a sign-in: the state must be one this server sent and
// not used before, the code is exchanged with the PKCE verifier, and the
// ID token must be the provider's (signature, issuer, audience, expiry)
// and carry the nonce. Then a session starts; its secret goes only in an
// HttpOnly cookie, never a URL, and the person goes back to the console.
func (s *Server) callback(c *api.Call) (any, error) {
	sess, secret, r, err := s.finish(c)
	if err != nil {
		return nil, err
	}
	if r != nil {
		return page(r.status, r.title, r.detail), nil
	}
	resp := redirect(sess.returnTo)
	resp.Header.Add("Set-Cookie", s.sessionCookie(secret, int(s.lifetime.Seconds())).String())
	return resp, nil
}

type finished struct{ returnTo string }

func (s *Server) finish(c *api.Call) (*finished, string, *refusal, error) {
	ctx := c.Context()
	q := c.R.URL.Query()
	p, ok := s.d.Config.Provider(c.Params["provider"])
	if !ok {
		return nil, "", &refusal{http.StatusNotFound, "Unknown sign-in provider", "This deployment has no sign-in provider of that name."}, nil
	}
	state := q.Get("state")
	if state == "" {
		return nil, "", &refusal{http.StatusBadRequest, "Sign-in refused", "The provider sent no state: start signing in again."}, nil
	}
	attempt, err := s.d.Store.TakeLoginAttempt(ctx, hashOf(state), c.Now)
	if errors.Is(err, store.ErrNotFound) {
		return nil, "", &refusal{http.StatusBadRequest, "Sign-in refused",
			"This sign-in is unknown, expired or already used: start signing in again."}, nil
	}
	if err != nil {
		return nil, "", nil, err
	}
	if attempt.Provider != p.Name {
		return nil, "", &refusal{http.StatusBadRequest, "Sign-in refused", "This sign-in was started with another provider: start again."}, nil
	}
	if e := q.Get("error"); e != "" {
		return nil, "", &refusal{http.StatusForbidden, "Sign-in refused by the provider",
			fmt.Sprintf("%s answered %q: %s", p.DisplayName, e, q.Get("error_description"))}, nil
	}
	code := q.Get("code")
	if code == "" {
		return nil, "", &refusal{http.StatusBadRequest, "Sign-in refused", "The provider sent no code: start signing in again."}, nil
	}
	var who login.Person
	var tok *oauth2.Token
	var r *refusal
	if p.Kind == login.KindGitHub {
		who, tok, r = s.exchangeGitHub(ctx, p, code, attempt.Verifier)
	} else {
		who, tok, r = s.exchangeOIDC(ctx, p, code, attempt)
	}
	if r != nil {
		return nil, "", r, nil
	}
	identity, err := p.Identity(who)
	if err != nil {
		return nil, "", &refusal{http.StatusBadGateway, "Sign-in refused", err.Error()}, nil
	}
	roles := p.Roles(who)
	if err := s.remember(ctx, p, identity, roles, tok, c.Now); err != nil {
		return nil, "", nil, err
	}
	secret := randomToken()
	err = s.d.Store.CreateLoginSession(ctx, store.LoginSession{IDHash: hashOf(secret), Provider: p.Name, Identity: identity,
		Roles: roles, Created: c.Now, Expires: c.Now.Add(s.lifetime)})
	if err != nil {
		return nil, "", nil, err
	}
	s.d.Logger.Info("login: signed in", "provider", p.Name, "identity", identity)
	return &finished{returnTo: attempt.ReturnTo}, secret, nil, nil
}

// exchangeOIDC trades an OpenID provider's code (with the PKCE verifier)
// and reads the person from the ID token.
func (s *Server) exchangeOIDC(ctx context.Context, p *login.Provider, code string, attempt *store.LoginAttempt) (login.Person, *oauth2.Token, *refusal) {
	if attempt.Nonce == "" {
		return login.Person{}, nil, &refusal{http.StatusBadRequest, "Sign-in refused", "This sign-in has no nonce: start again."}
	}
	op, err := s.discover(ctx, p)
	if err != nil {
		s.d.Logger.Warn("login: the provider cannot be reached", "provider", p.Name, "error", err)
		return login.Person{}, nil, &refusal{http.StatusBadGateway, "The sign-in provider cannot be reached", p.DisplayName + " did not answer; try again later."}
	}
	octx := oidc.ClientContext(ctx, s.d.HTTPClient)
	tok, err := s.oauth2Config(p, op).Exchange(octx, code, oauth2.VerifierOption(attempt.Verifier))
	if err != nil {
		// The error quotes the provider's answer (invalid_grant), never
		// the code or the client secret.
		s.d.Logger.Info("login: the provider refused the code", "provider", p.Name, "error", err)
		return login.Person{}, nil, &refusal{http.StatusBadRequest, "Sign-in refused", p.DisplayName + " did not accept this sign-in's code (expired or used already): start again."}
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return login.Person{}, nil, &refusal{http.StatusBadGateway, "Sign-in refused", p.DisplayName + " sent no ID token."}
	}
	who, r := s.verify(octx, p, op, raw, attempt.Nonce)
	return who, tok, r
}

// exchangeGitHub trades GitHub's code (with the PKCE verifier) for a
// token and reads the person from GitHub's API.
func (s *Server) exchangeGitHub(ctx context.Context, p *login.Provider, code, verifier string) (login.Person, *oauth2.Token, *refusal) {
	octx := context.WithValue(ctx, oauth2.HTTPClient, s.d.HTTPClient)
	cfg := s.githubConfig(p)
	tok, err := cfg.Exchange(octx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode != "" {
			s.d.Logger.Info("login: GitHub refused the code", "provider", p.Name, "error", re.ErrorCode)
			return login.Person{}, nil, &refusal{http.StatusBadRequest, "Sign-in refused", p.DisplayName + " did not accept this sign-in's code (expired or used already): start again."}
		}
		s.d.Logger.Warn("login: the provider cannot be reached", "provider", p.Name, "error", err)
		return login.Person{}, nil, &refusal{http.StatusBadGateway, "The sign-in provider cannot be reached", p.DisplayName + " did not answer; try again later."}
	}
	ts := cfg.TokenSource(octx, tok)
	who, err := s.githubPerson(ctx, p, ts)
	if err == nil && p.RequireVerifiedEmail {
		var ok bool
		if ok, err = s.githubVerified(ctx, p, ts); err == nil && !ok {
			return login.Person{}, nil, &refusal{http.StatusForbidden, "Sign-in refused", "This deployment requires a verified e-mail address; verify yours with " + p.DisplayName + " first."}
		}
	}
	if err != nil {
		s.d.Logger.Warn("login: GitHub's API did not answer", "provider", p.Name, "error", err)
		return login.Person{}, nil, &refusal{http.StatusBadGateway, "The sign-in provider cannot be reached", p.DisplayName + " did not say who you are; try again later."}
	}
	return who, tok, nil
}

// verify checks the ID token and reads the person from it.
func (s *Server) verify(ctx context.Context, p *login.Provider, op *oidc.Provider, raw, nonce string) (login.Person, *refusal) {
	idt, err := op.Verifier(&oidc.Config{ClientID: p.ClientID, Now: s.d.Clock.Now}).Verify(ctx, raw)
	if err != nil {
		s.d.Logger.Warn("login: an ID token was refused", "provider", p.Name, "error", err)
		return login.Person{}, &refusal{http.StatusBadRequest, "Sign-in refused", "The ID token is not valid for this deployment: " + reason(err)}
	}
	// A refreshed ID token (nonce "") belongs to no sign-in.
	if nonce != "" && idt.Nonce != nonce {
		return login.Person{}, &refusal{http.StatusBadRequest, "Sign-in refused", "The ID token was not made for this sign-in (nonce)."}
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return login.Person{}, &refusal{http.StatusBadGateway, "Sign-in refused", "The ID token's claims cannot be read."}
	}
	if p.RequireVerifiedEmail {
		if v, _ := claims["email_verified"].(bool); !v {
			return login.Person{}, &refusal{http.StatusForbidden, "Sign-in refused", "This deployment requires a verified e-mail address; verify yours with " + p.DisplayName + " first."}
		}
	}
	who := login.Person{Subject: idt.Subject}
	who.Username, _ = claims[p.UsernameClaim].(string)
	if p.GroupsClaim != "" {
		switch g := claims[p.GroupsClaim].(type) {
		case []any:
			for _, v := range g {
				if s, ok := v.(string); ok {
					who.Groups = append(who.Groups, s)
				}
			}
		case string:
			who.Groups = []string{g}
		}
	}
	return who, nil
}

// reason says which check an ID token failed, in words for the page.
func reason(err error) string {
	var expired *oidc.TokenExpiredError
	switch {
	case errors.As(err, &expired):
		return "it expired."
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "issuer"), strings.Contains(msg, "different provider"):
		return "it was issued by another provider."
	case strings.Contains(msg, "audience"):
		return "it was issued to another client."
	case strings.Contains(msg, "signature"):
		return "its signature does not verify."
	}
	return "it failed verification."
}
