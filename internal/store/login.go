package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// LoginStore persists the login service's rows (package login holds the
// rules): sign-ins under way with a provider and signed-in sessions. Both
// are keyed by the hash of a secret the browser holds, never the secret.
type LoginStore interface {
	// CreateLoginAttempt records a sign-in sent to a provider.
	CreateLoginAttempt(ctx context.Context, a LoginAttempt) error
	// TakeLoginAttempt deletes and returns the sign-in of stateHash, once:
	// ErrNotFound when there is none, it was taken, or it expired by now.
	TakeLoginAttempt(ctx context.Context, stateHash string, now time.Time) (*LoginAttempt, error)
	// CreateLoginSession records a person's signed-in session.
	CreateLoginSession(ctx context.Context, s LoginSession) error
	// GetLoginSession returns the session of idHash: ErrNotFound when there
	// is none or it expired by now.
	GetLoginSession(ctx context.Context, idHash string, now time.Time) (*LoginSession, error)
	// DeleteLoginSession ends a session (signing out); no error when it is
	// gone already.
	DeleteLoginSession(ctx context.Context, idHash string) error
	// ExpireLogin deletes expired sign-ins, sessions and third-party
	// codes and tokens (LoginOAuthStore) and says how many.
	ExpireLogin(ctx context.Context, now time.Time) (int, error)
	LoginOAuthStore
}

// LoginAttempt is a sign-in sent to a provider, waiting for the person to
// come back with a code.
type LoginAttempt struct {
	StateHash string
	Provider  string
	// Nonce is the ID token's expected nonce; Verifier the PKCE code
	// verifier the code exchange sends.
	Nonce    string
	Verifier string
	// ReturnTo is the console path the person goes back to.
	ReturnTo string
	Expires  time.Time
}

// LoginSession is a person signed in through a provider.
type LoginSession struct {
	IDHash   string
	Provider string
	// Identity is the login identity, <provider>/<user>.
	Identity string
	// Roles are the roles the provider's groups gave at sign-in.
	Roles   []string
	Created time.Time
	Expires time.Time
}

// CreateLoginAttempt implements LoginStore.
func (db *DB) CreateLoginAttempt(ctx context.Context, a LoginAttempt) error {
	return db.tx(ctx, func(tx *txn) error {
		_, err := tx.exec(ctx, `INSERT INTO login_attempts (state_hash, provider, nonce, verifier, return_to, expires) VALUES (?, ?, ?, ?, ?, ?)`,
			a.StateHash, a.Provider, a.Nonce, a.Verifier, a.ReturnTo, ms(a.Expires))
		if err != nil {
			return fmt.Errorf("recording a sign-in with %s: %w", a.Provider, err)
		}
		return nil
	})
}

// TakeLoginAttempt implements LoginStore. The row is deleted in the same
// statement that reads it, so two callbacks with one state cannot both
// have it.
func (db *DB) TakeLoginAttempt(ctx context.Context, stateHash string, now time.Time) (*LoginAttempt, error) {
	var a LoginAttempt
	var expires int64
	err := db.tx(ctx, func(tx *txn) error {
		err := tx.queryRow(ctx, `DELETE FROM login_attempts WHERE state_hash = ?
			RETURNING state_hash, provider, nonce, verifier, return_to, expires`, stateHash).
			Scan(&a.StateHash, &a.Provider, &a.Nonce, &a.Verifier, &a.ReturnTo, &expires)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("taking a sign-in: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	a.Expires = fromMS(expires)
	if a.Expires.Before(now) {
		return nil, ErrNotFound
	}
	return &a, nil
}

// CreateLoginSession implements LoginStore.
func (db *DB) CreateLoginSession(ctx context.Context, s LoginSession) error {
	roles, err := json.Marshal(nonNil(s.Roles))
	if err != nil {
		return fmt.Errorf("encoding the roles of %s: %w", s.Identity, err)
	}
	return db.tx(ctx, func(tx *txn) error {
		_, err := tx.exec(ctx, `INSERT INTO login_sessions (id_hash, provider, identity, roles, created, expires) VALUES (?, ?, ?, ?, ?, ?)`,
			s.IDHash, s.Provider, s.Identity, string(roles), ms(s.Created), ms(s.Expires))
		if err != nil {
			return fmt.Errorf("recording the session of %s: %w", s.Identity, err)
		}
		return nil
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// GetLoginSession implements LoginStore.
func (db *DB) GetLoginSession(ctx context.Context, idHash string, now time.Time) (*LoginSession, error) {
	s := LoginSession{IDHash: idHash}
	var roles string
	var created, expires int64
	err := db.queryRow(ctx, `SELECT provider, identity, roles, created, expires FROM login_sessions WHERE id_hash = ? AND expires >= ?`, idHash, ms(now)).
		Scan(&s.Provider, &s.Identity, &roles, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading a session: %w", err)
	}
	if err := json.Unmarshal([]byte(roles), &s.Roles); err != nil {
		return nil, fmt.Errorf("decoding the roles of %s: %w", s.Identity, err)
	}
	s.Created, s.Expires = fromMS(created), fromMS(expires)
	return &s, nil
}

// DeleteLoginSession implements LoginStore.
func (db *DB) DeleteLoginSession(ctx context.Context, idHash string) error {
	return db.tx(ctx, func(tx *txn) error {
		if _, err := tx.exec(ctx, "DELETE FROM login_sessions WHERE id_hash = ?", idHash); err != nil {
			return fmt.Errorf("ending a session: %w", err)
		}
		return nil
	})
}

// ExpireLogin implements LoginStore.
func (db *DB) ExpireLogin(ctx context.Context, now time.Time) (int, error) {
	var attempts, sessions, codes, tokens int
	err := db.expireRows(ctx, "login", func() []expireStep {
		return []expireStep{
			{&attempts, "DELETE FROM login_attempts WHERE expires < ?", []any{ms(now)}},
			{&sessions, "DELETE FROM login_sessions WHERE expires < ?", []any{ms(now)}},
			{&codes, "DELETE FROM login_oauth_codes WHERE expires < ?", []any{ms(now)}},
			{&tokens, "DELETE FROM login_oauth_tokens WHERE expires < ?", []any{ms(now)}},
		}
	})
	return attempts + sessions + codes + tokens, err
}
