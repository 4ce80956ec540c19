package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hopper-ci/hopper/internal/notify"
)

// ClaimNotifications implements NotifyStore: the claim is one of the
// outbox (ClaimOutbox: leased, skipping what others hold, oldest first);
// a second transaction reads the claimed notifications and applies the
// denylist and the rate limit. A claim whose notifications were all
// settled so claims again, so that none returned means none due.
func (db *DB) ClaimNotifications(ctx context.Context, p ClaimNotificationsParams) ([]Notification, error) {
	for {
		claimed, err := db.ClaimOutbox(ctx, ClaimOutboxParams{Service: NotifyService, Kind: NotifySend, Owner: p.Owner,
			Now: p.Now, Lease: p.Lease, Limit: p.Limit})
		if err != nil || len(claimed) == 0 {
			return nil, err
		}
		var out []Notification
		err = db.tx(ctx, func(tx *txn) error {
			var err error
			out, err = tx.claimedNotifications(ctx, claimed, p)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("claiming notifications: %w", err)
		}
		if len(out) > 0 {
			return out, nil
		}
	}
}

// claimedNotifications reads the notifications of claimed messages whose
// claim still holds (locking the messages, so it holds till the
// transaction ends), settles those denied or rate-limited and returns
// the rest, in the claim's order. A message whose notification is gone
// or no longer pending is done.
func (t *txn) claimedNotifications(ctx context.Context, claimed []OutboxMessage, p ClaimNotificationsParams) ([]Notification, error) {
	keys := make([]string, len(claimed))
	for i, m := range claimed {
		keys[i] = m.Key
	}
	cond, args := t.db.inList("n.id", keys)
	found := map[string]Notification{}
	err := t.queryEach(ctx, "SELECT "+notificationColumns+`, CASE WHEN n.reserved_at IS NULL THEN 0 ELSE 1 END, o.attempts FROM notify_outbox n
		JOIN outbox o ON o.service = ? AND o.kind = ? AND o.msg_key = n.id
		WHERE o.state = 'pending' AND o.lease_owner = ? AND `+cond+" ORDER BY n.id"+t.db.dialect.LockRow,
		append([]any{NotifyService, NotifySend, p.Owner}, args...), func(rows Rows) error {
			for rows.Next() {
				var reserved, attempts int
				n, err := scanNotification(rows, &reserved, &attempts)
				if err != nil {
					return err
				}
				n.reserved, n.Attempts = reserved == 1, attempts
				found[n.ID] = n
			}
			return rows.Err()
		})
	if err != nil {
		return nil, fmt.Errorf("reading the claimed notifications: %w", err)
	}
	var due []Notification
	held := map[string]*OutboxMessage{}
	for i := range claimed {
		m := &claimed[i]
		held[m.Key] = m
		n, ok := found[m.Key]
		switch {
		case ok && n.Attempts != m.Attempts:
			// Claimed again since (this claim's lease ran out): not ours.
		case ok && n.State == notify.StatePending:
			n.LeaseOwner, n.NextAttempt = p.Owner, p.Now.Add(p.Lease)
			due = append(due, n)
		default:
			if _, err := t.finishSend(ctx, m, OutboxOutcome{Done: true, Now: p.Now}); err != nil {
				return nil, err
			}
		}
	}
	if len(due) == 0 {
		return nil, nil
	}
	denied, err := t.denylisted(ctx, due)
	if err != nil {
		return nil, err
	}
	limited, err := t.rateLimited(ctx, due, denied, p)
	if err != nil {
		return nil, err
	}
	var out []Notification
	var sending []string
	for _, n := range due {
		state, reason := "", ""
		switch {
		case denied[n.ID]:
			state, reason = notify.StateDenied, "the address is on the denylist"
		case limited[n.ID]:
			state, reason = notify.StateRateLimited, fmt.Sprintf("more than %d messages to %s within %s", p.RateLimit, n.Target, p.RateWindow)
		default:
			sending = append(sending, n.ID)
			out = append(out, n)
			continue
		}
		if _, err := t.finishSend(ctx, held[n.ID], OutboxOutcome{Done: true, Now: p.Now}); err != nil {
			return nil, err
		}
		t.send(Statement{Query: "UPDATE notify_outbox SET state = ?, error = ?, attempts = ?, updated = ? WHERE id = ?",
			Args: []any{state, reason, n.Attempts, ms(p.Now), n.ID}, What: "settling notification " + n.ID})
	}
	if len(sending) > 0 {
		// Counted against their rate limits from their first claim; the
		// attempts are their messages' claims.
		cond, args := t.db.inList("id", sending)
		t.send(Statement{Query: `UPDATE notify_outbox SET reserved_at = COALESCE(reserved_at, ?), updated = ?,
			attempts = (SELECT o.attempts FROM outbox o WHERE o.service = ? AND o.kind = ? AND o.msg_key = notify_outbox.id) WHERE ` + cond,
			Args: append([]any{ms(p.Now), ms(p.Now), NotifyService, NotifySend}, args...), What: "recording the claims of notifications"})
	}
	return out, nil
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

// rateLimited returns the ids of email notifications not yet counted
// against their address's rate limit (claimed for the first time) beyond
// it. Each address's lock row is taken (in address order, so claims never
// deadlock) before its recent messages are counted: two replicas claiming
// for one address decide one after the other, and the second counts what
// the first reserved.
func (t *txn) rateLimited(ctx context.Context, due []Notification, denied map[string]bool, p ClaimNotificationsParams) (map[string]bool, error) {
	if p.RateLimit <= 0 {
		return nil, nil
	}
	byAddress := map[string][]string{}
	for _, n := range due {
		if n.Channel == notify.ChannelEmail && !n.reserved && !denied[n.ID] {
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

// FinishNotification implements NotifyStore: the message's outcome and
// the notification's in one transaction, while the claim is its own.
func (db *DB) FinishNotification(ctx context.Context, n *Notification, o notify.Outcome, now time.Time) (bool, error) {
	outcome := OutboxOutcome{Error: o.Error, Now: now}
	switch o.State {
	case notify.StateSent:
		outcome.Done = true
	case notify.StatePending:
		outcome.Next = o.NextAttempt
		if outcome.Next.IsZero() {
			outcome.Next = now
		}
	}
	var done bool
	err := db.tx(ctx, func(tx *txn) error {
		m, held, err := tx.heldOutbox(ctx, NotifyService, NotifySend, n.ID, n.LeaseOwner)
		if err != nil || !held || m.Attempts != n.Attempts {
			done = false
			return err
		}
		if done, err = tx.finishSend(ctx, m, outcome); err != nil || !done {
			return err
		}
		_, err = tx.exec(ctx, "UPDATE notify_outbox SET state = ?, error = ?, attempts = ?, updated = ? WHERE id = ? AND state = 'pending'",
			o.State, reportText(o.Error), n.Attempts, ms(now), n.ID)
		if err != nil {
			return fmt.Errorf("recording the outcome of notification %s: %w", n.ID, err)
		}
		return nil
	})
	return done, err
}

// finishSend records the outcome of a claim of a notification's message
// and, once nothing more is owed (sent, refused or given up), deletes the
// message: the notification's record is its notify_outbox row, so the
// message would otherwise wait beside it until the task expires (a year,
// often) only to say it is done. A message still pending (to be retried)
// stays. A claim that no longer holds the message deletes nothing.
func (t *txn) finishSend(ctx context.Context, m *OutboxMessage, o OutboxOutcome) (bool, error) {
	done, err := t.finishOutbox(ctx, m, o)
	if err != nil || !done {
		return done, err
	}
	t.send(Statement{Query: "DELETE FROM outbox WHERE service = ? AND kind = ? AND msg_key = ? AND state <> 'pending'",
		Args: []any{m.Service, m.Kind, m.Key}, What: "deleting the message of notification " + m.Key})
	return true, nil
}

// RenewNotifications implements NotifyStore.
func (db *DB) RenewNotifications(ctx context.Context, claimed []Notification, until time.Time) (int, error) {
	msgs := make([]OutboxMessage, len(claimed))
	for i := range claimed {
		msgs[i] = claimed[i].message()
	}
	return db.RenewOutbox(ctx, msgs, until)
}
