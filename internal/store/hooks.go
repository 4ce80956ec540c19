package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/notify"
)

// HookStore persists the Hooks service: hook definitions with their
// schedule state and trigger token, and the record of every fire.
type HookStore interface {
	// CreateHook stores a new hook. If the id is taken it returns the
	// existing hook and ErrExists.
	CreateHook(ctx context.Context, h *Hook) (*Hook, error)
	GetHook(ctx context.Context, hookGroupID, hookID string) (*Hook, error)
	// ListHookGroups lists the groups holding at least one hook, sorted.
	ListHookGroups(ctx context.Context) ([]string, error)
	// ListHooks lists a group's hooks ("" lists every hook), sorted by id.
	ListHooks(ctx context.Context, hookGroupID string) ([]Hook, error)
	// UpdateHook lets fn change the locked hook and saves it.
	UpdateHook(ctx context.Context, hookGroupID, hookID string, fn func(*Hook) error) (*Hook, error)
	// DeleteHook removes a hook and its fires; an unknown hook is no error.
	DeleteHook(ctx context.Context, hookGroupID, hookID string) error

	// ClaimDueHook takes a lease until leaseUntil on one hook due at now
	// (next scheduled time reached, no live lease), the longest-due first;
	// nil when none is due. Several replicas may call it at once: each
	// due hook goes to one of them. The hook comes back with its new
	// lease, and in LastClaimEnd the end of the claim before it.
	ClaimDueHook(ctx context.Context, now, leaseUntil time.Time) (*Hook, error)
	// FinishScheduledFire ends a claimed scheduled fire in one
	// transaction: the hook moves on to its next due time and next taskId
	// if it still waits for the fire's taskId (it reports whether it
	// did), its claim ending at p.Finished, and the fire is recorded
	// unless its taskId already is, so a due time is recorded once even if
	// two replicas raced for it.
	FinishScheduledFire(ctx context.Context, p FinishFireParams) (bool, error)
	// ReleaseHookClaim drops the lease of h, as ClaimDueHook returned it,
	// without firing, so the due time is retried at the next poll: the
	// hook's claim ends where the one before it did (h.LastClaimEnd), if
	// the claim is still for h.NextTaskID.
	ReleaseHookClaim(ctx context.Context, h *Hook) error

	// AddLastFire records a fire that no schedule state depends on
	// (triggers and Pulse messages).
	AddLastFire(ctx context.Context, f *LastFire) error
	// ListLastFires lists a hook's fires, newest first.
	ListLastFires(ctx context.Context, hookGroupID, hookID string, page Page) ([]LastFire, string, error)
	// ExpireHookFires deletes the fire records older than
	// LastFireRetention at now; it says how many.
	ExpireHookFires(ctx context.Context, now time.Time) (int, error)
}

// Hook is a stored hook.
type Hook struct {
	HookGroupID string
	HookID      string
	// The definition's parts, as JSON.
	Metadata, Task, Bindings, Schedule, TriggerSchema json.RawMessage
	// TriggerToken is the webhook token, sealed with the server key.
	TriggerToken string
	// NextTaskID is the taskId the next scheduled fire creates; it changes
	// after each scheduled fire and never leaves the service.
	NextTaskID string
	// NextScheduled is the next due time (zero: no schedule).
	NextScheduled time.Time
	// ClaimedUntil is when the hook's last claim ends or ended: the end
	// of the lease of the replica firing it, or, once it no longer holds,
	// when the last scheduled fire was recorded or when the lease of a
	// replica that died firing ran out (zero: never claimed since its
	// schedule was set). The schedule rule (hooks.Claim) reads it.
	ClaimedUntil time.Time
	// LastClaimEnd is set by ClaimDueHook only: ClaimedUntil as it was
	// before the claim.
	LastClaimEnd time.Time
	Created      time.Time
	LastModified time.Time
}

// LastFire is one recorded fire of a hook.
type LastFire struct {
	HookGroupID    string
	HookID         string
	FiredBy        string
	TaskID         string
	TaskCreateTime time.Time
	Result         string // "success" or "error"
	Error          string
}

