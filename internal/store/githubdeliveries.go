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

const githubDeliveryColumns = "host, delivery_id, forge, event, body, received, state, attempts, outcome, error, digest, replay_of"

// selectGithubDeliveries reads deliveries (d) with the attempts their
// outbox message (o) has counted: a claim counts one there, in the
// claim's own transaction, so a delivery being processed, or whose
// processor died, shows the claims made so far without a second write.
// A replay has no message (its own count, 0, stands).
const selectGithubDeliveries = `SELECT d.host, d.delivery_id, d.forge, d.event, d.body, d.received, d.state,
	COALESCE(o.attempts, d.attempts), d.outcome, d.error, d.digest, d.replay_of
	FROM github_deliveries d LEFT JOIN outbox o
	ON o.service = '` + GithubService + `' AND o.kind = '` + GithubDeliveryKind + `' AND o.msg_key = d.host || ' ' || d.delivery_id`

func scanGithubDelivery(row rowScanner) (*GithubDelivery, error) {
	var (
		d        GithubDelivery
		body     string
		received int64
	)
	if err := row.Scan(&d.Host, &d.DeliveryID, &d.Forge, &d.Event, &body, &received, &d.State, &d.Attempts, &d.Outcome, &d.Error, &d.Digest, &d.ReplayOf); err != nil {
		return nil, err
	}
	d.Body, d.Received = []byte(body), fromMS(received)
	return &d, nil
}

// deliveryMessage is the outbox message that has a stored delivery
// processed: its key names the delivery, its body is empty (the
// delivery's row holds it).
func deliveryMessage(d *GithubDelivery) OutboxMessage {
	return OutboxMessage{Service: GithubService, Kind: GithubDeliveryKind, Key: githubSendKey(d.Host, d.DeliveryID),
		Due: d.Received, Expires: d.Received.Add(GithubRetention)}
}

// AddGithubDelivery implements GithubStore. A delivery whose digest an
// earlier delivery of the host has (a replay: the same body under a new
// delivery id) is stored as done, naming the earlier one in ReplayOf,
// and not added; the unique index on (host, digest) decides between
// replays that arrive at once.
func (db *DB) AddGithubDelivery(ctx context.Context, d *GithubDelivery) (bool, error) {
	added := false
	err := db.tx(ctx, func(tx *txn) error {
		added, d.ReplayOf = false, ""
		res, err := tx.exec(ctx, "INSERT INTO github_deliveries ("+githubDeliveryColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, 0, '', '', ?, '')
			ON CONFLICT DO NOTHING`,
			d.Host, d.DeliveryID, d.Forge, d.Event, string(d.Body), ms(d.Received), DeliveryPending, d.Digest)
		if err != nil {
			return fmt.Errorf("storing delivery %s from %s: %w", d.DeliveryID, d.Host, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			added = true
			tx.enqueue([]OutboxMessage{deliveryMessage(d)}, d.Received)
			return nil
		}
		var one int
		err = tx.queryRow(ctx, "SELECT 1 FROM github_deliveries WHERE host = ? AND delivery_id = ?", d.Host, d.DeliveryID).Scan(&one)
		if err == nil {
			return nil // a redelivery
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("looking up delivery %s from %s: %w", d.DeliveryID, d.Host, err)
		}
		var first string
		if err := tx.queryRow(ctx, "SELECT delivery_id FROM github_deliveries WHERE host = ? AND digest = ? AND replay_of = ''", d.Host, d.Digest).Scan(&first); err != nil {
			return fmt.Errorf("finding the delivery %s from %s replays: %w", d.DeliveryID, d.Host, err)
		}
		_, err = tx.exec(ctx, "INSERT INTO github_deliveries ("+githubDeliveryColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, '', ?, ?)`,
			d.Host, d.DeliveryID, d.Forge, d.Event, string(d.Body), ms(d.Received), DeliveryDone,
			"a replay of delivery "+first+" (the same event): nothing done again", d.Digest, first)
		if err != nil {
			return fmt.Errorf("storing replay %s from %s: %w", d.DeliveryID, d.Host, err)
		}
		d.ReplayOf = first
		return nil
	})
	return added, err
}

