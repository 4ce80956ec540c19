package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// OutboxStore is the one primitive for work a service owes because of a
// change elsewhere (a task's change, a delivery processed): a message is
// queued in the transaction that makes the change (txn.enqueue), so a
// committed change never lacks it and a rolled-back one never has it; the
// service's duty, on any number of replicas, claims due messages with a
// lease (skipping those others hold), keeps the lease while it works
// (RenewOutbox), and records the outcome only while the claim is still
// its own. A holder that dies holds its messages until its lease ends,
// which renewal lets be short. Each service's messages are deleted with
// its other rows (expireOutbox in its Expire method).
type OutboxStore interface {
	// ClaimOutbox leases up to p.Limit of a service's messages of a kind
	// due at p.Now to p.Owner until p.Now+p.Lease, the longest due first
	// (and of those due at one time, in the order of their keys).
	ClaimOutbox(ctx context.Context, p ClaimOutboxParams) ([]OutboxMessage, error)
	// RenewOutbox moves the lease of the claimed messages to until; it
	// returns how many are still held by their claim.
	RenewOutbox(ctx context.Context, claimed []OutboxMessage, until time.Time) (int, error)
	// FinishOutbox records the outcome of a claim: done, or failed and
	// due again at next (zero next: given up). A message queued again
	// since it was claimed stays due, at once. It reports false, writing
	// nothing, when the claim is no longer the message's (its lease ran
	// out and another holder claimed it).
	FinishOutbox(ctx context.Context, m *OutboxMessage, o OutboxOutcome) (bool, error)
}

// OutboxMessage is one message of the outbox: (Service, Kind, Key) names
// it. Seq counts the times it was queued; Attempts its claims; Owner the
// holder of its lease (set by a claim); State one of the Outbox states
// (set by a read).
type OutboxMessage struct {
	Service, Kind, Key string
	Body               []byte
	Seq                int64
	Attempts           int
	Owner              string
	State              string
	LastError          string
	Created, Expires   time.Time
	// Due is when a queued message is first due (zero: at once).
	Due time.Time
	// Once says queueing the message again changes nothing, even after
	// it was done: a forge comment is posted once, however often the
	// event that asks for it is processed.
	Once bool
}

// ClaimOutboxParams describes ClaimOutbox.
type ClaimOutboxParams struct {
	Service, Kind string
	Owner         string
	Now           time.Time
	Lease         time.Duration
	Limit         int
}

// OutboxOutcome is what became of a claimed message at Now: Done, or
// failed with Error and due again at Next (zero: given up, recorded as
// failed).
type OutboxOutcome struct {
	Done  bool
	Next  time.Time
	Error string
	Now   time.Time
}

// Outbox message states.
const (
	OutboxPending = "pending"
	OutboxDone    = "done"
	OutboxFailed  = "failed"
)

// enqueue queues messages in this transaction, due at once (or at their
// Due). A message already waiting keeps its place (a leased one its
// lease) and takes the newer body; one done or given up is due again;
// one queued Once stays as it is.
func (t *txn) enqueue(msgs []OutboxMessage, now time.Time) {
	for _, m := range msgs {
		due := m.Due
		if due.IsZero() {
			due = now
		}
		conflict := requeue
		if m.Once {
			conflict = "DO NOTHING"
		}
		t.send(Statement{Query: `INSERT INTO outbox (service, kind, msg_key, body, seq, state, attempts, next_attempt, lease_owner,
			last_error, created, updated, expires) VALUES (?, ?, ?, ?, 1, 'pending', 0, ?, '', '', ?, ?, ?)
			ON CONFLICT (service, kind, msg_key) ` + conflict,
			Args: []any{m.Service, m.Kind, m.Key, string(m.Body), ms(due), ms(now), ms(now), ms(m.Expires)},
			What: fmt.Sprintf("queueing %s %s %s", m.Service, m.Kind, m.Key)})
	}
}

// requeue is what queueing a message that exists already does (enqueue).
const requeue = `DO UPDATE SET body = excluded.body, seq = outbox.seq + 1, updated = excluded.updated,
	expires = CASE WHEN excluded.expires > outbox.expires THEN excluded.expires ELSE outbox.expires END,
	next_attempt = CASE WHEN outbox.state = 'pending' AND outbox.lease_owner <> '' THEN outbox.next_attempt ELSE excluded.next_attempt END,
	attempts = CASE WHEN outbox.state = 'pending' THEN outbox.attempts ELSE 0 END,
	state = 'pending'`