// FinishFireParams ends a scheduled fire (see FinishScheduledFire).
type FinishFireParams struct {
	HookGroupID, HookID string
	// FiredTaskID is the NextTaskID the fire used; the update applies only
	// while the hook still holds it.
	FiredTaskID   string
	NextTaskID    string
	NextScheduled time.Time
	// Finished is when the fire ended: the hook's claim ends then.
	Finished time.Time
	Fire     *LastFire
	// Notify, if set, is sent (queued in the notify outbox) when Fire is
	// recorded, in the same transaction: the owner's email about a failed
	// fire (emailOnError) goes out once, however often the fire is
	// finished.
	Notify *notify.Message
}

// LastFireRetention is how long a hook's fire records are kept, as in
// Taskcluster.
const LastFireRetention = 365 * 24 * time.Hour

// ExpireHookFires implements HookStore.
func (db *DB) ExpireHookFires(ctx context.Context, now time.Time) (int, error) {
	var n int
	err := db.expireRows(ctx, "hook fires", func() []expireStep {
		return []expireStep{{&n, "DELETE FROM hook_last_fires WHERE task_create_time < ?", []any{ms(now.Add(-LastFireRetention))}}}
	})
	return n, err
}

const hookColumns = "hook_group_id, hook_id, metadata, task, bindings, schedule, trigger_schema, trigger_token, next_task_id, next_scheduled, claimed_until, created, last_modified"

func scanHook(row rowScanner) (*Hook, error) {
	var (
		h                                           Hook
		metadata, task, bindings, sched, trigSchema string
		next, claimed, created, modified            int64
	)
	if err := row.Scan(&h.HookGroupID, &h.HookID, &metadata, &task, &bindings, &sched, &trigSchema,
		&h.TriggerToken, &h.NextTaskID, &next, &claimed, &created, &modified); err != nil {
		return nil, err
	}
	h.Metadata, h.Task, h.Bindings, h.Schedule, h.TriggerSchema = json.RawMessage(metadata), json.RawMessage(task),
		json.RawMessage(bindings), json.RawMessage(sched), json.RawMessage(trigSchema)
	if next > 0 {
		h.NextScheduled = fromMS(next)
	}
	if claimed > 0 {
		h.ClaimedUntil = fromMS(claimed)
	}
	h.Created, h.LastModified = fromMS(created), fromMS(modified)
	return &h, nil
}

// optMS stores a zero time as 0.
func optMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return ms(t)
}

func hookArgs(h *Hook) []any {
	return []any{h.HookGroupID, h.HookID, string(h.Metadata), string(h.Task), string(h.Bindings), string(h.Schedule),
		string(h.TriggerSchema), h.TriggerToken, h.NextTaskID, optMS(h.NextScheduled), optMS(h.ClaimedUntil),
		ms(h.Created), ms(h.LastModified)}
}

// CreateHook implements HookStore.
func (db *DB) CreateHook(ctx context.Context, h *Hook) (*Hook, error) {
	var existing *Hook
	err := db.tx(ctx, func(tx *txn) error {
		res, err := tx.exec(ctx, "INSERT INTO hooks ("+hookColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (hook_group_id, hook_id) DO NOTHING", hookArgs(h)...)
		if err != nil {
			return fmt.Errorf("creating hook %s/%s: %w", h.HookGroupID, h.HookID, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			tx.scheduleHook(h, h.Created)
			return nil
		}
		existing, err = scanHook(tx.queryRow(ctx, "SELECT "+hookColumns+" FROM hooks WHERE hook_group_id = ? AND hook_id = ?", h.HookGroupID, h.HookID))
		if err != nil {
			return fmt.Errorf("loading hook %s/%s: %w", h.HookGroupID, h.HookID, err)
		}
		return ErrExists
	})
	if errors.Is(err, ErrExists) {
		return existing, ErrExists
	}
	if err != nil {
		return nil, err
	}
	return h, nil
}

// GetHook implements HookStore.
func (db *DB) GetHook(ctx context.Context, hookGroupID, hookID string) (*Hook, error) {
	h, err := scanHook(db.queryRow(ctx, "SELECT "+hookColumns+" FROM hooks WHERE hook_group_id = ? AND hook_id = ?", hookGroupID, hookID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading hook %s/%s: %w", hookGroupID, hookID, err)
	}
	return h, nil
}

// ListHookGroups implements HookStore.
func (db *DB) ListHookGroups(ctx context.Context) ([]string, error) {
	rows, err := db.query(ctx, "SELECT DISTINCT hook_group_id FROM hooks ORDER BY hook_group_id")
	if err != nil {
		return nil, fmt.Errorf("listing hook groups: %w", err)
	}
	defer rows.Close()
	groups := []string{}
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			return nil, err
		}
		groups = append(groups, g)
	}
	return groups, rows.Err()
}

// ListHooks implements HookStore.
func (db *DB) ListHooks(ctx context.Context, hookGroupID string) ([]Hook, error) {
	q, args := "SELECT "+hookColumns+" FROM hooks ORDER BY hook_group_id, hook_id", []any(nil)
	if hookGroupID != "" {
		q, args = "SELECT "+hookColumns+" FROM hooks WHERE hook_group_id = ? ORDER BY hook_id", []any{hookGroupID}
	}
	rows, err := db.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("listing hooks: %w", err)
	}
	defer rows.Close()
	var out []Hook
	for rows.Next() {
		h, err := scanHook(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *h)
	}
	return out, rows.Err()
}

