package githubapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/hopper-ci/hopper/internal/forge"
	"github.com/hopper-ci/hopper/internal/github"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/retry"
	"github.com/hopper-ci/hopper/internal/store"
)

// maxSendAttempts bounds how often a status or comment is tried before it
// is given up (recorded as failed, with the forge's last answer).
const maxSendAttempts = 20

// sendRetry is the back-off of a send after its n-th failed attempt.
var sendRetry = retry.Doubling(time.Second, 15*time.Minute)

// Report moves pending builds on as their task groups resolve (queueing
// each new state's status in the same transaction) and sends what the
// outbox holds. Replicas may run it at once: a build moves only forward
// (github.Advances), so a replica that read a group before a task failed
// cannot put pending back over failure, and each outbox entry is leased
// to one sender.
func (s *Service) Report(ctx context.Context) error {
	if err := s.UpdateBuilds(ctx); err != nil {
		return err
	}
	_, err := s.SendDue(ctx)
	return err
}

// Leases of the groups the reporter looks at: renewed every
// groupRenewal while it works, so a replica that dies holds its groups
// for groupLease at most.
const (
	groupLease   = 30 * time.Second
	groupRenewal = 10 * time.Second
	groupBatch   = 50
)

// groupRetry is the back-off of a group whose look failed (the store or
// the artifacts did not answer), after its n-th failed claim.
var groupRetry = retry.Doubling(time.Second, 5*time.Minute)

// UpdateBuilds looks at the task groups of the builds whose tasks changed
// since they were last looked at: every change of a forge build's task
// queues a message for its group in the change's transaction (and so
// does recording the build), which one replica claims. Its database load
// grows with the changes, not with the builds pending.
func (s *Service) UpdateBuilds(ctx context.Context) error {
	for ctx.Err() == nil {
		now := s.Clock.Now()
		claimed, err := s.Store.ClaimOutbox(ctx, store.ClaimOutboxParams{Service: store.GithubService, Kind: store.GithubGroupChanged,
			Owner: s.Owner, Now: now, Lease: groupLease, Limit: groupBatch})
		if err != nil || len(claimed) == 0 {
			return err
		}
		stop := store.KeepLeases(ctx, groupRenewal, func(ctx context.Context) error {
			_, err := s.Store.RenewOutbox(ctx, claimed, s.Clock.Now().Add(groupLease))
			return err
		})
		err = s.updateGroups(ctx, claimed)
		stop()
		if err != nil || len(claimed) < groupBatch {
			return err
		}
	}
	return ctx.Err()
}

// updateGroups looks at each claimed group and records the outcome.
func (s *Service) updateGroups(ctx context.Context, claimed []store.OutboxMessage) error {
	for i := range claimed {
		m := &claimed[i]
		err := s.updateGroup(ctx, m.Key)
		if ctx.Err() != nil {
			return ctx.Err() // stopping: the lease runs out and another replica looks
		}
		o := store.OutboxOutcome{Done: err == nil, Now: s.Clock.Now()}
		if err != nil {
			o.Error, o.Next = err.Error(), o.Now.Add(groupRetry(m.Attempts-1))
			s.Log.Warn("looking at a build's task group failed; trying again", "taskGroupId", m.Key, "at", o.Next, "error", err)
		}
		if _, err := s.Store.FinishOutbox(ctx, m, o); err != nil {
			return err
		}
	}
	return nil
}

// updateGroup moves a task group's build on: a pending one to its
// group's state, a resolved one back to pending if a task was rerun.
func (s *Service) updateGroup(ctx context.Context, taskGroupID string) error {
	b, err := s.Store.GetGithubBuild(ctx, taskGroupID)
	if errors.Is(err, store.ErrNotFound) {
		return nil // not recorded yet: recording it queues another look
	}
	if err != nil {
		return err
	}
	if b.State == github.StatePending {
		return s.updateBuild(ctx, b)
	}
	return s.reopenBuild(ctx, b)
}

