package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/github"
	"github.com/hopper-ci/hopper/internal/queue"
)

// GithubStore persists the forge integration (the github service):
// webhook deliveries, stored before they are acknowledged and processed
// from here; the builds (task groups) events created; the outbox of
// statuses and comments to send to the forge; and where the GitHub App is
// installed.
type GithubStore interface {
	// AddGithubDelivery stores a delivery; false when the forge's
	// delivery id is already stored (a redelivery), which changes nothing,
	// or when an earlier delivery of the host has its Digest (a replay:
	// it is stored as done, d.ReplayOf naming the earlier one).
	AddGithubDelivery(ctx context.Context, d *GithubDelivery) (bool, error)
	// GetGithubDelivery loads one delivery.
	GetGithubDelivery(ctx context.Context, host, deliveryID string) (*GithubDelivery, error)
	// ListFailedGithubDeliveries lists the deliveries of a host ("":
	// every host) with an error (failed, done with an error their
	// repository's users were shown, or pending a retry), newest first.
	ListFailedGithubDeliveries(ctx context.Context, host string, page Page) ([]GithubDelivery, string, error)
	// ClaimGithubDelivery leases one pending delivery due at now until
	// leaseUntil, the oldest first; nil when none is due. Each due
	// delivery goes to one caller at a time; a lease that runs out (a
	// killed replica) makes it due again.
	ClaimGithubDelivery(ctx context.Context, now, leaseUntil time.Time) (*GithubDelivery, error)
	// FinishGithubDelivery records a processed delivery with the builds
	// and outbox entries it led to, in one transaction, if the caller
	// still holds its lease (ErrLeaseLost otherwise: nothing is written).
	FinishGithubDelivery(ctx context.Context, p FinishGithubDeliveryParams) error
	// RetryGithubDelivery gives up a lease after a failure that may pass
	// (the forge's API did not answer): the delivery is due again at next.
	RetryGithubDelivery(ctx context.Context, p RetryGithubDeliveryParams) error

	// PutGithubInstallation records (id > 0) or forgets (id 0) the App's
	// installation for an owner.
	PutGithubInstallation(ctx context.Context, host, owner string, id int64) error
	// GetGithubInstallation returns an owner's installation id (0 if none).
	GetGithubInstallation(ctx context.Context, host, owner string) (int64, error)

	// ListGithubBuilds lists builds, newest first.
	ListGithubBuilds(ctx context.Context, f GithubBuildFilter, page Page) ([]GithubBuild, string, error)
	// GetGithubBuild loads the build of a task group.
	GetGithubBuild(ctx context.Context, taskGroupID string) (*GithubBuild, error)
	// AdvanceGithubBuild moves a build to state, if it is in one of from,
	// and queues status (if not nil) in the same transaction; it reports
	// whether the build moved.
	AdvanceGithubBuild(ctx context.Context, p AdvanceGithubBuildParams) (bool, error)

	// QueueGithubOutbox queues entries (see GithubOutboxEntry.Key).
	QueueGithubOutbox(ctx context.Context, entries []GithubOutboxEntry) error
	// ClaimGithubOutbox leases up to limit entries due at now.
	ClaimGithubOutbox(ctx context.Context, now, leaseUntil time.Time, limit int) ([]GithubOutboxEntry, error)
	// FinishGithubOutbox records a send: sent, or failed with the next
	// attempt's time (zero: given up). An entry whose body changed since
	// it was claimed (Seq) stays due, to send its newer body.
	FinishGithubOutbox(ctx context.Context, p FinishGithubOutboxParams) error
	// GetGithubOutbox loads an entry by key.
	GetGithubOutbox(ctx context.Context, host, key string) (*GithubOutboxEntry, error)

	// ExpireGithubRecords deletes the deliveries processed and the
	// outbox entries sent more than GithubRetention before now; it says
	// how many deliveries.
	ExpireGithubRecords(ctx context.Context, now time.Time) (int, error)
}

// ErrLeaseLost is returned when a lease ran out and another caller may
// have taken the work.
var ErrLeaseLost = errors.New("lease lost")

