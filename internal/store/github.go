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

	// QueueGithubOutbox queues entries at now (see GithubOutboxEntry.Key)
	// as messages of kind GithubSend in the outbox, which the forge's
	// sender claims (OutboxStore) and reads with GithubOutboxEntryOf.
	QueueGithubOutbox(ctx context.Context, entries []GithubOutboxEntry, now time.Time) error
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
	// Attempts counts the claims of its processing (its outbox message's
	// count, read with it); ClaimedUntil is the lease of the claim that
	// returned it (ClaimGithubDelivery), the handle that finishes or
	// retries it.
	Attempts     int
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

// GithubOutboxEntry is a status or comment to send to a forge, held in
// the outbox (kind GithubSend).
type GithubOutboxEntry struct {
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
	// NextAttempt, when queueing, is when the entry is first due (zero:
	// at once).
	NextAttempt time.Time
	// Seq, State ("pending", "sent", "failed"), Attempts, LastError and
	// Created are the outbox's record of the entry, as read.
	Seq       int64
	State     string
	Attempts  int
	LastError string
	Created   time.Time
}

// GithubService names the forge integration's messages in the outbox;
// GithubGroupChanged is the kind of message that asks its reporter to
// look at a build's task group again (its key is the taskGroupId),
// queued by every change of a task of a forge build (forgeReported) and
// when a build is recorded.
const (
	GithubService      = "github"
	GithubGroupChanged = "group"
	// GithubSend is the kind of the forge's writes: statuses, comments,
	// reactions and check runs (GithubOutboxEntry).
	GithubSend = "send"
	// GithubDeliveryKind is the kind of a stored delivery's processing
	// (ClaimGithubDelivery), queued when the delivery is stored.
	GithubDeliveryKind = "delivery"
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
		return tx.queueOutbox([]GithubOutboxEntry{*p.Status}, p.Now)
	})
	return moved, err
}

// githubSend is how a GithubOutboxEntry is held in the outbox's body.
type githubSend struct {
	Host           string `json:"host"`
	Key            string `json:"key"`
	Kind           string `json:"kind"`
	Owner          string `json:"owner"`
	Repo           string `json:"repo"`
	Target         string `json:"target"`
	InstallationID int64  `json:"installationId"`
	Body           string `json:"body"`
}

// githubSendKey is an entry's key in the outbox: its key within its host.
func githubSendKey(host, key string) string { return host + " " + key }

// message is the entry as an outbox message, queued at now.
func (e *GithubOutboxEntry) message(now time.Time) (OutboxMessage, error) {
	body, err := json.Marshal(githubSend{Host: e.Host, Key: e.Key, Kind: e.Kind, Owner: e.Owner, Repo: e.Repo, Target: e.Target,
		InstallationID: e.InstallationID, Body: string(e.Body)})
	if err != nil {
		return OutboxMessage{}, fmt.Errorf("encoding %s %s: %w", e.Kind, e.Key, err)
	}
	return OutboxMessage{Service: GithubService, Kind: GithubSend, Key: githubSendKey(e.Host, e.Key), Body: body,
		Due: e.NextAttempt, Once: !e.Replace, Expires: now.Add(GithubRetention)}, nil
}

// GithubOutboxEntryOf reads the forge message m (of kind GithubSend)
// holds; its State is "sent" once done.
func GithubOutboxEntryOf(m *OutboxMessage) (GithubOutboxEntry, error) {
	var b githubSend
	if err := json.Unmarshal(m.Body, &b); err != nil {
		return GithubOutboxEntry{}, fmt.Errorf("reading forge message %s: %w", m.Key, err)
	}
	state := m.State
	if state == OutboxDone {
		state = "sent"
	}
	return GithubOutboxEntry{Host: b.Host, Key: b.Key, Kind: b.Kind, Owner: b.Owner, Repo: b.Repo, Target: b.Target,
		InstallationID: b.InstallationID, Body: []byte(b.Body), Seq: m.Seq, State: state, Attempts: m.Attempts,
		LastError: m.LastError, Created: m.Created}, nil
}

// QueueGithubOutbox implements GithubStore.
func (db *DB) QueueGithubOutbox(ctx context.Context, entries []GithubOutboxEntry, now time.Time) error {
	return db.tx(ctx, func(tx *txn) error { return tx.queueOutbox(entries, now) })
}

// queueOutbox queues forge messages in the outbox, in this transaction.
func (t *txn) queueOutbox(entries []GithubOutboxEntry, now time.Time) error {
	msgs := make([]OutboxMessage, 0, len(entries))
	for i := range entries {
		m, err := entries[i].message(now)
		if err != nil {
			return err
		}
		msgs = append(msgs, m)
	}
	t.enqueue(msgs, now)
	return nil
}

// GetGithubOutbox implements GithubStore.
func (db *DB) GetGithubOutbox(ctx context.Context, host, key string) (*GithubOutboxEntry, error) {
	m, err := db.getOutbox(ctx, GithubService, GithubSend, githubSendKey(host, key))
	if err != nil {
		return nil, err
	}
	e, err := GithubOutboxEntryOf(m)
	return &e, err
}
