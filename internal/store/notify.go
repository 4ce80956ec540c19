package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/queue"
)

// NotifyStore persists the Notify service: its notifications (the
// notify_outbox table: what each is, its state and attempts) and the
// denylist. A task's notifications are written by the store itself, in
// the transaction of the transition that causes them (queueNotifications),
// so a committed transition never lacks its notifications and a rolled-back
// one never has any. Each pending notification has a message of the
// services' outbox (NotifyService, NotifySend, keyed by its id), queued in
// the same transaction: senders in any number of processes claim due
// notifications through it (OutboxStore's lease), send, and record the
// outcome while the claim is still theirs.
type NotifyStore interface {
	// EnqueueNotification stores a notification asked for through the API,
	// unless an identical one was stored within notify.DuplicateWindow
	// before now: then duplicate is true and nothing is stored.
	EnqueueNotification(ctx context.Context, m *notify.Message, now time.Time) (id string, duplicate bool, err error)
	// ClaimNotifications leases up to p.Limit due notifications to p.Owner
	// until p.Now+p.Lease (their outbox messages, oldest first).
	// Notifications to a denylisted address are recorded as denied, and
	// email beyond the rate limit as rate-limited, with their messages
	// done, while the claim holds; neither is returned. It returns none
	// only when none is due.
	ClaimNotifications(ctx context.Context, p ClaimNotificationsParams) ([]Notification, error)
	// FinishNotification records the outcome of the attempt a claim was
	// given for, with its message's, in one transaction. It reports false,
	// recording nothing, if the claim was lost (its lease ran out and
	// another sender claimed the notification).
	FinishNotification(ctx context.Context, n *Notification, o notify.Outcome, now time.Time) (bool, error)
	// RenewNotifications moves the lease of the claimed notifications to
	// until; it reports how many their claims still hold.
	RenewNotifications(ctx context.Context, claimed []Notification, until time.Time) (int, error)
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

	// ExpireNotifications deletes the notifications (and their messages)
	// whose expiry passed before now, whatever their state; it says how
	// many notifications.
	ExpireNotifications(ctx context.Context, now time.Time) (int, error)
}

// The outbox messages of notifications: one per pending notification,
// keyed by its id, due at once (at 0, whatever the senders' clocks say:
// of those due at once, ids are time-ordered, so the oldest goes first).
const (
	NotifyService = "notify"
	NotifySend    = "send"
)

var dueAtOnce = time.UnixMilli(0)

// Notification is one notification (a row of notify_outbox).
type Notification struct {
	ID      string
	Channel string
	Target  string
	// TaskID, RunID, Event, Route and Status describe a task's notification
	// (TaskID "" for one asked for through the API, which has Message).
	TaskID  string
	RunID   int
	Event   string
	Route   string
	Status  json.RawMessage
	Message json.RawMessage
	State   string
	// Attempts counts the claims of its message; a claimed notification's
	// is its claim's.
	Attempts int
	// NextAttempt is when a pending notification's message is due (a
	// leased one's: when its lease ends).
	NextAttempt time.Time
	Error       string
	Created     time.Time
	Updated     time.Time
	// LeaseOwner is the sender whose claim holds the message ("" none).
	LeaseOwner string
	// reserved says the notification counts against its address's rate
	// limit (it was claimed before).
	reserved bool
}