// Delivery states.
const (
	DeliveryPending = "pending"
	DeliveryDone    = "done"
	DeliveryFailed  = "failed"
)

// GithubDelivery is a stored webhook delivery.
type GithubDelivery struct {
	Host, DeliveryID string
	// Forge is the forge's kind ("github", "gitea"); Event the coarse
	// event name.
	Forge, Event string
	Body         []byte
	Received     time.Time
	State        string
	Attempts     int
	NextAttempt  time.Time
	ClaimedUntil time.Time
	// Outcome says what processing did (for people); Error why it failed.
	Outcome, Error string
	// Digest identifies the delivery's event and body ("": not compared):
	// a forge's replay (Gitea's Replay and Test delivery) resends them
	// under a new delivery id. ReplayOf is the delivery it replays.
	Digest, ReplayOf string
}

// RetryGithubDeliveryParams describes RetryGithubDelivery: the lease
// given up, when the delivery is due again, and the error that made it
// fail.
type RetryGithubDeliveryParams struct {
	Host, DeliveryID string
	Lease, Next      time.Time
	Error            string
}

// AdvanceGithubBuildParams describes AdvanceGithubBuild: the build moves
// to State if it is in one of From, and Status (if not nil) is queued in
// the same transaction.
type AdvanceGithubBuildParams struct {
	TaskGroupID string
	From        []string
	State       string
	Now         time.Time
	Status      *GithubOutboxEntry
}

// FinishGithubOutboxParams describes FinishGithubOutbox: entry ID as
// claimed at Seq was Sent, or failed with Error and is due again at Next
// (zero: given up).
type FinishGithubOutboxParams struct {
	ID, Seq int64
	Sent    bool
	Next    time.Time
	Error   string
}

// FinishGithubDeliveryParams end a claimed delivery.
type FinishGithubDeliveryParams struct {
	Host, DeliveryID string
	Lease            time.Time
	State            string
	Outcome, Error   string
	Now              time.Time
	Builds           []GithubBuild
	Outbox           []GithubOutboxEntry
}

// GithubBuild is a task group an event created.
type GithubBuild struct {
	TaskGroupID                    string
	Host, Organization, Repository string
	SHA, State, EventType, EventID string
	InstallationID                 int64
	PullRequestNumber              int
	Reporting                      string
	Created, Updated               time.Time
}

// GithubBuildFilter narrows ListGithubBuilds; empty fields match all.
type GithubBuildFilter struct {
	Host, Organization, Repository, SHA, State string
	PullRequestNumber                          int
}

// GithubOutboxEntry is a status or comment to send to a forge.
type GithubOutboxEntry struct {
	ID int64
	// Key identifies the entry within its host: entries with the same key
	// are one message. A status's key names its build, and queueing it
	// again replaces the body (the newest state is what is sent); a
	// comment's key is a digest of its target and text, and queueing it
	// again does nothing, so an exact duplicate is never posted twice,
	// across restarts and replicas.
	Host, Key string
	// Kind is "status", "comment" or "reaction"; Replace says a queued
	// body replaces the one stored under the key.
	Kind    string
	Replace bool
	Owner   string
	Repo    string
	// Target is the commit SHA of a status, the issue number of a
	// comment, the comment id of a reaction.
	Target         string
	InstallationID int64
	Body           []byte
	Seq            int64
	State          string
	Attempts       int
	NextAttempt    time.Time
	LastError      string
	Created        time.Time
}

// GithubService names the forge integration's messages in the outbox;
// GithubGroupChanged is the kind of message that asks its reporter to
// look at a build's task group again (its key is the taskGroupId),
// queued by every change of a task of a forge build (forgeReported) and
// when a build is recorded.
const (
	GithubService      = "github"
	GithubGroupChanged = "group"
)

// forgeReported says whether a task's changes are reported to a forge:
// it is in a build's task group, whose tasks all carry the forge
// integration's schedulerId (a group's tasks share one).
func forgeReported(def *queue.Task) bool { return def.SchedulerID == github.SchedulerID }

