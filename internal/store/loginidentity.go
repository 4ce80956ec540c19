package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// LoginIdentityStore keeps the people the login service has seen, for
// the credential scanner (issue 37).
type LoginIdentityStore interface {
	// PutLoginIdentity records what a person may do as last seen, and
	// gives their sessions these roles, in one transaction.
	PutLoginIdentity(ctx context.Context, id LoginIdentity) error
	// GetLoginIdentity returns a person: ErrNotFound if never seen (or
	// forgotten).
	GetLoginIdentity(ctx context.Context, identity string) (*LoginIdentity, error)
	// ForgetLoginIdentity deletes a person whose account is gone and ends
	// their sessions; no error when there is nothing to delete.
	ForgetLoginIdentity(ctx context.Context, identity string) error
}

// LoginIdentity is a person as last seen through their provider.
type LoginIdentity struct {
	// Identity is the login identity, <provider>/<user>.
	Identity string
	Provider string
	// Roles are the roles the provider's groups gave.
	Roles []string
	// Grant is the provider's grant, sealed by the login service (the
	// store never sees it in the clear); "" when it gave nothing to ask
	// with later.
	Grant   string
	Updated time.Time
}

// PutLoginIdentity implements LoginIdentityStore.
func (db *DB) PutLoginIdentity(ctx context.Context, id LoginIdentity) error {
	roles, err := json.Marshal(nonNil(id.Roles))
	if err != nil {
		return fmt.Errorf("encoding the roles of %s: %w", id.Identity, err)
	}
	return db.tx(ctx, func(tx *txn) error {
		_, err := tx.exec(ctx, `INSERT INTO login_identities (identity, provider, roles, grant_sealed, updated) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (identity) DO UPDATE SET provider = excluded.provider, roles = excluded.roles,
			grant_sealed = excluded.grant_sealed, updated = excluded.updated`,
			id.Identity, id.Provider, string(roles), id.Grant, ms(id.Updated))
		if err != nil {
			return fmt.Errorf("recording %s: %w", id.Identity, err)
		}
		if _, err := tx.exec(ctx, "UPDATE login_sessions SET roles = ? WHERE identity = ?", string(roles), id.Identity); err != nil {
			return fmt.Errorf("updating the sessions of %s: %w", id.Identity, err)
		}
		return nil
	})
}

// GetLoginIdentity implements LoginIdentityStore.
func (db *DB) GetLoginIdentity(ctx context.Context, identity string) (*LoginIdentity, error) {
	id := LoginIdentity{Identity: identity}
	var roles string
	var updated int64
	err := db.queryRow(ctx, "SELECT provider, roles, grant_sealed, updated FROM login_identities WHERE identity = ?", identity).
		Scan(&id.Provider, &roles, &id.Grant, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", identity, err)
	}
	if err := json.Unmarshal([]byte(roles), &id.Roles); err != nil {
		return nil, fmt.Errorf("decoding the roles of %s: %w", identity, err)
	}
	id.Updated = fromMS(updated)
	return &id, nil
}

// ForgetLoginIdentity implements LoginIdentityStore.
func (db *DB) ForgetLoginIdentity(ctx context.Context, identity string) error {
	return db.tx(ctx, func(tx *txn) error {
		if _, err := tx.exec(ctx, "DELETE FROM login_identities WHERE identity = ?", identity); err != nil {
			return fmt.Errorf("forgetting %s: %w", identity, err)
		}
		if _, err := tx.exec(ctx, "DELETE FROM login_sessions WHERE identity = ?", identity); err != nil {
			return fmt.Errorf("ending the sessions of %s: %w", identity, err)
		}
		return nil
	})
}
