package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// AuthStore keeps the Auth service's clients and roles.
type AuthStore interface {
	// A change given an *Audit records it in the audit log (audit.go) in
	// the change's transaction.
	CreateClient(ctx context.Context, c *Client, audit *Audit) (*Client, error)
	GetClient(ctx context.Context, clientID string) (*Client, error)
	ListClients(ctx context.Context, prefix string, page Page) ([]Client, string, error)
	UpdateClient(ctx context.Context, clientID string, fn func(*Client) error, audit *Audit) (*Client, error)
	DeleteClient(ctx context.Context, clientID string, audit *Audit) error
	PutRole(ctx context.Context, roleID string, fn func(existing *Role) (*Role, error), audit *Audit) (*Role, error)
	ListRoles(ctx context.Context) ([]Role, error)
	DeleteRole(ctx context.Context, roleID string, audit *Audit) error
	AuditStore
	// ExpireClients deletes the clients marked deleteOnExpiration whose
	// expiry passed before now; it says how many.
	ExpireClients(ctx context.Context, now time.Time) (int, error)
	// RolesVersion changes whenever roles change, so callers can cache
	// expanded role sets cheaply.
	RolesVersion(ctx context.Context) (int64, error)
}

const clientColumns = "client_id, description, access_token, scopes, created, last_modified, last_date_used, last_rotated, expires, disabled, delete_on_expiration"

func scanClient(row rowScanner) (*Client, error) {
	var (
		c                                         Client
		scopes                                    string
		created, modified, used, rotated, expires int64
		disabled, deleteOnExpiration              int
	)
	if err := row.Scan(&c.ClientID, &c.Description, &c.AccessToken, &scopes, &created, &modified, &used, &rotated, &expires, &disabled, &deleteOnExpiration); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(scopes), &c.Scopes); err != nil {
		return nil, fmt.Errorf("decoding scopes of client %s: %w", c.ClientID, err)
	}
	c.Created, c.LastModified, c.LastDateUsed, c.LastRotated, c.Expires = fromMS(created), fromMS(modified), fromMS(used), fromMS(rotated), fromMS(expires)
	c.Disabled, c.DeleteOnExpiration = disabled != 0, deleteOnExpiration != 0
	return &c, nil
}