// groupChanged is the message that asks the forge reporter to look at a
// task group.
func groupChanged(taskGroupID string, now time.Time) OutboxMessage {
	return OutboxMessage{Service: GithubService, Kind: GithubGroupChanged, Key: taskGroupID, Expires: now.Add(GithubRetention)}
}

// GithubRetention is how long processed deliveries and sent (or given
// up) forge messages are kept; builds stay as long as their repository's
// history is wanted, as in Taskcluster.
const GithubRetention = 30 * 24 * time.Hour

// ExpireGithubRecords implements GithubStore.
func (db *DB) ExpireGithubRecords(ctx context.Context, now time.Time) (int, error) {
	var n int
	cutoff := ms(now.Add(-GithubRetention))
	err := db.expireRows(ctx, "forge deliveries", func() []expireStep {
		return []expireStep{
			{&n, "DELETE FROM github_deliveries WHERE state <> 'pending' AND received < ?", []any{cutoff}},
			{nil, "DELETE FROM github_outbox WHERE state <> 'pending' AND created < ?", []any{cutoff}},
			expireOutbox(GithubService, now),
		}
	})
	return n, err
}

// PutGithubInstallation implements GithubStore.
func (db *DB) PutGithubInstallation(ctx context.Context, host, owner string, id int64) error {
	return db.tx(ctx, func(tx *txn) error {
		var err error
		if id == 0 {
			_, err = tx.exec(ctx, "DELETE FROM github_installations WHERE host = ? AND owner = ?", host, owner)
		} else {
			_, err = tx.exec(ctx, `INSERT INTO github_installations (host, owner, installation_id) VALUES (?, ?, ?)
				ON CONFLICT (host, owner) DO UPDATE SET installation_id = excluded.installation_id`, host, owner, id)
		}
		if err != nil {
			return fmt.Errorf("recording the installation for %s on %s: %w", owner, host, err)
		}
		return nil
	})
}

// GetGithubInstallation implements GithubStore.
func (db *DB) GetGithubInstallation(ctx context.Context, host, owner string) (int64, error) {
	var id int64
	err := db.queryRow(ctx, "SELECT installation_id FROM github_installations WHERE host = ? AND owner = ?", host, owner).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("loading the installation for %s on %s: %w", owner, host, err)
	}
	return id, nil
}

const githubBuildColumns = "task_group_id, host, organization, repository, sha, state, event_type, event_id, installation_id, pull_request_number, reporting, created, updated"

func githubBuildArgs(b *GithubBuild) []any {
	return []any{b.TaskGroupID, b.Host, b.Organization, b.Repository, b.SHA, b.State, b.EventType, b.EventID,
		b.InstallationID, b.PullRequestNumber, b.Reporting, ms(b.Created), ms(b.Updated)}
}

func scanGithubBuild(row rowScanner) (GithubBuild, error) {
	var (
		b                GithubBuild
		created, updated int64
	)
	err := row.Scan(&b.TaskGroupID, &b.Host, &b.Organization, &b.Repository, &b.SHA, &b.State, &b.EventType, &b.EventID,
		&b.InstallationID, &b.PullRequestNumber, &b.Reporting, &created, &updated)
	b.Created, b.Updated = fromMS(created), fromMS(updated)
	return b, err
}

