package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// LoginOAuthStore persists third-party websites' OAuth2 grants (the login
// service's /login/oauth/...): codes a person's consent gave a registered
// site, and the access tokens the site traded them for. Both are keyed by
// the hash of the secret the site holds, never the secret.
type LoginOAuthStore interface {
	// CreateOAuthCode records a code for the grant g (g.Hash the code's).
	CreateOAuthCode(ctx context.Context, g OAuthGrant) error
	// ExchangeOAuthCode takes the grant of a code, once, and in the same
	// transaction records the access token trade makes of it (g.Hash the
	// token's, g.Expires its end; Challenge and GrantExpires unused); a
	// nil token records none, and the code is used up all the same. It
	// returns the code's grant: ErrNotFound when the code is unknown,
	// used already or expired at now. trade must be pure (a transaction
	// may run again).
	ExchangeOAuthCode(ctx context.Context, codeHash string, now time.Time, trade func(code OAuthGrant) *OAuthGrant) (*OAuthGrant, error)
	// GetOAuthToken returns the grant of an access token: ErrNotFound
	// when it is unknown or expired at now.
	GetOAuthToken(ctx context.Context, tokenHash string, now time.Time) (*OAuthGrant, error)
}

// OAuthGrant is what a person consented to give a registered website.
type OAuthGrant struct {
	Hash string
	// ClientID is the registration's; RedirectURI where the code went.
	ClientID    string
	RedirectURI string
	// The person: provider, login identity and roles at consent.
	Provider string
	Identity string
	Roles    []string
	// Scopes are those consented to.
	Scopes []string
	// Challenge is the site's PKCE S256 challenge ("" without PKCE).
	Challenge string
	// GrantExpires is when the access token will end (a code's).
	GrantExpires time.Time
	// Expires is when the code (or the token) ends.
	Expires time.Time
}

func encodeGrant(g OAuthGrant) (roles, scopes string, err error) {
	r, err := json.Marshal(nonNil(g.Roles))
	if err != nil {
		return "", "", fmt.Errorf("encoding the roles of %s: %w", g.Identity, err)
	}
	s, err := json.Marshal(nonNil(g.Scopes))
	if err != nil {
		return "", "", fmt.Errorf("encoding the scopes of %s: %w", g.Identity, err)
	}
	return string(r), string(s), nil
}

func decodeGrant(g *OAuthGrant, roles, scopes string) error {
	if err := json.Unmarshal([]byte(roles), &g.Roles); err != nil {
		return fmt.Errorf("decoding the roles of %s: %w", g.Identity, err)
	}
	if err := json.Unmarshal([]byte(scopes), &g.Scopes); err != nil {
		return fmt.Errorf("decoding the scopes of %s: %w", g.Identity, err)
	}
	return nil
}

// CreateOAuthCode implements LoginOAuthStore.
func (db *DB) CreateOAuthCode(ctx context.Context, g OAuthGrant) error {
	roles, scopes, err := encodeGrant(g)
	if err != nil {
		return err
	}
	return db.tx(ctx, func(tx *txn) error {
		_, err := tx.exec(ctx, `INSERT INTO login_oauth_codes (code_hash, client_id, redirect_uri, provider, identity, roles, scopes, challenge, grant_expires, expires)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			g.Hash, g.ClientID, g.RedirectURI, g.Provider, g.Identity, roles, scopes, g.Challenge, ms(g.GrantExpires), ms(g.Expires))
		if err != nil {
			return fmt.Errorf("recording a code for %s: %w", g.ClientID, err)
		}
		return nil
	})
}

// ExchangeOAuthCode implements LoginOAuthStore. The code's row is
// deleted by the statement that reads it, so two exchanges of one code
// get it once; the token is inserted in the same transaction.
func (db *DB) ExchangeOAuthCode(ctx context.Context, codeHash string, now time.Time, trade func(OAuthGrant) *OAuthGrant) (*OAuthGrant, error) {
	var out *OAuthGrant
	err := db.tx(ctx, func(tx *txn) error {
		g := OAuthGrant{Hash: codeHash}
		var roles, scopes string
		var grantExpires, expires int64
		err := tx.queryRow(ctx, `DELETE FROM login_oauth_codes WHERE code_hash = ?
			RETURNING client_id, redirect_uri, provider, identity, roles, scopes, challenge, grant_expires, expires`, codeHash).
			Scan(&g.ClientID, &g.RedirectURI, &g.Provider, &g.Identity, &roles, &scopes, &g.Challenge, &grantExpires, &expires)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("taking a code: %w", err)
		}
		g.GrantExpires, g.Expires = fromMS(grantExpires), fromMS(expires)
		if err := decodeGrant(&g, roles, scopes); err != nil {
			return err
		}
		out = &g
		if g.Expires.Before(now) {
			return nil // used up, and refused below
		}
		tok := trade(g)
		if tok == nil {
			return nil
		}
		troles, tscopes, err := encodeGrant(*tok)
		if err != nil {
			return err
		}
		_, err = tx.exec(ctx, `INSERT INTO login_oauth_tokens (token_hash, client_id, provider, identity, roles, scopes, expires)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, tok.Hash, tok.ClientID, tok.Provider, tok.Identity, troles, tscopes, ms(tok.Expires))
		if err != nil {
			return fmt.Errorf("recording an access token for %s: %w", tok.ClientID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if out.Expires.Before(now) {
		return nil, ErrNotFound
	}
	return out, nil
}

// GetOAuthToken implements LoginOAuthStore.
func (db *DB) GetOAuthToken(ctx context.Context, tokenHash string, now time.Time) (*OAuthGrant, error) {
	g := OAuthGrant{Hash: tokenHash}
	var roles, scopes string
	var expires int64
	err := db.queryRow(ctx, `SELECT client_id, provider, identity, roles, scopes, expires FROM login_oauth_tokens WHERE token_hash = ? AND expires >= ?`,
		tokenHash, ms(now)).Scan(&g.ClientID, &g.Provider, &g.Identity, &roles, &scopes, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading an access token: %w", err)
	}
	g.Expires = fromMS(expires)
	return &g, decodeGrant(&g, roles, scopes)
}