// UpdateHook implements HookStore.
func (db *DB) UpdateHook(ctx context.Context, hookGroupID, hookID string, fn func(*Hook) error) (*Hook, error) {
	var h *Hook
	err := db.tx(ctx, func(tx *txn) error {
		var err error
		h, err = scanHook(tx.queryRow(ctx, "SELECT "+hookColumns+" FROM hooks WHERE hook_group_id = ? AND hook_id = ?"+db.dialect.LockRow, hookGroupID, hookID))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("loading hook %s/%s: %w", hookGroupID, hookID, err)
		}
		if err := fn(h); err != nil {
			return err
		}
		h.HookGroupID, h.HookID = hookGroupID, hookID
		args := hookArgs(h)
		_, err = tx.exec(ctx, `UPDATE hooks SET metadata = ?, task = ?, bindings = ?, schedule = ?, trigger_schema = ?, trigger_token = ?,
			next_task_id = ?, next_scheduled = ?, claimed_until = ?, created = ?, last_modified = ? WHERE hook_group_id = ? AND hook_id = ?`,
			append(args[2:], hookGroupID, hookID)...)
		if err != nil {
			return fmt.Errorf("saving hook %s/%s: %w", hookGroupID, hookID, err)
		}
		tx.scheduleHook(h, h.LastModified)
		return tx.flush(ctx)
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// DeleteHook implements HookStore.
func (db *DB) DeleteHook(ctx context.Context, hookGroupID, hookID string) error {
	return db.tx(ctx, func(tx *txn) error {
		tx.send(Statement{Query: "DELETE FROM hooks WHERE hook_group_id = ? AND hook_id = ?", Args: []any{hookGroupID, hookID}, What: "deleting hook"})
		tx.unscheduleHook(hookGroupID, hookID)
		_, err := tx.exec(ctx, "DELETE FROM hook_last_fires WHERE hook_group_id = ? AND hook_id = ?", hookGroupID, hookID)
		return err
	})
}

// Scheduled fires are claimed through the services' outbox: a hook with a
// schedule has one message (HooksService, HookFire, keyed by the hook),
// due at its next due time, queued again whenever that changes.
const (
	HooksService = "hooks"
	HookFire     = "fire"
)

func hookKey(hookGroupID, hookID string) string { return hookGroupID + "/" + hookID }

// scheduleHook queues the message of h's next due time (none: it has no
// schedule), in this transaction: a waiting message is due at the new
// time, a leased one stays with its holder, whose finish leaves it due.
func (t *txn) scheduleHook(h *Hook, now time.Time) {
	if h.NextScheduled.IsZero() {
		t.unscheduleHook(h.HookGroupID, h.HookID)
		return
	}
	t.enqueue([]OutboxMessage{{Service: HooksService, Kind: HookFire, Key: hookKey(h.HookGroupID, h.HookID), Due: h.NextScheduled,
		Expires: h.NextScheduled.Add(LastFireRetention)}}, now)
}

// unscheduleHook deletes the message of a hook's next due time.
func (t *txn) unscheduleHook(hookGroupID, hookID string) {
	t.send(Statement{Query: "DELETE FROM outbox WHERE service = ? AND kind = ? AND msg_key = ?",
		Args: []any{HooksService, HookFire, hookKey(hookGroupID, hookID)}, What: "unscheduling hook " + hookKey(hookGroupID, hookID)})
}

// ClaimDueHook implements HookStore: the lease is the outbox's (its idle
// poll is one read); the hook's claimed_until records it too, for the
// schedule's rule (the end of the claim before the next).
func (db *DB) ClaimDueHook(ctx context.Context, now, leaseUntil time.Time) (*Hook, error) {
	for {
		claimed, err := db.ClaimOutbox(ctx, ClaimOutboxParams{Service: HooksService, Kind: HookFire, Owner: leaseOwner(leaseUntil),
			Now: now, Lease: leaseUntil.Sub(now), Limit: 1})
		if err != nil || len(claimed) == 0 {
			return nil, err
		}
		var h *Hook
		err = db.tx(ctx, func(tx *txn) error {
			var err error
			h, err = tx.claimHook(ctx, &claimed[0], now, leaseUntil)
			return err
		})
		if err != nil || h != nil {
			return h, err
		}
	}
}

// claimHook takes the hook a claimed message names, if it is due: its
// claim ends at leaseUntil. A hook gone or no longer due (its schedule
// changed while the message was leased) has its message put right, and
// nil is returned.
func (t *txn) claimHook(ctx context.Context, m *OutboxMessage, now, leaseUntil time.Time) (*Hook, error) {
	group, id, _ := strings.Cut(m.Key, "/")
	h, err := scanHook(t.queryRow(ctx, "SELECT "+hookColumns+" FROM hooks WHERE hook_group_id = ? AND hook_id = ?"+t.db.dialect.LockRow, group, id))
	if errors.Is(err, sql.ErrNoRows) {
		t.unscheduleHook(group, id)
		return nil, t.flush(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("finding due hook %s: %w", m.Key, err)
	}
	if h.NextScheduled.IsZero() || h.NextScheduled.After(now) {
		if _, err := t.finishOutbox(ctx, m, OutboxOutcome{Done: true, Now: now}); err != nil {
			return nil, err
		}
		t.scheduleHook(h, now)
		return nil, t.flush(ctx)
	}
	h.LastClaimEnd, h.ClaimedUntil = h.ClaimedUntil, leaseUntil
	_, err = t.exec(ctx, "UPDATE hooks SET claimed_until = ? WHERE hook_group_id = ? AND hook_id = ?", ms(leaseUntil), h.HookGroupID, h.HookID)
	if err != nil {
		return nil, fmt.Errorf("claiming hook %s/%s: %w", h.HookGroupID, h.HookID, err)
	}
	return h, nil
}

// FinishScheduledFire implements HookStore. The hook's row is locked
// first, so replicas finishing the same fire take turns; the fire is
// recorded unless a record of its taskId exists, so it is recorded once
// even when the hook was updated meanwhile (the task exists either way).
func (db *DB) FinishScheduledFire(ctx context.Context, p FinishFireParams) (bool, error) {
	applied := false
	err := db.tx(ctx, func(tx *txn) error {
		var current string
		err := tx.queryRow(ctx, "SELECT next_task_id FROM hooks WHERE hook_group_id = ? AND hook_id = ?"+db.dialect.LockRow,
			p.HookGroupID, p.HookID).Scan(&current)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // removed meanwhile: nothing to move on or record
		}
		if err != nil {
			return fmt.Errorf("locking hook %s/%s: %w", p.HookGroupID, p.HookID, err)
		}
		if current == p.FiredTaskID {
			applied = true
			tx.send(Statement{Query: `UPDATE hooks SET next_task_id = ?, next_scheduled = ?, claimed_until = ?
				WHERE hook_group_id = ? AND hook_id = ?`, Args: []any{p.NextTaskID, optMS(p.NextScheduled), optMS(p.Finished), p.HookGroupID, p.HookID},
				What: "moving hook " + p.HookGroupID + "/" + p.HookID + " to its next due time"})
			// The due time fired is done, whoever's claim of it holds (the
			// hook's taskId decides): the message starts again at the next.
			tx.unscheduleHook(p.HookGroupID, p.HookID)
			tx.scheduleHook(&Hook{HookGroupID: p.HookGroupID, HookID: p.HookID, NextScheduled: p.NextScheduled}, p.Finished)
		}
		if p.Fire == nil {
			return tx.flush(ctx)
		}
		f := p.Fire
		res, err := tx.exec(ctx, `INSERT INTO hook_last_fires (hook_group_id, hook_id, fired_by, task_id, task_create_time, result, error)
			SELECT ?, ?, ?, ?, ?, ?, ? WHERE NOT EXISTS (
				SELECT 1 FROM hook_last_fires WHERE hook_group_id = ? AND hook_id = ? AND task_id = ?)`,
			f.HookGroupID, f.HookID, f.FiredBy, f.TaskID, ms(f.TaskCreateTime), f.Result, reportText(f.Error), f.HookGroupID, f.HookID, f.TaskID)
		if err != nil {
			return fmt.Errorf("recording a fire of hook %s/%s: %w", f.HookGroupID, f.HookID, err)
		}
		if p.Notify != nil && res.affected > 0 {
			return tx.insertMessage(ctx, p.Notify, f.TaskCreateTime)
		}
		return nil
	})
	return applied, err
}

// ReleaseHookClaim implements HookStore: while the hook still waits for
// h.NextTaskID, its message starts again, due at once (its due time
// passed), whoever's lease it was under.
func (db *DB) ReleaseHookClaim(ctx context.Context, h *Hook) error {
	return db.tx(ctx, func(tx *txn) error {
		var next int64
		err := tx.queryRow(ctx, "SELECT next_scheduled FROM hooks WHERE hook_group_id = ? AND hook_id = ? AND next_task_id = ?"+db.dialect.LockRow,
			h.HookGroupID, h.HookID, h.NextTaskID).Scan(&next)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // moved on or gone meanwhile: nothing to release
		}
		if err != nil {
			return fmt.Errorf("loading hook %s/%s: %w", h.HookGroupID, h.HookID, err)
		}
		tx.send(Statement{Query: "UPDATE hooks SET claimed_until = ? WHERE hook_group_id = ? AND hook_id = ?",
			Args: []any{optMS(h.LastClaimEnd), h.HookGroupID, h.HookID}, What: "releasing hook " + hookKey(h.HookGroupID, h.HookID)})
		tx.unscheduleHook(h.HookGroupID, h.HookID)
		if next > 0 {
			tx.scheduleHook(&Hook{HookGroupID: h.HookGroupID, HookID: h.HookID, NextScheduled: fromMS(next)}, fromMS(next))
		}
		return tx.flush(ctx)
	})
}

// AddLastFire implements HookStore.
func (db *DB) AddLastFire(ctx context.Context, f *LastFire) error {
	return db.tx(ctx, func(tx *txn) error { return tx.addLastFire(ctx, f) })
}

func (t *txn) addLastFire(ctx context.Context, f *LastFire) error {
	_, err := t.exec(ctx, `INSERT INTO hook_last_fires (hook_group_id, hook_id, fired_by, task_id, task_create_time, result, error)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, f.HookGroupID, f.HookID, f.FiredBy, f.TaskID, ms(f.TaskCreateTime), f.Result, reportText(f.Error))
	if err != nil {
		return fmt.Errorf("recording a fire of hook %s/%s: %w", f.HookGroupID, f.HookID, err)
	}
	return nil
}

// ListLastFires implements HookStore.
func (db *DB) ListLastFires(ctx context.Context, hookGroupID, hookID string, page Page) ([]LastFire, string, error) {
	type numbered struct {
		LastFire
		id int64
	}
	rows, next, err := listPage(ctx, db, page, func(cursor string) (string, []any, error) {
		before := int64(1<<63 - 1)
		if cursor != "" {
			var err error
			if before, err = strconv.ParseInt(cursor, 10, 64); err != nil {
				return "", nil, ErrBadContinuationToken
			}
		}
		return `SELECT id, hook_group_id, hook_id, fired_by, task_id, task_create_time, result, error FROM hook_last_fires
			WHERE hook_group_id = ? AND hook_id = ? AND id < ? ORDER BY id DESC LIMIT ?`, []any{hookGroupID, hookID, before}, nil
	}, func(row rowScanner) (numbered, error) {
		var (
			f  numbered
			at int64
		)
		err := row.Scan(&f.id, &f.HookGroupID, &f.HookID, &f.FiredBy, &f.TaskID, &at, &f.Result, &f.Error)
		f.TaskCreateTime = fromMS(at)
		return f, err
	}, func(f numbered) string { return strconv.FormatInt(f.id, 10) })
	if err != nil {
		return nil, "", fmt.Errorf("listing fires of hook %s/%s: %w", hookGroupID, hookID, err)
	}
	out := make([]LastFire, len(rows))
	for i, r := range rows {
		out[i] = r.LastFire
	}
	return out, next, nil
}
