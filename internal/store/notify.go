package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/queue"
)

// NotifyStore persists the Notify service: the outbox of notifications and
// the denylist. A task's notifications are written by the store itself, in
// the transaction of the transition that causes them (queueNotifications),
// so a committed transition never lacks its notifications and a rolled-back
// one never has any. Senders in any number of processes claim due rows with
// a lease (skipping rows others hold), send, and record the outcome.
type NotifyStore interface {
	// EnqueueNotification stores a notification asked for through the API,
	// unless an identical one was stored within notify.DuplicateWindow
	// before now: then duplicate is true and nothing is stored.
	EnqueueNotification(ctx context.Context, m *notify.Message, now time.Time) (id string, duplicate bool, err error)
	// ClaimNotifications leases up to p.Limit due notifications to p.Owner
	// until p.Now+p.Lease. Notifications to a denylisted address are
	// recorded as denied, and email beyond the rate limit as rate-limited,
	// in the same transaction; neither is returned.
	ClaimNotifications(ctx context.Context, p ClaimNotificationsParams) ([]Notification, error)
	// FinishNotification records the outcome of the attempt a lease was
	// given for. It reports false, recording nothing, if the lease was lost
	// (it ran out and another sender claimed the row).
	FinishNotification(ctx context.Context, n *Notification, o notify.Outcome, now time.Time) (bool, error)
	// RenewNotifications moves the lease of the notifications owner holds
	// (of ids) to until; it reports how many it still holds.
	RenewNotifications(ctx context.Context, owner string, ids []string, until time.Time) (int, error)
	// GetNotification returns one notification; ErrNotFound if none.
	GetNotification(ctx context.Context, id string) (*Notification, error)
	// ListTaskNotifications lists a task's notifications, oldest first.
	ListTaskNotifications(ctx context.Context, taskID string, page Page) ([]Notification, string, error)
	// NotificationStates counts the notifications in each state.
	NotificationStates(ctx context.Context) (map[string]int, error)

	// The denylist: (type, address) pairs, type one of notify.Channels.
	AddDenylistAddress(ctx context.Context, notificationType, address string) error
	DeleteDenylistAddress(ctx context.Context, notificationType, address string) error
	ListDenylist(ctx context.Context, page Page) ([]DenylistAddress, string, error)
	IsDenylisted(ctx context.Context, notificationType, address string) (bool, error)

	// ExpireNotifications deletes the outbox rows whose expiry passed
	// before now, whatever their state; it says how many.
	ExpireNotifications(ctx context.Context, now time.Time) (int, error)
}

// Notification is one row of the outbox.
type Notification struct {
	ID      string
	Channel string
	Target  string
	// TaskID, RunID, Event, Route and Status describe a task's notification
	// (TaskID "" for one asked for through the API, which has Message).
	TaskID      string
	RunID       int
	Event       string
	Route       string
	Status      json.RawMessage
	Message     json.RawMessage
	State       string
	Attempts    int
	NextAttempt time.Time
	Error       string
	Created     time.Time
	Updated     time.Time
	// LeaseOwner is the sender holding the row.
	LeaseOwner string
}

// DenylistAddress is one entry of the denylist.
type DenylistAddress struct {
	NotificationType    string `json:"notificationType"`
	NotificationAddress string `json:"notificationAddress"`
}

// ClaimNotificationsParams describes a claim of due notifications.
type ClaimNotificationsParams struct {
	Owner string
	Now   time.Time
	Lease time.Duration
	Limit int
	// RateLimit notifications per RateWindow go to one email address.
	RateLimit  int
	RateWindow time.Duration
}

// apiNotificationLifetime is how long a notification asked for through the
// API is kept (a task's lives as long as the task).
const apiNotificationLifetime = 7 * 24 * time.Hour

const notificationColumns = `id, channel, target, task_id, run_id, event, route, status, message, state, attempts,
	next_attempt, error, created, updated, lease_owner`

func scanNotification(row rowScanner) (Notification, error) {
	var (
		n                             Notification
		status, message, owner        sql.NullString
		runID, attempts               int64
		nextAttempt, created, updated int64
	)
	err := row.Scan(&n.ID, &n.Channel, &n.Target, &n.TaskID, &runID, &n.Event, &n.Route, &status, &message, &n.State,
		&attempts, &nextAttempt, &n.Error, &created, &updated, &owner)
	if err != nil {
		return n, err
	}
	n.RunID, n.Attempts = int(runID), int(attempts)
	if status.Valid {
		n.Status = json.RawMessage(status.String)
	}
	if message.Valid {
		n.Message = json.RawMessage(message.String)
	}
	n.NextAttempt, n.Created, n.Updated, n.LeaseOwner = fromMS(nextAttempt), fromMS(created), fromMS(updated), owner.String
	return n, nil
}