// ListGithubBuilds implements GithubStore: newest first, by an id that
// grows with each insert.
func (db *DB) ListGithubBuilds(ctx context.Context, f GithubBuildFilter, page Page) ([]GithubBuild, string, error) {
	type numbered struct {
		GithubBuild
		seq int64
	}
	return mapBuilds(listPage(ctx, db, page, func(cursor string) (string, []any, error) {
		before := int64(1<<63 - 1)
		if cursor != "" {
			var err error
			if before, err = strconv.ParseInt(cursor, 10, 64); err != nil {
				return "", nil, ErrBadContinuationToken
			}
		}
		conds, args := []string{"seq < ?"}, []any{before}
		for _, c := range []struct {
			col, val string
		}{{"host", f.Host}, {"organization", f.Organization}, {"repository", f.Repository}, {"sha", f.SHA}, {"state", f.State}} {
			if c.val != "" {
				conds, args = append(conds, c.col+" = ?"), append(args, c.val)
			}
		}
		if f.PullRequestNumber != 0 {
			conds, args = append(conds, "pull_request_number = ?"), append(args, f.PullRequestNumber)
		}
		return "SELECT seq, " + githubBuildColumns + " FROM github_builds WHERE " + strings.Join(conds, " AND ") + " ORDER BY seq DESC LIMIT ?", args, nil
	}, func(row rowScanner) (numbered, error) {
		var n numbered
		var created, updated int64
		err := row.Scan(&n.seq, &n.TaskGroupID, &n.Host, &n.Organization, &n.Repository, &n.SHA, &n.State, &n.EventType, &n.EventID,
			&n.InstallationID, &n.PullRequestNumber, &n.Reporting, &created, &updated)
		n.Created, n.Updated = fromMS(created), fromMS(updated)
		return n, err
	}, func(n numbered) string { return strconv.FormatInt(n.seq, 10) }))
}

func mapBuilds[T interface{ build() GithubBuild }](rows []T, next string, err error) ([]GithubBuild, string, error) {
	if err != nil {
		return nil, "", fmt.Errorf("listing builds: %w", err)
	}
	out := make([]GithubBuild, len(rows))
	for i, r := range rows {
		out[i] = r.build()
	}
	return out, next, nil
}

func (b GithubBuild) build() GithubBuild { return b }