// GetGithubDelivery implements GithubStore.
func (db *DB) GetGithubDelivery(ctx context.Context, host, deliveryID string) (*GithubDelivery, error) {
	d, err := scanGithubDelivery(db.queryRow(ctx, selectGithubDeliveries+" WHERE d.host = ? AND d.delivery_id = ?", host, deliveryID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading delivery %s from %s: %w", deliveryID, host, err)
	}
	return d, nil
}

// ClaimGithubDelivery implements GithubStore: the claim is one of the
// outbox (kind GithubDeliveryKind), whose idle poll is one read. The
// claim's transaction is the only write: the attempts it counts are read
// from the message (selectGithubDeliveries).
func (db *DB) ClaimGithubDelivery(ctx context.Context, now, leaseUntil time.Time) (*GithubDelivery, error) {
	for {
		claimed, err := db.ClaimOutbox(ctx, ClaimOutboxParams{Service: GithubService, Kind: GithubDeliveryKind,
			Owner: leaseOwner(leaseUntil), Now: now, Lease: leaseUntil.Sub(now), Limit: 1})
		if err != nil || len(claimed) == 0 {
			return nil, err
		}
		m := &claimed[0]
		host, id, _ := strings.Cut(m.Key, " ")
		d, err := db.GetGithubDelivery(ctx, host, id)
		if errors.Is(err, ErrNotFound) || (err == nil && d.State != DeliveryPending) {
			// Nothing left to do (a delivery expired or recorded
			// already): the message is done.
			if _, err := db.FinishOutbox(ctx, m, OutboxOutcome{Done: true, Now: now}); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		d.Attempts, d.ClaimedUntil = m.Attempts, leaseUntil
		return d, nil
	}
}

// FinishGithubDelivery implements GithubStore.
func (db *DB) FinishGithubDelivery(ctx context.Context, p FinishGithubDeliveryParams) error {
	return db.tx(ctx, func(tx *txn) error {
		m, held, err := tx.heldOutbox(ctx, GithubService, GithubDeliveryKind, githubSendKey(p.Host, p.DeliveryID), leaseOwner(p.Lease))
		if err == nil && held {
			held, err = tx.finishOutbox(ctx, m, OutboxOutcome{Done: true, Now: p.Now})
		}
		if err != nil {
			return err
		}
		if !held {
			return ErrLeaseLost
		}
		res, err := tx.exec(ctx, `UPDATE github_deliveries SET state = ?, outcome = ?, error = ?, attempts = ?
			WHERE host = ? AND delivery_id = ? AND state = 'pending'`,
			p.State, reportText(p.Outcome), reportText(p.Error), m.Attempts, p.Host, p.DeliveryID)
		if err != nil {
			return fmt.Errorf("finishing delivery %s: %w", p.DeliveryID, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return ErrLeaseLost
		}
		for _, b := range p.Builds {
			if _, err := tx.exec(ctx, "INSERT INTO github_builds ("+githubBuildColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (task_group_id) DO NOTHING`, githubBuildArgs(&b)...); err != nil {
				return fmt.Errorf("recording build %s: %w", b.TaskGroupID, err)
			}
			// Its tasks may have changed before the build was recorded
			// (the reporter found no build then): it is looked at once.
			tx.enqueue([]OutboxMessage{groupChanged(b.TaskGroupID, p.Now)}, p.Now)
		}
		return tx.queueOutbox(p.Outbox, p.Now)
	})
}

// RetryGithubDelivery implements GithubStore.
func (db *DB) RetryGithubDelivery(ctx context.Context, p RetryGithubDeliveryParams) error {
	return db.tx(ctx, func(tx *txn) error {
		m, held, err := tx.heldOutbox(ctx, GithubService, GithubDeliveryKind, githubSendKey(p.Host, p.DeliveryID), leaseOwner(p.Lease))
		if err != nil || !held {
			return err
		}
		// The outbox's back-off time is the delivery's: the caller's.
		if _, err := tx.finishOutbox(ctx, m, OutboxOutcome{Next: p.Next, Error: p.Error, Now: p.Next}); err != nil {
			return err
		}
		_, err = tx.exec(ctx, "UPDATE github_deliveries SET error = ? WHERE host = ? AND delivery_id = ? AND state = 'pending'",
			reportText(p.Error), p.Host, p.DeliveryID)
		if err != nil {
			return fmt.Errorf("releasing delivery %s: %w", p.DeliveryID, err)
		}
		return nil
	})
}

// ListFailedGithubDeliveries implements GithubStore: the deliveries of a
// host ("" every host) whose processing ended in an error or is being
// tried again after one, newest first.
func (db *DB) ListFailedGithubDeliveries(ctx context.Context, host string, page Page) ([]GithubDelivery, string, error) {
	out, next, err := listPageFields(ctx, db, page, 2, func(cursor string) (string, []any, error) {
		conds, args := []string{"d.error <> ''"}, []any{}
		if cursor != "" {
			at, id, _ := strings.Cut(cursor, "\x00")
			received, err := strconv.ParseInt(at, 10, 64)
			if err != nil {
				return "", nil, ErrBadContinuationToken
			}
			conds = append(conds, "(d.received < ? OR (d.received = ? AND d.delivery_id < ?))")
			args = append(args, received, received, id)
		}
		if host != "" {
			conds, args = append(conds, "d.host = ?"), append(args, host)
		}
		return selectGithubDeliveries + " WHERE " + strings.Join(conds, " AND ") +
			" ORDER BY d.received DESC, d.delivery_id DESC LIMIT ?", args, nil
	}, func(row rowScanner) (GithubDelivery, error) {
		d, err := scanGithubDelivery(row)
		if err != nil {
			return GithubDelivery{}, err
		}
		return *d, nil
	}, func(d GithubDelivery) string { return strconv.FormatInt(ms(d.Received), 10) + "\x00" + d.DeliveryID })
	if err != nil {
		return nil, "", fmt.Errorf("listing failed deliveries: %w", err)
	}
	return out, next, nil
}