// change builds the Change of a task's transition at now and queues, in
// this transaction, what other services owe because of it: the
// notifications its events produce (the task's notify.* routes), and a
// look at its group by the forge reporter (a task of a forge build,
// forgeReported). A task with neither costs a scan of its routes and a
// comparison.
func (t *txn) change(task *queue.TaskState, events []queue.Event, now time.Time) Change {
	events = withStatus(events, task)
	if notify.HasRoutes(&task.Task) {
		t.queueNotifications(task, events, now)
	}
	if forgeReported(&task.Task) {
		t.enqueue([]OutboxMessage{groupChanged(task.Task.TaskGroupID, now)}, now)
	}
	return Change{Task: task, Events: events}
}

// queueNotifications queues the insert of the notifications of a task's
// events: one row per event and route that fires, in one statement.
func (t *txn) queueNotifications(task *queue.TaskState, events []queue.Event, at time.Time) {
	planned := notify.ForEvents(&task.Task, events)
	if len(planned) == 0 {
		return
	}
	// Recorded at the transition's time, and due at once (next_attempt 0),
	// whatever the senders' clocks say.
	now := ms(at)
	statuses := map[int]string{} // event index → status JSON
	rows := make([]string, 0, len(planned))
	args := make([]any, 0, 13*len(planned))
	for _, p := range planned {
		var status sql.NullString
		for i, ev := range events {
			if ev.Kind == p.Event && ev.RunID == p.RunID && ev.Status != nil {
				if _, ok := statuses[i]; !ok {
					b, err := json.Marshal(ev.Status)
					if err != nil {
						continue
					}
					statuses[i] = string(b)
				}
				status = sql.NullString{String: statuses[i], Valid: true}
				break
			}
		}
		state, reason := notify.StatePending, ""
		if p.Refusal != "" {
			state, reason = notify.StateRefused, p.Refusal
		}
		channel := p.Route.Channel
		rows = append(rows, "(?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, 0, ?, NULL, NULL, ?, ?, ?, ?)")
		args = append(args, newNotificationID(), channel, truncateText(derivedText(p.Route.Target), 1000), task.TaskID, p.RunID, p.Event,
			truncateText(derivedText(p.Route.Raw), 1000), status, state, 0, reason, now, now, task.Task.Expires.Millis())
	}
	t.send(Statement{Query: `INSERT INTO notify_outbox (id, channel, target, task_id, run_id, event, route, status, message, dedup,
		state, attempts, next_attempt, lease_owner, reserved_at, error, created, updated, expires) VALUES ` + strings.Join(rows, ", "),
		Args: args, What: fmt.Sprintf("recording %d notifications of task %s", len(rows), task.TaskID)})
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// newNotificationID is a time-ordered UUID: the notification's id in the
// outbox, in webhook deliveries and as Matrix's transaction id.
func newNotificationID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// EnqueueNotification implements NotifyStore.
func (db *DB) EnqueueNotification(ctx context.Context, m *notify.Message, now time.Time) (string, bool, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return "", false, fmt.Errorf("encoding a notification: %w", err)
	}
	sum := sha256.Sum256(body)
	dedup := hex.EncodeToString(sum[:])
	id := newNotificationID()
	duplicate := false
	err = db.tx(ctx, func(tx *txn) error {
		// One upsert decides: it inserts the request's hash, or moves one
		// stored before the window forward, and returns it; a hash stored
		// within the window is left as it is and nothing returned. Racing
		// identical requests wait on the hash's row (PostgreSQL) or the
		// one writer (SQLite), so exactly one of them stores.
		fresh, err := tx.queryStrings(ctx, `INSERT INTO notify_dedup (dedup, created) VALUES (?, ?)
			ON CONFLICT (dedup) DO UPDATE SET created = excluded.created WHERE notify_dedup.created <= ?
			RETURNING dedup`, dedup, ms(now), ms(now.Add(-notify.DuplicateWindow)))
		if err != nil {
			return fmt.Errorf("looking for a duplicate notification: %w", err)
		}
		if duplicate = len(fresh) == 0; duplicate {
			return nil
		}
		return tx.insertMessageID(ctx, id, sql.NullString{String: dedup, Valid: true}, body, m, now)
	})
	if err != nil || duplicate {
		return "", duplicate, err
	}
	return id, false, nil
}

