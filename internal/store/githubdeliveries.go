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

const githubDeliveryColumns = "host, delivery_id, forge, event, body, received, state, attempts, next_attempt, claimed_until, outcome, error, digest, replay_of"

func scanGithubDelivery(row rowScanner) (*GithubDelivery, error) {
	var (
		d                       GithubDelivery
		body                    string
		received, next, claimed int64
	)
	if err := row.Scan(&d.Host, &d.DeliveryID, &d.Forge, &d.Event, &body, &received, &d.State, &d.Attempts, &next, &claimed, &d.Outcome, &d.Error, &d.Digest, &d.ReplayOf); err != nil {
		return nil, err
	}
	d.Body = []byte(body)
	d.Received, d.NextAttempt, d.ClaimedUntil = fromMS(received), fromMS(next), fromMS(claimed)
	return &d, nil
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
		res, err := tx.exec(ctx, "INSERT INTO github_deliveries ("+githubDeliveryColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, 0, '', '', ?, '')
			ON CONFLICT DO NOTHING`,
			d.Host, d.DeliveryID, d.Forge, d.Event, string(d.Body), ms(d.Received), DeliveryPending, ms(d.Received), d.Digest)
		if err != nil {
			return fmt.Errorf("storing delivery %s from %s: %w", d.DeliveryID, d.Host, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			added = true
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
		_, err = tx.exec(ctx, "INSERT INTO github_deliveries ("+githubDeliveryColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, 0, ?, '', ?, ?)`,
			d.Host, d.DeliveryID, d.Forge, d.Event, string(d.Body), ms(d.Received), DeliveryDone, ms(d.Received),
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
	d, err := scanGithubDelivery(db.queryRow(ctx, "SELECT "+githubDeliveryColumns+" FROM github_deliveries WHERE host = ? AND delivery_id = ?", host, deliveryID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading delivery %s from %s: %w", deliveryID, host, err)
	}
	return d, nil
}

// ClaimGithubDelivery implements GithubStore. A read looks first, so an
// idle poll writes nothing.
func (db *DB) ClaimGithubDelivery(ctx context.Context, now, leaseUntil time.Time) (*GithubDelivery, error) {
	const due = "state = 'pending' AND next_attempt <= ? AND claimed_until <= ?"
	var one int
	err := db.queryRow(ctx, "SELECT 1 FROM github_deliveries WHERE "+due+" LIMIT 1", ms(now), ms(now)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("looking for a due delivery: %w", err)
	}
	var d *GithubDelivery
	err = db.tx(ctx, func(tx *txn) error {
		var err error
		d, err = scanGithubDelivery(tx.queryRow(ctx, "SELECT "+githubDeliveryColumns+" FROM github_deliveries WHERE "+due+
			" ORDER BY next_attempt, received LIMIT 1"+db.dialect.LockSkip, ms(now), ms(now)))
		if errors.Is(err, sql.ErrNoRows) {
			d = nil
			return nil
		}
		if err != nil {
			return fmt.Errorf("finding a due delivery: %w", err)
		}
		d.ClaimedUntil = leaseUntil
		d.Attempts++
		_, err = tx.exec(ctx, "UPDATE github_deliveries SET claimed_until = ?, attempts = attempts + 1 WHERE host = ? AND delivery_id = ?",
			ms(leaseUntil), d.Host, d.DeliveryID)
		if err != nil {
			return fmt.Errorf("claiming delivery %s: %w", d.DeliveryID, err)
		}
		return nil
	})
	return d, err
}

// FinishGithubDelivery implements GithubStore.
func (db *DB) FinishGithubDelivery(ctx context.Context, p FinishGithubDeliveryParams) error {
	return db.tx(ctx, func(tx *txn) error {
		res, err := tx.exec(ctx, `UPDATE github_deliveries SET state = ?, outcome = ?, error = ?, claimed_until = 0
			WHERE host = ? AND delivery_id = ? AND claimed_until = ? AND state = 'pending'`,
			p.State, reportText(p.Outcome), reportText(p.Error), p.Host, p.DeliveryID, ms(p.Lease))
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
		_, err := tx.exec(ctx, `UPDATE github_deliveries SET claimed_until = 0, next_attempt = ?, error = ?
			WHERE host = ? AND delivery_id = ? AND claimed_until = ? AND state = 'pending'`, ms(p.Next), reportText(p.Error), p.Host, p.DeliveryID, ms(p.Lease))
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
		conds, args := []string{"error <> ''"}, []any{}
		if cursor != "" {
			at, id, _ := strings.Cut(cursor, "\x00")
			received, err := strconv.ParseInt(at, 10, 64)
			if err != nil {
				return "", nil, ErrBadContinuationToken
			}
			conds = append(conds, "(received < ? OR (received = ? AND delivery_id < ?))")
			args = append(args, received, received, id)
		}
		if host != "" {
			conds, args = append(conds, "host = ?"), append(args, host)
		}
		return "SELECT " + githubDeliveryColumns + " FROM github_deliveries WHERE " + strings.Join(conds, " AND ") +
			" ORDER BY received DESC, delivery_id DESC LIMIT ?", args, nil
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