// enqueueKeys is enqueue of messages of one service and kind that differ
// only by their (distinct) keys, with an empty body, due at due: one
// statement however many, for a task's transition that notifies many.
func (t *txn) enqueueKeys(service, kind string, keys []string, due, expires, now time.Time) {
	if len(keys) == 0 {
		return
	}
	// One text whatever the number of keys where the dialect takes
	// arrays; VALUES rows otherwise. The WHERE lets SQLite read the
	// ON CONFLICT as the upsert's, not a join's.
	from, keyArgs := "unnest(CAST(? AS TEXT[])) AS v (column1)", []any{keys}
	if !t.db.dialect.Arrays {
		from, keyArgs = "(VALUES "+strings.Repeat("(?), ", len(keys)-1)+"(?)) AS v", make([]any, len(keys))
		for i, k := range keys {
			keyArgs[i] = k
		}
	}
	t.send(Statement{Query: `INSERT INTO outbox (service, kind, msg_key, body, seq, state, attempts, next_attempt, lease_owner,
		last_error, created, updated, expires)
		SELECT CAST(? AS TEXT), CAST(? AS TEXT), v.column1, '', 1, 'pending', 0, CAST(? AS BIGINT), '', '', CAST(? AS BIGINT),
			CAST(? AS BIGINT), CAST(? AS BIGINT) FROM ` + from + ` WHERE true
		ON CONFLICT (service, kind, msg_key) ` + requeue,
		Args: append([]any{service, kind, ms(due), ms(now), ms(now), ms(expires)}, keyArgs...),
		What: fmt.Sprintf("queueing %d %s %s messages", len(keys), service, kind)})
}

// leaseOwner names a claim by its lease's end, for the services whose
// handle on a claim is its lease (a delivery's, a hook's): a message is
// claimed again only once the lease before ran out, so no two claims of
// one message end at the same time.
func leaseOwner(lease time.Time) string { return "lease-" + strconv.FormatInt(ms(lease), 10) }

// heldOutbox is a message as the claim of owner holds it, to finish in
// this transaction; false if that claim no longer holds it.
func (t *txn) heldOutbox(ctx context.Context, service, kind, key, owner string) (*OutboxMessage, bool, error) {
	m := OutboxMessage{Service: service, Kind: kind, Key: key, Owner: owner, State: OutboxPending}
	err := t.queryRow(ctx, `SELECT seq, attempts FROM outbox WHERE service = ? AND kind = ? AND msg_key = ? AND state = 'pending'
		AND lease_owner = ?`+t.db.dialect.LockRow, service, kind, key, owner).Scan(&m.Seq, &m.Attempts)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("finding the claim of %s %s %s: %w", service, kind, key, err)
	}
	return &m, true, nil
}

// getOutbox reads one message; ErrNotFound if there is none.
func (db *DB) getOutbox(ctx context.Context, service, kind, key string) (*OutboxMessage, error) {
	m := OutboxMessage{Service: service, Kind: kind, Key: key}
	var body string
	var created, expires int64
	err := db.queryRow(ctx, `SELECT body, seq, state, attempts, lease_owner, last_error, created, expires FROM outbox
		WHERE service = ? AND kind = ? AND msg_key = ?`, service, kind, key).
		Scan(&body, &m.Seq, &m.State, &m.Attempts, &m.Owner, &m.LastError, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading %s %s %s: %w", service, kind, key, err)
	}
	m.Body, m.Created, m.Expires = []byte(body), fromMS(created), fromMS(expires)
	return &m, nil
}

const outboxDue = "service = ? AND kind = ? AND state = 'pending' AND next_attempt <= ?"