// GetGithubBuild implements GithubStore.
func (db *DB) GetGithubBuild(ctx context.Context, taskGroupID string) (*GithubBuild, error) {
	b, err := scanGithubBuild(db.queryRow(ctx, "SELECT "+githubBuildColumns+" FROM github_builds WHERE task_group_id = ?", taskGroupID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading build %s: %w", taskGroupID, err)
	}
	return &b, nil
}

// AdvanceGithubBuild implements GithubStore.
func (db *DB) AdvanceGithubBuild(ctx context.Context, p AdvanceGithubBuildParams) (bool, error) {
	if len(p.From) == 0 {
		return false, nil
	}
	moved := false
	err := db.tx(ctx, func(tx *txn) error {
		marks := strings.TrimSuffix(strings.Repeat("?, ", len(p.From)), ", ")
		args := []any{p.State, ms(p.Now), p.TaskGroupID}
		for _, s := range p.From {
			args = append(args, s)
		}
		res, err := tx.exec(ctx, "UPDATE github_builds SET state = ?, updated = ? WHERE task_group_id = ? AND state IN ("+marks+")", args...)
		if err != nil {
			return fmt.Errorf("moving build %s to %s: %w", p.TaskGroupID, p.State, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil
		}
		moved = true
		if p.Status == nil {
			return nil
		}
		return tx.queueOutbox(ctx, []GithubOutboxEntry{*p.Status}, p.Now)
	})
	return moved, err
}

const githubOutboxColumns = "id, host, outbox_key, kind, owner, repo, target, installation_id, body, seq, state, attempts, next_attempt, last_error, created"

func scanGithubOutbox(row rowScanner) (GithubOutboxEntry, error) {
	var (
		e             GithubOutboxEntry
		body          string
		next, created int64
	)
	err := row.Scan(&e.ID, &e.Host, &e.Key, &e.Kind, &e.Owner, &e.Repo, &e.Target, &e.InstallationID, &body, &e.Seq, &e.State,
		&e.Attempts, &next, &e.LastError, &created)
	e.Body, e.NextAttempt, e.Created = []byte(body), fromMS(next), fromMS(created)
	return e, err
}

// QueueGithubOutbox implements GithubStore.
func (db *DB) QueueGithubOutbox(ctx context.Context, entries []GithubOutboxEntry) error {
	return db.tx(ctx, func(tx *txn) error { return tx.queueOutbox(ctx, entries, time.Time{}) })
}

func (t *txn) queueOutbox(ctx context.Context, entries []GithubOutboxEntry, now time.Time) error {
	for _, e := range entries {
		at := e.NextAttempt
		if at.IsZero() {
			at = now
		}
		onConflict := "DO NOTHING"
		if e.Replace {
			onConflict = `DO UPDATE SET body = excluded.body, seq = github_outbox.seq + 1, state = 'pending', attempts = 0,
				next_attempt = excluded.next_attempt, installation_id = excluded.installation_id, last_error = ''`
		}
		_, err := t.exec(ctx, `INSERT INTO github_outbox (host, outbox_key, kind, owner, repo, target, installation_id, body, seq, state,
			attempts, next_attempt, claimed_until, last_error, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, 'pending', 0, ?, 0, '', ?)
			ON CONFLICT (host, outbox_key) `+onConflict,
			e.Host, e.Key, e.Kind, e.Owner, e.Repo, e.Target, e.InstallationID, string(e.Body), ms(at), ms(at))
		if err != nil {
			return fmt.Errorf("queueing %s %s for %s: %w", e.Kind, e.Key, e.Host, err)
		}
	}
	return nil
}

// ClaimGithubOutbox implements GithubStore.
func (db *DB) ClaimGithubOutbox(ctx context.Context, now, leaseUntil time.Time, limit int) ([]GithubOutboxEntry, error) {
	const due = "state = 'pending' AND next_attempt <= ? AND claimed_until <= ?"
	var one int
	err := db.queryRow(ctx, "SELECT 1 FROM github_outbox WHERE "+due+" LIMIT 1", ms(now), ms(now)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("looking for due forge messages: %w", err)
	}
	var out []GithubOutboxEntry
	err = db.tx(ctx, func(tx *txn) error {
		out = out[:0]
		err := tx.queryEach(ctx, "SELECT "+githubOutboxColumns+" FROM github_outbox WHERE "+due+" ORDER BY next_attempt, id LIMIT ?"+db.dialect.LockSkip,
			[]any{ms(now), ms(now), limit}, func(rows Rows) error {
				for rows.Next() {
					e, err := scanGithubOutbox(rows)
					if err != nil {
						return err
					}
					out = append(out, e)
				}
				return rows.Err()
			})
		if err != nil {
			return fmt.Errorf("claiming forge messages: %w", err)
		}
		for _, e := range out {
			if _, err := tx.exec(ctx, "UPDATE github_outbox SET claimed_until = ?, attempts = attempts + 1 WHERE id = ?", ms(leaseUntil), e.ID); err != nil {
				return fmt.Errorf("claiming forge message %d: %w", e.ID, err)
			}
		}
		return nil
	})
	return out, err
}

// FinishGithubOutbox implements GithubStore.
func (db *DB) FinishGithubOutbox(ctx context.Context, p FinishGithubOutboxParams) error {
	return db.tx(ctx, func(tx *txn) error {
		var err error
		switch {
		case p.Sent:
			_, err = tx.exec(ctx, "UPDATE github_outbox SET state = CASE WHEN seq = ? THEN 'sent' ELSE state END, claimed_until = 0, last_error = '' WHERE id = ?", p.Seq, p.ID)
		case p.Next.IsZero():
			_, err = tx.exec(ctx, "UPDATE github_outbox SET state = CASE WHEN seq = ? THEN 'failed' ELSE state END, claimed_until = 0, last_error = ? WHERE id = ?", p.Seq, reportText(p.Error), p.ID)
		default:
			_, err = tx.exec(ctx, "UPDATE github_outbox SET next_attempt = CASE WHEN seq = ? THEN ? ELSE next_attempt END, claimed_until = 0, last_error = ? WHERE id = ?",
				p.Seq, ms(p.Next), reportText(p.Error), p.ID)
		}
		if err != nil {
			return fmt.Errorf("recording forge message %d: %w", p.ID, err)
		}
		return nil
	})
}

// GetGithubOutbox implements GithubStore.
func (db *DB) GetGithubOutbox(ctx context.Context, host, key string) (*GithubOutboxEntry, error) {
	e, err := scanGithubOutbox(db.queryRow(ctx, "SELECT "+githubOutboxColumns+" FROM github_outbox WHERE host = ? AND outbox_key = ?", host, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("loading forge message %s: %w", key, err)
	}
	return &e, nil
}
