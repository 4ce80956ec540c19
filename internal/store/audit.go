package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// AuditStore is the audit log of client and role changes: who changed
// which entity, how and when (Taskcluster's auth.listAuditHistory and
// auth.getEntityHistory). Entries are written by the change's own
// transaction (CreateClient, UpdateClient, DeleteClient, PutRole,
// DeleteRole with an *Audit), so a change is never without its entry nor
// an entry without its change.
type AuditStore interface {
	// ListAuditHistory lists entries oldest first, of one entity (Entity)
	// or made by one client (ByClient).
	ListAuditHistory(ctx context.Context, q AuditQuery, page Page) ([]AuditEntry, string, error)
	// RecordAudit writes the entry of an event that changes no row of its
	// own, in a transaction of its own: an interactive shell opened in a
	// task (AuditTask), whose entry must be written before the shell opens;
	// a refusal (an identity token or cloud credentials a caller may not
	// have), so misuse is in the log beside the changes.
	RecordAudit(ctx context.Context, entityType, entityID string, a Audit) error
	// ExpireAuditHistory deletes entries made before cutoff; it returns how
	// many.
	ExpireAuditHistory(ctx context.Context, cutoff time.Time) (int, error)
}

// Audited entity types (Taskcluster's getEntityHistory names the same).
const (
	AuditClient = "client"
	AuditRole   = "role"
	// AuditTask entries are interactive shells opened in a task.
	AuditTask = "task"
	// AuditIDToken entries are refused identity tokens (entity: the
	// run, <taskId>/<runId>); AuditCloudCredentials refused cloud
	// credentials (entity: what was asked for, <service>:<resource>).
	AuditIDToken          = "id-token"
	AuditCloudCredentials = "cloud-credentials"
)

// Audit says who makes a change, what kind of change it is (Taskcluster's
// action types: "created", "updated", "deleted", "client enabled", …) and
// when. The store adds the entity it is about.
type Audit struct {
	ClientID string
	Action   string
	At       time.Time
}

// AuditEntry is one recorded change.
type AuditEntry struct {
	EntityType string
	EntityID   string
	ClientID   string
	Action     string
	Created    time.Time
}

// AuditQuery selects the entries of one entity (EntityType and EntityID)
// or those one client made (ByClient).
type AuditQuery struct {
	EntityType, EntityID string
	ByClient             string
}

// sendAudit queues the entry of a change, if the change is audited.
func (t *txn) sendAudit(entityType, entityID string, a *Audit) {
	if a == nil {
		return
	}
	t.send(Statement{Query: "INSERT INTO audit_history (entity_type, entity_id, client_id, action_type, created) VALUES (?, ?, ?, ?, ?)",
		Args: []any{entityType, entityID, a.ClientID, a.Action, ms(a.At)},
		What: "recording the audit entry of " + entityType + " " + entityID})
}

// RecordAudit implements AuditStore.
func (db *DB) RecordAudit(ctx context.Context, entityType, entityID string, a Audit) error {
	return db.tx(ctx, func(tx *txn) error {
		tx.sendAudit(entityType, entityID, &a)
		return nil
	})
}

// ListAuditHistory implements AuditStore.
func (db *DB) ListAuditHistory(ctx context.Context, q AuditQuery, page Page) ([]AuditEntry, string, error) {
	type row struct {
		AuditEntry
		id int64
	}
	var where string
	var args []any
	switch {
	case q.ByClient != "":
		where, args = "client_id = ?", []any{q.ByClient}
	case q.EntityType != "" && q.EntityID != "":
		where, args = "entity_type = ? AND entity_id = ?", []any{q.EntityType, q.EntityID}
	default:
		return nil, "", fmt.Errorf("listing audit history: no entity or client given")
	}
	out, next, err := listPage(ctx, db, page, func(cursor string) (string, []any, error) {
		at, id, err := auditCursor(cursor)
		if err != nil {
			return "", nil, err
		}
		return "SELECT entity_type, entity_id, client_id, action_type, created, id FROM audit_history WHERE " + where +
				" AND (created > ? OR (created = ? AND id > ?)) ORDER BY created, id LIMIT ?",
			append(args, at, at, id), nil
	}, func(r rowScanner) (row, error) {
		var e row
		var created int64
		if err := r.Scan(&e.EntityType, &e.EntityID, &e.ClientID, &e.Action, &created, &e.id); err != nil {
			return row{}, err
		}
		e.Created = fromMS(created)
		return e, nil
	}, func(e row) string { return strconv.FormatInt(ms(e.Created), 10) + "|" + strconv.FormatInt(e.id, 10) })
	if err != nil {
		return nil, "", fmt.Errorf("listing audit history: %w", err)
	}
	entries := make([]AuditEntry, len(out))
	for i := range out {
		entries[i] = out[i].AuditEntry
	}
	return entries, next, nil
}

// auditCursor decodes "<created ms>|<id>"; "" starts before everything.
func auditCursor(c string) (at, id int64, err error) {
	if c == "" {
		return -1 << 62, 0, nil
	}
	atPart, idPart, ok := strings.Cut(c, "|")
	at, err1 := strconv.ParseInt(atPart, 10, 64)
	id, err2 := strconv.ParseInt(idPart, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, ErrBadContinuationToken
	}
	return at, id, nil
}

// ExpireAuditHistory implements AuditStore.
func (db *DB) ExpireAuditHistory(ctx context.Context, cutoff time.Time) (int, error) {
	var n int64
	err := db.tx(ctx, func(tx *txn) error {
		res, err := tx.exec(ctx, "DELETE FROM audit_history WHERE created < ?", ms(cutoff))
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("expiring audit history: %w", err)
	}
	return int(n), nil
}