// insertMessage queues a message the server itself sends (not a Notify
// API request, so with no duplicate check), due at once.
func (t *txn) insertMessage(ctx context.Context, m *notify.Message, now time.Time) error {
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding a notification: %w", err)
	}
	return t.insertMessageID(ctx, newNotificationID(), sql.NullString{}, body, m, now)
}

func (t *txn) insertMessageID(ctx context.Context, id string, dedup sql.NullString, body []byte, m *notify.Message, now time.Time) error {
	_, err := t.exec(ctx, `INSERT INTO notify_outbox (id, channel, target, task_id, run_id, event, route, status, message, dedup,
		state, attempts, next_attempt, lease_owner, reserved_at, error, created, updated, expires)
		VALUES (?, ?, ?, '', -1, '', '', NULL, ?, ?, ?, 0, 0, NULL, NULL, '', ?, ?, ?)`,
		id, m.Channel(), m.Target(), string(body), dedup, notify.StatePending, ms(now), ms(now),
		ms(now.Add(apiNotificationLifetime)))
	if err != nil {
		return fmt.Errorf("recording a %s notification: %w", m.Channel(), err)
	}
	return nil
}

// ClaimNotifications implements NotifyStore.
func (db *DB) ClaimNotifications(ctx context.Context, p ClaimNotificationsParams) ([]Notification, error) {
	var out []Notification
	err := db.tx(ctx, func(tx *txn) error {
		out = nil
		var due []Notification
		err := tx.queryEach(ctx, "SELECT "+notificationColumns+` FROM notify_outbox
			WHERE state = 'pending' AND next_attempt <= ? ORDER BY next_attempt, id LIMIT ?`+db.dialect.LockSkip,
			[]any{ms(p.Now), p.Limit}, func(rows Rows) error {
				for rows.Next() {
					n, err := scanNotification(rows)
					if err != nil {
						return err
					}
					due = append(due, n)
				}
				return rows.Err()
			})
		if err != nil {
			return fmt.Errorf("claiming notifications: %w", err)
		}
		if len(due) == 0 {
			return nil
		}
		denied, err := tx.denylisted(ctx, due)
		if err != nil {
			return err
		}
		limited, err := tx.rateLimited(ctx, due, denied, p)
		if err != nil {
			return err
		}
		var claimed, reserved []string
		for i := range due {
			n := &due[i]
			switch {
			case denied[n.ID]:
				tx.settle(n.ID, notify.StateDenied, "the address is on the denylist", p.Now)
			case limited[n.ID]:
				tx.settle(n.ID, notify.StateRateLimited, fmt.Sprintf("more than %d messages to %s within %s", p.RateLimit, n.Target, p.RateWindow), p.Now)
			default:
				n.Attempts++
				n.LeaseOwner = p.Owner
				claimed = append(claimed, n.ID)
				if n.Attempts == 1 {
					reserved = append(reserved, n.ID)
				}
				out = append(out, *n)
			}
		}
		if len(claimed) > 0 {
			cond, args := db.inList("id", claimed)
			tx.send(Statement{Query: "UPDATE notify_outbox SET attempts = attempts + 1, lease_owner = ?, next_attempt = ?, updated = ? WHERE " + cond,
				Args: append([]any{p.Owner, ms(p.Now.Add(p.Lease)), ms(p.Now)}, args...), What: "leasing notifications"})
		}
		if len(reserved) > 0 {
			cond, args := db.inList("id", reserved)
			tx.send(Statement{Query: "UPDATE notify_outbox SET reserved_at = ? WHERE " + cond,
				Args: append([]any{ms(p.Now)}, args...), What: "counting notifications against their rate limits"})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// settle queues the final state of a notification that will not be sent.
func (t *txn) settle(id, state, reason string, now time.Time) {
	t.send(Statement{Query: "UPDATE notify_outbox SET state = ?, error = ?, lease_owner = NULL, updated = ? WHERE id = ?",
		Args: []any{state, reason, ms(now), id}, What: "settling notification " + id})
}

// denylisted returns the ids of the notifications whose address is on the
// denylist.
func (t *txn) denylisted(ctx context.Context, due []Notification) (map[string]bool, error) {
	var keys []string
	for _, n := range due {
		if k := notify.DenylistKey(n.Channel, n.Target); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	cond, args := t.db.inList("address_key", keys)
	deny := map[[2]string]bool{}
	err := t.queryEach(ctx, "SELECT notification_type, address_key FROM notify_denylist WHERE "+cond, args, func(rows Rows) error {
		for rows.Next() {
			var typ, key string
			if err := rows.Scan(&typ, &key); err != nil {
				return err
			}
			deny[[2]string{typ, key}] = true
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("reading the denylist: %w", err)
	}
	out := map[string]bool{}
	for _, n := range due {
		if deny[[2]string{n.Channel, notify.DenylistKey(n.Channel, n.Target)}] {
			out[n.ID] = true
		}
	}
	return out, nil
}

// rateLimited returns the ids of first-time email notifications beyond their
// address's rate limit. Each address's lock row is taken (in address order,
// so claims never deadlock) before its recent messages are counted: two
// replicas claiming for one address decide one after the other, and the
// second counts what the first reserved.
func (t *txn) rateLimited(ctx context.Context, due []Notification, denied map[string]bool, p ClaimNotificationsParams) (map[string]bool, error) {
	if p.RateLimit <= 0 {
		return nil, nil
	}
	byAddress := map[string][]string{}
	for _, n := range due {
		if n.Channel == notify.ChannelEmail && n.Attempts == 0 && !denied[n.ID] {
			byAddress[n.Target] = append(byAddress[n.Target], n.ID)
		}
	}
	addresses := make([]string, 0, len(byAddress))
	for a := range byAddress {
		addresses = append(addresses, a)
	}
	slices.Sort(addresses)
	out := map[string]bool{}
	for _, a := range addresses {
		t.send(Statement{Query: `INSERT INTO notify_rate_locks (channel, target) VALUES (?, ?)
			ON CONFLICT (channel, target) DO UPDATE SET target = excluded.target`,
			Args: []any{notify.ChannelEmail, a}, What: "locking the rate limit of " + a})
		var recent int
		t.send(Statement{Query: "SELECT COUNT(*) FROM notify_outbox WHERE channel = ? AND target = ? AND reserved_at IS NOT NULL AND reserved_at > ?",
			Args: []any{notify.ChannelEmail, a, ms(p.Now.Add(-p.RateWindow))}, What: "counting recent messages to " + a,
			Rows: func(rows Rows) error { return scanOne(rows, &recent) }})
		if err := t.flush(ctx); err != nil {
			return nil, err
		}
		room := max(p.RateLimit-recent, 0)
		for i, id := range byAddress[a] {
			if i >= room {
				out[id] = true
			}
		}
	}
	return out, nil
}

// FinishNotification implements NotifyStore.
func (db *DB) FinishNotification(ctx context.Context, n *Notification, o notify.Outcome, now time.Time) (bool, error) {
	next := now
	if o.State == notify.StatePending {
		next = o.NextAttempt
	}
	var done bool
	err := db.tx(ctx, func(tx *txn) error {
		res, err := tx.exec(ctx, `UPDATE notify_outbox SET state = ?, error = ?, next_attempt = ?, lease_owner = NULL, updated = ?
			WHERE id = ? AND lease_owner = ? AND attempts = ? AND state = 'pending'`,
			o.State, reportText(o.Error), ms(next), ms(now), n.ID, n.LeaseOwner, n.Attempts)
		if err != nil {
			return fmt.Errorf("recording the outcome of notification %s: %w", n.ID, err)
		}
		done = res.affected > 0
		return nil
	})
	return done, err
}

// RenewNotifications implements NotifyStore. A leased row's next_attempt
// is its lease's end.
func (db *DB) RenewNotifications(ctx context.Context, owner string, ids []string, until time.Time) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	held := 0
	err := db.tx(ctx, func(tx *txn) error {
		cond, args := db.inList("id", ids)
		res, err := tx.exec(ctx, "UPDATE notify_outbox SET next_attempt = ? WHERE state = 'pending' AND lease_owner = ? AND "+cond,
			append([]any{ms(until), owner}, args...)...)
		if err != nil {
			return fmt.Errorf("renewing the leases of %d notifications: %w", len(ids), err)
		}
		held = int(res.affected)
		return nil
	})
	return held, err
}

// GetNotification implements NotifyStore.
func (db *DB) GetNotification(ctx context.Context, id string) (*Notification, error) {
	n, err := scanNotification(db.queryRow(ctx, "SELECT "+notificationColumns+" FROM notify_outbox WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading notification %s: %w", id, err)
	}
	return &n, nil
}

// ListTaskNotifications implements NotifyStore.
func (db *DB) ListTaskNotifications(ctx context.Context, taskID string, page Page) ([]Notification, string, error) {
	out, next, err := listPage(ctx, db, page,
		func(cursor string) (string, []any, error) {
			return "SELECT " + notificationColumns + " FROM notify_outbox WHERE task_id = ? AND id > ? ORDER BY id LIMIT ?",
				[]any{taskID, cursor}, nil
		},
		scanNotification,
		func(n Notification) string { return n.ID })
	if err != nil {
		return nil, "", fmt.Errorf("listing the notifications of task %s: %w", taskID, err)
	}
	return out, next, nil
}

// NotificationStates implements NotifyStore.
func (db *DB) NotificationStates(ctx context.Context) (map[string]int, error) {
	rows, err := db.query(ctx, "SELECT state, COUNT(*) FROM notify_outbox GROUP BY state")
	if err != nil {
		return nil, fmt.Errorf("counting notifications: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return nil, fmt.Errorf("counting notifications: %w", err)
		}
		out[state] = n
	}
	return out, rows.Err()
}

// AddDenylistAddress implements NotifyStore.
func (db *DB) AddDenylistAddress(ctx context.Context, typ, address string) error {
	return db.tx(ctx, func(tx *txn) error {
		_, err := tx.exec(ctx, `INSERT INTO notify_denylist (notification_type, address_key, notification_address) VALUES (?, ?, ?)
			ON CONFLICT (notification_type, address_key) DO NOTHING`, typ, notify.DenylistKey(typ, address), address)
		if err != nil {
			return fmt.Errorf("denylisting a %s address: %w", typ, err)
		}
		return nil
	})
}

// DeleteDenylistAddress implements NotifyStore.
func (db *DB) DeleteDenylistAddress(ctx context.Context, typ, address string) error {
	return db.tx(ctx, func(tx *txn) error {
		_, err := tx.exec(ctx, "DELETE FROM notify_denylist WHERE notification_type = ? AND address_key = ?", typ, notify.DenylistKey(typ, address))
		if err != nil {
			return fmt.Errorf("removing a %s address from the denylist: %w", typ, err)
		}
		return nil
	})
}

// ListDenylist implements NotifyStore.
func (db *DB) ListDenylist(ctx context.Context, page Page) ([]DenylistAddress, string, error) {
	// Paged by the key, which is unique; an entry reads as first added.
	type entry struct {
		d   DenylistAddress
		key string
	}
	list, next, err := listPageFields(ctx, db, page, 2,
		func(cursor string) (string, []any, error) {
			typ, key, _ := strings.Cut(cursor, "\x00")
			return `SELECT notification_type, address_key, notification_address FROM notify_denylist
				WHERE notification_type > ? OR (notification_type = ? AND address_key > ?)
				ORDER BY notification_type, address_key LIMIT ?`, []any{typ, typ, key}, nil
		},
		func(row rowScanner) (entry, error) {
			var e entry
			err := row.Scan(&e.d.NotificationType, &e.key, &e.d.NotificationAddress)
			return e, err
		},
		func(e entry) string { return e.d.NotificationType + "\x00" + e.key })
	out := make([]DenylistAddress, 0, len(list))
	for _, e := range list {
		out = append(out, e.d)
	}
	if err != nil {
		return nil, "", fmt.Errorf("listing the denylist: %w", err)
	}
	return out, next, nil
}

// IsDenylisted implements NotifyStore.
func (db *DB) IsDenylisted(ctx context.Context, typ, address string) (bool, error) {
	var n int
	err := db.queryRow(ctx, "SELECT COUNT(*) FROM notify_denylist WHERE notification_type = ? AND address_key = ?", typ, notify.DenylistKey(typ, address)).Scan(&n)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("reading the denylist: %w", err)
	}
	return n > 0, nil
}

// ExpireNotifications implements NotifyStore: it deletes the outbox rows
// whose task (or, from the API, whose week) has expired, whatever their
// state.
func (db *DB) ExpireNotifications(ctx context.Context, now time.Time) (int, error) {
	var n int
	err := db.expireRows(ctx, "notifications", func() []expireStep {
		return []expireStep{{&n, "DELETE FROM notify_outbox WHERE expires < ?", []any{ms(now)}},
			// A request hash older than the window stops no duplicate.
			{nil, "DELETE FROM notify_dedup WHERE created <= ?", []any{ms(now.Add(-notify.DuplicateWindow))}}}
	})
	return n, err
}