func clientArgs(c *Client) ([]any, error) {
	scopes, err := json.Marshal(nonNilStrings(c.Scopes))
	if err != nil {
		return nil, err
	}
	return []any{c.ClientID, c.Description, c.AccessToken, string(scopes), ms(c.Created), ms(c.LastModified),
		ms(c.LastDateUsed), ms(c.LastRotated), ms(c.Expires), boolInt(c.Disabled), boolInt(c.DeleteOnExpiration)}, nil
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ErrExists is returned by CreateClient when the client id is taken; the
// existing client is returned alongside.
var ErrExists = errors.New("already exists")

// CreateClient implements Store. If the id is taken it returns the existing
// client and ErrExists. audit, if set, is recorded with the creation.
func (db *DB) CreateClient(ctx context.Context, c *Client, audit *Audit) (*Client, error) {
	var existing *Client
	err := db.tx(ctx, func(tx *txn) error {
		args, err := clientArgs(c)
		if err != nil {
			return err
		}
		res, err := tx.exec(ctx, "INSERT INTO clients ("+clientColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (client_id) DO NOTHING", args...)
		if err != nil {
			return fmt.Errorf("creating client %s: %w", c.ClientID, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			tx.sendAudit(AuditClient, c.ClientID, audit)
			return nil
		}
		existing, err = scanClient(tx.queryRow(ctx, "SELECT "+clientColumns+" FROM clients WHERE client_id = ?", c.ClientID))
		if err != nil {
			return fmt.Errorf("loading client %s: %w", c.ClientID, err)
		}
		return ErrExists
	})
	if errors.Is(err, ErrExists) {
		return existing, ErrExists
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// GetClient implements Store.
func (db *DB) GetClient(ctx context.Context, clientID string) (*Client, error) {
	c, err := scanClient(db.queryRow(ctx, "SELECT "+clientColumns+" FROM clients WHERE client_id = ?", clientID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading client %s: %w", clientID, err)
	}
	return c, nil
}

// ListClients implements Store.
func (db *DB) ListClients(ctx context.Context, prefix string, page Page) ([]Client, string, error) {
	out, next, err := listPage(ctx, db, page, func(after string) (string, []any, error) {
		return "SELECT " + clientColumns + " FROM clients WHERE client_id > ? AND substr(client_id, 1, ?) = ? ORDER BY client_id LIMIT ?",
			[]any{after, len(prefix), prefix}, nil
	}, func(row rowScanner) (Client, error) {
		c, err := scanClient(row)
		if err != nil {
			return Client{}, err
		}
		return *c, nil
	}, func(c Client) string { return c.ClientID })
	if err != nil {
		return nil, "", fmt.Errorf("listing clients: %w", err)
	}
	return out, next, nil
}

// UpdateClient implements Store: fn mutates the locked client. audit, if
// set, is recorded with the change.
func (db *DB) UpdateClient(ctx context.Context, clientID string, fn func(*Client) error, audit *Audit) (*Client, error) {
	var c *Client
	err := db.tx(ctx, func(tx *txn) error {
		var err error
		c, err = scanClient(tx.queryRow(ctx, "SELECT "+clientColumns+" FROM clients WHERE client_id = ?"+db.dialect.LockRow, clientID))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("loading client %s: %w", clientID, err)
		}
		if err := fn(c); err != nil {
			return err
		}
		args, err := clientArgs(c)
		if err != nil {
			return err
		}
		_, err = tx.exec(ctx, `UPDATE clients SET description = ?, access_token = ?, scopes = ?, created = ?, last_modified = ?,
			last_date_used = ?, last_rotated = ?, expires = ?, disabled = ?, delete_on_expiration = ? WHERE client_id = ?`,
			append(args[1:], clientID)...)
		if err != nil {
			return fmt.Errorf("saving client %s: %w", clientID, err)
		}
		tx.sendAudit(AuditClient, clientID, audit)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// DeleteClient implements Store; deleting an unknown client is not an
// error, and is audited only when there was a client to delete.
func (db *DB) DeleteClient(ctx context.Context, clientID string, audit *Audit) error {
	return db.tx(ctx, func(tx *txn) error {
		res, err := tx.exec(ctx, "DELETE FROM clients WHERE client_id = ?", clientID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n > 0 {
			tx.sendAudit(AuditClient, clientID, audit)
		}
		return nil
	})
}

const roleColumns = "role_id, scopes, description, created, last_modified"

func scanRole(row rowScanner) (*Role, error) {
	var (
		r                 Role
		scopes            string
		created, modified int64
	)
	if err := row.Scan(&r.RoleID, &scopes, &r.Description, &created, &modified); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(scopes), &r.Scopes); err != nil {
		return nil, fmt.Errorf("decoding scopes of role %s: %w", r.RoleID, err)
	}
	r.Created, r.LastModified = fromMS(created), fromMS(modified)
	return &r, nil
}

// PutRole implements Store: fn receives the existing role (nil if none) and
// returns the role to store, or an error to refuse. The whole role set is
// locked meanwhile, so validations over all roles (cycles) are consistent.
// audit, if set, is recorded with the change, its Action "created" or
// "updated" by whether the role existed.
func (db *DB) PutRole(ctx context.Context, roleID string, fn func(existing *Role) (*Role, error), audit *Audit) (*Role, error) {
	var out *Role
	err := db.tx(ctx, func(tx *txn) error {
		if err := tx.bumpRolesVersion(ctx); err != nil {
			return err
		}
		existing, err := scanRole(tx.queryRow(ctx, "SELECT "+roleColumns+" FROM roles WHERE role_id = ?", roleID))
		if errors.Is(err, sql.ErrNoRows) {
			existing = nil
		} else if err != nil {
			return fmt.Errorf("loading role %s: %w", roleID, err)
		}
		r, err := fn(existing)
		if err != nil {
			return err
		}
		scopes, err := json.Marshal(nonNilStrings(r.Scopes))
		if err != nil {
			return err
		}
		_, err = tx.exec(ctx, "INSERT INTO roles ("+roleColumns+`) VALUES (?, ?, ?, ?, ?) ON CONFLICT (role_id) DO UPDATE SET
			scopes = excluded.scopes, description = excluded.description, last_modified = excluded.last_modified`,
			roleID, string(scopes), r.Description, ms(r.Created), ms(r.LastModified))
		if err != nil {
			return fmt.Errorf("storing role %s: %w", roleID, err)
		}
		if audit != nil {
			a := *audit
			a.Action = "created"
			if existing != nil {
				a.Action = "updated"
			}
			tx.sendAudit(AuditRole, roleID, &a)
		}
		out = r
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// bumpRolesVersion increments the roles version; the row lock it takes
// serialises role changes.
func (t *txn) bumpRolesVersion(ctx context.Context) error {
	if _, err := t.exec(ctx, "UPDATE meta SET value = value + 1 WHERE name = 'roles_version'"); err != nil {
		return fmt.Errorf("bumping roles version: %w", err)
	}
	return nil
}

// ListRoles implements Store.
func (db *DB) ListRoles(ctx context.Context) ([]Role, error) {
	rows, err := db.query(ctx, "SELECT "+roleColumns+" FROM roles ORDER BY role_id")
	if err != nil {
		return nil, fmt.Errorf("listing roles: %w", err)
	}
	defer rows.Close()
	var out []Role
	for rows.Next() {
		r, err := scanRole(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *r)
	}
	return out, rows.Err()
}

// DeleteRole implements Store; audit, if set, is recorded when there was a
// role to delete.
func (db *DB) DeleteRole(ctx context.Context, roleID string, audit *Audit) error {
	return db.tx(ctx, func(tx *txn) error {
		if err := tx.bumpRolesVersion(ctx); err != nil {
			return err
		}
		res, err := tx.exec(ctx, "DELETE FROM roles WHERE role_id = ?", roleID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n > 0 {
			tx.sendAudit(AuditRole, roleID, audit)
		}
		return nil
	})
}

// RolesVersion implements Store.
func (db *DB) RolesVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := db.queryRow(ctx, "SELECT value FROM meta WHERE name = 'roles_version'").Scan(&v); err != nil {
		return 0, fmt.Errorf("reading roles version: %w", err)
	}
	return v, nil
}

// ExpireClients implements AuthStore.
func (db *DB) ExpireClients(ctx context.Context, now time.Time) (int, error) {
	var n int
	err := db.expireRows(ctx, "clients", func() []expireStep {
		return []expireStep{{&n, "DELETE FROM clients WHERE delete_on_expiration = 1 AND expires < ?", []any{ms(now)}}}
	})
	return n, err
}
