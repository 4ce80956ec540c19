package loginapi

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"golang.org/x/oauth2"

	"github.com/hopper-ci/hopper/internal/login"
	"github.com/hopper-ci/hopper/internal/store"
)

// grant is what hopper keeps of a provider's answer to ask about the
// person again: the token and, where the provider gives one, the refresh
// token. Sealed before it reaches the store, never logged.
type grant struct {
	AccessToken  string    `json:"accessToken,omitempty"`
	RefreshToken string    `json:"refreshToken,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
}

// keep says what of a token is worth keeping for a provider: GitHub's
// token (and refresh token, for expiring tokens) answers its API; an
// OpenID provider is asked again only through a refresh token (a new ID
// token), so without one nothing is kept.
func keep(p *login.Provider, tok *oauth2.Token) *grant {
	switch {
	case tok == nil:
		return nil
	case p.Kind == login.KindGitHub && tok.AccessToken != "":
		return &grant{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry}
	case tok.RefreshToken != "":
		return &grant{RefreshToken: tok.RefreshToken}
	}
	return nil
}

func (g *grant) token() *oauth2.Token {
	return &oauth2.Token{AccessToken: g.AccessToken, RefreshToken: g.RefreshToken, Expiry: g.Expiry, TokenType: "Bearer"}
}

// remember records the person as just seen: their roles (which their
// sessions take) and the provider's grant, sealed to their identity.
func (s *Server) remember(ctx context.Context, p *login.Provider, identity string, roles []string, tok *oauth2.Token, now time.Time) error {
	sealed := ""
	if g := keep(p, tok); g != nil && s.d.Sealer != nil {
		b, err := json.Marshal(g)
		if err != nil {
			return fmt.Errorf("encoding the grant of %s: %w", identity, err)
		}
		if sealed, err = s.d.Sealer.Seal(string(b), "login grant "+identity); err != nil {
			return fmt.Errorf("sealing the grant of %s: %w", identity, err)
		}
	}
	return s.d.Store.PutLoginIdentity(ctx, store.LoginIdentity{Identity: identity, Provider: p.Name, Roles: roles, Grant: sealed, Updated: now})
}

// openGrant reads a person's kept grant; nil when none was kept.
func (s *Server) openGrant(id *store.LoginIdentity) (*grant, error) {
	if id.Grant == "" || s.d.Sealer == nil {
		return nil, nil
	}
	plain, err := s.d.Sealer.Open(id.Grant, "login grant "+id.Identity)
	if err != nil {
		return nil, fmt.Errorf("opening the grant of %s: %w", id.Identity, err)
	}
	var g grant
	if err := json.Unmarshal([]byte(plain), &g); err != nil {
		return nil, fmt.Errorf("decoding the grant of %s: %w", id.Identity, err)
	}
	return &g, nil
}