// reopenWindow bounds how far back resolved builds are watched for
// reruns: a task cannot be rerun after its deadline, at most days after
// its creation.
const reopenWindow = 7 * 24 * time.Hour

// reopenBuild moves a resolved build back to pending when a task of its
// group was rerun after it resolved (from the console, the CLI or the
// API): builds otherwise only move forward, and the reporter then follows
// the build to its new end. The rerun is a change of the task, so the
// outbox brings its group here. A run scheduled after the build's last
// change must be there, so a replica that read the group before it
// resolved cannot reopen it.
func (s *Service) reopenBuild(ctx context.Context, b *store.GithubBuild) error {
	if (b.State != github.StateSuccess && b.State != github.StateFailure) || b.Created.Before(s.Clock.Now().Add(-reopenWindow)) {
		return nil
	}
	tasks, err := s.listGroup(ctx, b.TaskGroupID)
	if err != nil {
		return err
	}
	if github.GroupState(tasks) != github.StatePending || !rerunSince(tasks, b.Updated) {
		return nil
	}
	f := s.Forges[b.Host]
	var status *store.GithubOutboxEntry
	if f != nil && !s.usesChecks(b) {
		e := s.statusEntry(f, b.Organization, b.Repository, b.SHA, b.TaskGroupID, b.EventType, github.StatePending, b.InstallationID)
		status = &e
	}
	moved, err := s.Store.AdvanceGithubBuild(ctx, store.AdvanceGithubBuildParams{TaskGroupID: b.TaskGroupID, From: []string{b.State},
		State: github.StatePending, Now: s.Clock.Now(), Status: status})
	if err != nil {
		return err
	}
	if moved {
		s.Log.Info("build back to pending: a task was rerun", "taskGroupId", b.TaskGroupID, "from", b.State)
	}
	return nil
}

// rerunSince says whether a task's latest run is a rerun scheduled after
// at.
func rerunSince(tasks []*queue.TaskState, at time.Time) bool {
	for _, t := range tasks {
		if n := len(t.Runs); n > 0 {
			r := t.Runs[n-1]
			if r.ReasonCreated == "rerun" && r.Scheduled.After(at) {
				return true
			}
		}
	}
	return false
}

func (s *Service) updateBuild(ctx context.Context, b *store.GithubBuild) error {
	tasks, err := s.listGroup(ctx, b.TaskGroupID)
	if err != nil {
		return err
	}
	checks := s.usesChecks(b)
	if checks {
		if err := s.updateChecks(ctx, b, tasks); err != nil {
			return err
		}
	}
	state := github.GroupState(tasks)
	if !github.Advances(b.State, state) {
		return nil
	}
	if checks && slices.ContainsFunc(tasks, func(t *queue.TaskState) bool { return len(t.Runs) == 0 || !t.Runs[len(t.Runs)-1].IsResolved() }) {
		// A checks build stays pending until its group resolves (the
		// reporter looks only at pending builds): a failed task's check
		// run says so at once, and the others' runs (retries included)
		// still get theirs.
		return nil
	}
	f := s.Forges[b.Host]
	var status *store.GithubOutboxEntry
	if f != nil && !checks {
		e := s.statusEntry(f, b.Organization, b.Repository, b.SHA, b.TaskGroupID, b.EventType, state, b.InstallationID)
		status = &e
	}
	moved, err := s.Store.AdvanceGithubBuild(ctx, store.AdvanceGithubBuildParams{TaskGroupID: b.TaskGroupID, From: []string{b.State}, State: state, Now: s.Clock.Now(), Status: status})
	if err != nil {
		return err
	}
	if moved {
		s.Log.Info("build moved on", "taskGroupId", b.TaskGroupID, "from", b.State, "to", state)
	}
	return nil
}