// message is the outbox message a claim of n holds.
func (n *Notification) message() OutboxMessage {
	return OutboxMessage{Service: NotifyService, Kind: NotifySend, Key: n.ID, Owner: n.LeaseOwner, Attempts: n.Attempts}
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

// notificationColumns are a notification's (n) with its message's (o,
// none once nothing more is owed, finishSend: notificationFrom).
const notificationColumns = `n.id, n.channel, n.target, n.task_id, n.run_id, n.event, n.route, n.status, n.message, n.state,
	n.attempts, o.next_attempt, n.error, n.created, n.updated, o.lease_owner`

const notificationFrom = ` FROM notify_outbox n LEFT JOIN outbox o ON o.service = 'notify' AND o.kind = 'send' AND o.msg_key = n.id`

// scanNotification reads notificationColumns and then extra.
func scanNotification(row rowScanner, extra ...any) (Notification, error) {
	var (
		n                      Notification
		status, message, owner sql.NullString
		runID, attempts        int64
		nextAttempt            sql.NullInt64
		created, updated       int64
	)
	dest := []any{&n.ID, &n.Channel, &n.Target, &n.TaskID, &runID, &n.Event, &n.Route, &status, &message, &n.State,
		&attempts, &nextAttempt, &n.Error, &created, &updated, &owner}
	err := row.Scan(append(dest, extra...)...)
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
	n.Created, n.Updated, n.LeaseOwner = fromMS(created), fromMS(updated), owner.String
	if nextAttempt.Valid {
		n.NextAttempt = fromMS(nextAttempt.Int64)
	}
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
// events: one row per event and route that fires, in one statement, and
// the outbox messages of those to send (not those refused), in another.
func (t *txn) queueNotifications(task *queue.TaskState, events []queue.Event, at time.Time) {
	planned := notify.ForEvents(&task.Task, events)
	if len(planned) == 0 {
		return
	}
	// Recorded at the transition's time, and due at once.
	now := ms(at)
	statuses := map[int]string{} // event index → status JSON
	rows := make([]string, 0, len(planned))
	args := make([]any, 0, 13*len(planned))
	send := make([]string, 0, len(planned))
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
		id := newNotificationID()
		if state == notify.StatePending {
			send = append(send, id)
		}
		rows = append(rows, "(?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, 0, NULL, ?, ?, ?, ?)")
		args = append(args, id, p.Route.Channel, truncateText(derivedText(p.Route.Target), 1000), task.TaskID, p.RunID, p.Event,
			truncateText(derivedText(p.Route.Raw), 1000), status, state, reason, now, now, task.Task.Expires.Millis())
	}
	t.send(Statement{Query: `INSERT INTO notify_outbox (id, channel, target, task_id, run_id, event, route, status, message, dedup,
		state, attempts, reserved_at, error, created, updated, expires) VALUES ` + strings.Join(rows, ", "),
		Args: args, What: fmt.Sprintf("recording %d notifications of task %s", len(rows), task.TaskID)})
	t.enqueueKeys(NotifyService, NotifySend, send, dueAtOnce, fromMS(task.Task.Expires.Millis()), at)
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
	expires := now.Add(apiNotificationLifetime)
	_, err := t.exec(ctx, `INSERT INTO notify_outbox (id, channel, target, task_id, run_id, event, route, status, message, dedup,
		state, attempts, reserved_at, error, created, updated, expires)
		VALUES (?, ?, ?, '', -1, '', '', NULL, ?, ?, ?, 0, NULL, '', ?, ?, ?)`,
		id, m.Channel(), m.Target(), string(body), dedup, notify.StatePending, ms(now), ms(now), ms(expires))
	if err != nil {
		return fmt.Errorf("recording a %s notification: %w", m.Channel(), err)
	}
	t.enqueue([]OutboxMessage{{Service: NotifyService, Kind: NotifySend, Key: id, Due: dueAtOnce, Expires: expires}}, now)
	return nil
}

// GetNotification implements NotifyStore.
func (db *DB) GetNotification(ctx context.Context, id string) (*Notification, error) {
	n, err := scanNotification(db.queryRow(ctx, "SELECT "+notificationColumns+notificationFrom+" WHERE n.id = ?", id))
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
			return "SELECT " + notificationColumns + notificationFrom + " WHERE n.task_id = ? AND n.id > ? ORDER BY n.id LIMIT ?",
				[]any{taskID, cursor}, nil
		},
		func(row rowScanner) (Notification, error) { return scanNotification(row) },
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

// ExpireNotifications implements NotifyStore: it deletes the
// notifications whose task (or, from the API, whose week) has expired,
// whatever their state, and their messages (which expire with them).
func (db *DB) ExpireNotifications(ctx context.Context, now time.Time) (int, error) {
	var n int
	err := db.expireRows(ctx, "notifications", func() []expireStep {
		return []expireStep{{&n, "DELETE FROM notify_outbox WHERE expires < ?", []any{ms(now)}},
			expireOutbox(NotifyService, now),
			// A request hash older than the window stops no duplicate.
			{nil, "DELETE FROM notify_dedup WHERE created <= ?", []any{ms(now.Add(-notify.DuplicateWindow))}}}
	})
	return n, err
}