// ClaimOutbox implements OutboxStore. A read looks first, so an idle
// poll is one statement and writes nothing.
func (db *DB) ClaimOutbox(ctx context.Context, p ClaimOutboxParams) ([]OutboxMessage, error) {
	due := []any{p.Service, p.Kind, ms(p.Now)}
	var one int
	err := db.queryRow(ctx, "SELECT 1 FROM outbox WHERE "+outboxDue+" LIMIT 1", due...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("looking for due %s %s messages: %w", p.Service, p.Kind, err)
	}
	var out []OutboxMessage
	err = db.tx(ctx, func(tx *txn) error {
		out = out[:0]
		err := tx.queryEach(ctx, "SELECT msg_key, body, seq, attempts, last_error, created, expires FROM outbox WHERE "+outboxDue+
			" ORDER BY next_attempt, msg_key LIMIT ?"+db.dialect.LockSkip, append(due, p.Limit), func(rows Rows) error {
			for rows.Next() {
				m := OutboxMessage{Service: p.Service, Kind: p.Kind, Owner: p.Owner, State: OutboxPending}
				var body string
				var created, expires int64
				if err := rows.Scan(&m.Key, &body, &m.Seq, &m.Attempts, &m.LastError, &created, &expires); err != nil {
					return err
				}
				m.Body, m.Created, m.Expires = []byte(body), fromMS(created), fromMS(expires)
				m.Attempts++
				out = append(out, m)
			}
			return rows.Err()
		})
		if err != nil || len(out) == 0 {
			return err
		}
		keys := make([]string, len(out))
		for i, m := range out {
			keys[i] = m.Key
		}
		cond, args := db.inList("msg_key", keys)
		tx.send(Statement{Query: "UPDATE outbox SET lease_owner = ?, next_attempt = ?, attempts = attempts + 1, updated = ? WHERE service = ? AND kind = ? AND " + cond,
			Args: append([]any{p.Owner, ms(p.Now.Add(p.Lease)), ms(p.Now), p.Service, p.Kind}, args...),
			What: fmt.Sprintf("leasing %d %s %s messages", len(out), p.Service, p.Kind)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claiming %s %s messages: %w", p.Service, p.Kind, err)
	}
	return out, nil
}

// RenewOutbox implements OutboxStore.
func (db *DB) RenewOutbox(ctx context.Context, claimed []OutboxMessage, until time.Time) (int, error) {
	held := 0
	err := db.tx(ctx, func(tx *txn) error {
		held = 0
		for _, m := range claimed {
			res, err := tx.exec(ctx, `UPDATE outbox SET next_attempt = ? WHERE service = ? AND kind = ? AND msg_key = ?
				AND state = 'pending' AND lease_owner = ? AND attempts = ?`, ms(until), m.Service, m.Kind, m.Key, m.Owner, m.Attempts)
			if err != nil {
				return fmt.Errorf("renewing the lease of %s %s %s: %w", m.Service, m.Kind, m.Key, err)
			}
			held += int(res.affected)
		}
		return nil
	})
	return held, err
}

// FinishOutbox implements OutboxStore.
func (db *DB) FinishOutbox(ctx context.Context, m *OutboxMessage, o OutboxOutcome) (bool, error) {
	done := false
	err := db.tx(ctx, func(tx *txn) error {
		var err error
		done, err = tx.finishOutbox(ctx, m, o)
		return err
	})
	return done, err
}

// finishOutbox is FinishOutbox in this transaction, for a service that
// records what the work did in the same transaction, only while the
// claim is its own.
func (t *txn) finishOutbox(ctx context.Context, m *OutboxMessage, o OutboxOutcome) (bool, error) {
	state, next := OutboxDone, o.Now
	switch {
	case o.Done:
	case o.Next.IsZero():
		state = OutboxFailed
	default:
		state, next = OutboxPending, o.Next
	}
	// A newer version (seq moved on) is due at once, whatever became of
	// this one. The error is someone else's text (a forge's answer): a
	// NUL or bytes that are not UTF-8 are recorded as U+FFFD, so that
	// recording a failure cannot itself fail.
	res, err := t.exec(ctx, `UPDATE outbox SET state = CASE WHEN seq = ? THEN ? ELSE 'pending' END,
			next_attempt = CASE WHEN seq = ? THEN CAST(? AS BIGINT) ELSE CAST(? AS BIGINT) END, attempts = CASE WHEN seq = ? THEN attempts ELSE 0 END,
			lease_owner = '', last_error = ?, updated = ?
			WHERE service = ? AND kind = ? AND msg_key = ? AND state = 'pending' AND lease_owner = ? AND attempts = ?`,
		m.Seq, state, m.Seq, ms(next), ms(o.Now), m.Seq, reportText(truncateText(o.Error, 1000)), ms(o.Now),
		m.Service, m.Kind, m.Key, m.Owner, m.Attempts)
	if err != nil {
		return false, fmt.Errorf("recording %s %s %s: %w", m.Service, m.Kind, m.Key, err)
	}
	return res.affected == 1, nil
}

// expireOutbox is the step of a service's expiry that deletes its
// messages: those whose expiry passed, whatever their state.
func expireOutbox(service string, now time.Time) expireStep {
	return expireStep{nil, "DELETE FROM outbox WHERE service = ? AND expires < ?", []any{service, ms(now)}}
}

// KeepLeases calls renew every interval, from another goroutine, until
// the returned stop is called (stop waits for a renewal under way): a
// duty holds what it claimed for as long as it works on it, with a lease
// a few intervals long, so a replica that dies holds it only that long.
func KeepLeases(ctx context.Context, interval time.Duration, renew func(ctx context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = renew(ctx) // a failed renewal is tried at the next tick; the lease covers a few
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