// Leases of the forge messages a sender holds: renewed every
// sendRenewal while it sends, so a replica that dies holds them for
// sendLease at most.
const (
	sendLease   = 30 * time.Second
	sendRenewal = 10 * time.Second
	sendBatch   = 20
)

// SendDue sends the outbox's due statuses, comments and reactions and
// returns how many it sent. A failure the forge may get over (no answer,
// 5xx, rate limit) is tried again with a growing back-off; one it will
// not (a 4xx) is recorded as failed. Replicas may run it at once: each
// message is leased to one sender.
func (s *Service) SendDue(ctx context.Context) (int, error) {
	sent := 0
	for ctx.Err() == nil {
		claimed, err := s.Store.ClaimOutbox(ctx, store.ClaimOutboxParams{Service: store.GithubService, Kind: store.GithubSend,
			Owner: s.Owner, Now: s.Clock.Now(), Lease: sendLease, Limit: sendBatch})
		if err != nil || len(claimed) == 0 {
			return sent, err
		}
		stop := store.KeepLeases(ctx, sendRenewal, func(ctx context.Context) error {
			_, err := s.Store.RenewOutbox(ctx, claimed, s.Clock.Now().Add(sendLease))
			return err
		})
		n, err := s.sendClaimed(ctx, claimed)
		stop()
		sent += n
		if err != nil || len(claimed) < sendBatch {
			return sent, err
		}
	}
	return sent, ctx.Err()
}

// sendClaimed sends each claimed message and records the outcome.
func (s *Service) sendClaimed(ctx context.Context, claimed []store.OutboxMessage) (int, error) {
	sent := 0
	for i := range claimed {
		m := &claimed[i]
		e, err := store.GithubOutboxEntryOf(m)
		if err == nil {
			err = s.send(ctx, &e)
		}
		if ctx.Err() != nil {
			return sent, ctx.Err() // stopping: the lease runs out and another replica sends
		}
		o := store.OutboxOutcome{Done: err == nil, Now: s.Clock.Now()}
		switch {
		case err == nil:
			sent++
		case (forge.Temporary(err) || errors.As(err, new(temporary))) && !errors.As(err, new(refusal)) && m.Attempts <= maxSendAttempts:
			o.Error, o.Next = err.Error(), o.Now.Add(sendRetry(m.Attempts-1))
			s.Log.Info("sending to the forge failed; trying again", "host", e.Host, "kind", e.Kind, "key", e.Key, "at", o.Next, "error", err)
		default:
			o.Error = err.Error()
			s.Log.Warn("sending to the forge failed for good", "host", e.Host, "kind", e.Kind, "key", e.Key, "error", err)
		}
		ok, err := s.Store.FinishOutbox(ctx, m, o)
		if err != nil {
			return sent, err
		}
		if !ok {
			s.Log.Warn("a forge message's lease ran out before it was recorded; another replica may send it again", "key", m.Key)
		}
	}
	return sent, nil
}

// refusal is an entry that can never be sent, whatever the forge's
// state: it is not tried again.
type refusal struct{ error }

func (s *Service) send(ctx context.Context, e *store.GithubOutboxEntry) error {
	f := s.Forges[e.Host]
	if f == nil {
		return refusal{fmt.Errorf("forge %s is no longer configured", e.Host)}
	}
	switch e.Kind {
	case "status":
		return f.CreateStatus(ctx, e.InstallationID, e.Owner, e.Repo, e.Target, json.RawMessage(e.Body))
	case "comment":
		return s.sendComment(ctx, f, e)
	case "check_run":
		return s.sendCheckRun(ctx, f, e)
	case "reaction":
		id, err := strconv.ParseInt(e.Target, 10, 64)
		if err != nil {
			return refusal{fmt.Errorf("reaction target %q: %w", e.Target, err)}
		}
		return f.CreateReaction(ctx, e.InstallationID, e.Owner, e.Repo, id, json.RawMessage(e.Body))
	}
	return refusal{fmt.Errorf("unknown outbox entry kind %q", e.Kind)}
}
