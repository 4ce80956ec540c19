package githubapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/forge"
	"github.com/hopper-ci/hopper/internal/github"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/retry"
	"github.com/hopper-ci/hopper/internal/store"
)

// deliveryRetry is the back-off of a delivery after its n-th attempt
// failed in a way that may pass.
var deliveryRetry = retry.Doubling(time.Second, 10*time.Minute)

// maxDeliveryAttempts bounds how often a delivery is tried before it is
// recorded as failed (the forge's API kept failing).
const maxDeliveryAttempts = 10

// permanent marks a processing error that trying again cannot fix.
type permanent struct{ error }

// outcome is what processing one delivery did: the record and what it
// queues, written in one transaction.
type outcome struct {
	summary string
	// failure is set when the event ends in an error its repository's
	// users are shown (the delivery's record keeps it as its error).
	failure string
	builds  []store.GithubBuild
	outbox  []store.GithubOutboxEntry
}

// ProcessDue processes deliveries that are due, one claimed delivery at
// a time, and returns how many it processed. Replicas may run it at once:
// each delivery is leased to one, and a replay after a lost lease creates
// the very same tasks (their ids derive from the delivery), which the
// queue takes as the same tasks.
func (s *Service) ProcessDue(ctx context.Context) (int, error) {
	n := 0
	for ctx.Err() == nil {
		now := s.Clock.Now()
		lease := now.Add(s.Lease)
		d, err := s.Store.ClaimGithubDelivery(ctx, now, lease)
		if err != nil {
			return n, fmt.Errorf("claiming a delivery: %w", err)
		}
		if d == nil {
			return n, nil
		}
		if err := s.processClaimed(ctx, d, lease); err != nil {
			return n, err
		}
		n++
	}
	return n, ctx.Err()
}

func (s *Service) processClaimed(ctx context.Context, d *store.GithubDelivery, lease time.Time) error {
	out, err := s.process(ctx, d)
	finish := store.FinishGithubDeliveryParams{Host: d.Host, DeliveryID: d.DeliveryID, Lease: lease, Now: s.Clock.Now()}
	var perm permanent
	switch {
	case err == nil:
		finish.State, finish.Outcome, finish.Builds, finish.Outbox = store.DeliveryDone, out.summary, out.builds, out.outbox
		finish.Error = out.failure
	case errors.As(err, &perm) || errors.Is(err, store.ErrTextNUL) || d.Attempts >= maxDeliveryAttempts:
		// A NUL the store refused came with the event: trying again
		// cannot help.
		finish.State, finish.Error = store.DeliveryFailed, err.Error()
		s.Log.Warn("a webhook delivery failed", "host", d.Host, "delivery", d.DeliveryID, "attempts", d.Attempts, "error", err)
	default:
		backoff := deliveryRetry(d.Attempts)
		s.Log.Info("a webhook delivery will be tried again", "host", d.Host, "delivery", d.DeliveryID, "in", backoff, "error", err)
		return s.Store.RetryGithubDelivery(ctx, store.RetryGithubDeliveryParams{Host: d.Host, DeliveryID: d.DeliveryID, Lease: lease, Next: s.Clock.Now().Add(backoff), Error: err.Error()})
	}
	err = s.Store.FinishGithubDelivery(ctx, finish)
	if errors.Is(err, store.ErrTextNUL) {
		// What the event led to cannot be stored as it is: the delivery
		// fails (the sender's data), rather than being retried for ever.
		finish.State, finish.Outcome, finish.Builds, finish.Outbox = store.DeliveryFailed, "", nil, nil
		finish.Error = "the delivery's outcome holds a NUL character, which hopper does not store"
		err = s.Store.FinishGithubDelivery(ctx, finish)
	}
	if errors.Is(err, store.ErrLeaseLost) {
		s.Log.Warn("a delivery's lease ran out while it was processed; another replica takes it", "delivery", d.DeliveryID)
		return nil
	}
	if err == nil && len(finish.Outbox) > 0 {
		s.kick()
	}
	return err
}

// process works out what one delivery leads to and creates its tasks.
func (s *Service) process(ctx context.Context, d *store.GithubDelivery) (*outcome, error) {
	f := s.Forges[d.Host]
	if f == nil {
		return nil, permanent{fmt.Errorf("forge %s is no longer configured", d.Host)}
	}
	dec, err := github.Classify(github.Delivery{Forge: d.Forge, Host: d.Host, ID: d.DeliveryID, Name: d.Event, Body: d.Body})
	if err != nil {
		return nil, permanent{err}
	}
	e := dec.Event
	if e == nil {
		return &outcome{summary: dec.Reply}, nil
	}
	j := &job{s: s, f: f, e: e, d: d, out: &outcome{}, installation: e.InstallationID}
	if j.installation == 0 && f.Kind == forge.KindGitHub && f.AppID != 0 {
		if j.installation, err = s.Store.GetGithubInstallation(ctx, f.Host, e.Organization); err != nil {
			return nil, err
		}
		if j.installation == 0 {
			// Not heard of by an installation event: ask GitHub.
			if j.installation, err = f.RepositoryInstallation(ctx, e.Organization, e.Repository); err != nil {
				return nil, fmt.Errorf("finding the App's installation: %w", err)
			}
			if j.installation == 0 {
				return nil, permanent{fmt.Errorf("the GitHub App is not installed on %s/%s", e.Organization, e.Repository)}
			}
		}
	}
	if err := j.run(ctx); err != nil {
		return nil, err
	}
	return j.out, nil
}

// job is the processing of one event.
type job struct {
	s            *Service
	f            *forge.Forge
	e            *github.Event
	d            *store.GithubDelivery
	out          *outcome
	installation int64
	ids          func(label string) string
}

func (j *job) run(ctx context.Context) error {
	e, f := j.e, j.f
	switch {
	case e.Kind == github.KindRerun:
		return j.rerun(ctx)
	case e.Kind == github.KindRelease:
		sha, err := f.CommitSHA(ctx, j.installation, e.Organization, e.Repository, e.ReleaseTarget)
		if err != nil {
			return fmt.Errorf("resolving release target %s: %w", e.ReleaseTarget, err)
		}
		e.SHA = sha
	case e.TasksFor == github.TasksForIssueComment:
		pr, err := f.PullRequest(ctx, j.installation, e.Organization, e.Repository, e.PullNumber)
		if err != nil {
			return fmt.Errorf("loading pull request %d: %w", e.PullNumber, err)
		}
		if f.Kind == forge.KindGitea {
			github.NormaliseGiteaPull(pr)
		}
		e.Body["pull_request"] = pr
		e.Body["taskcluster_comment"] = e.Command
		e.SHA, _ = lookupString(pr, "head", "sha")
		e.Branch, _ = lookupString(pr, "head", "ref")
	}
	if e.SHA == "" {
		return permanent{errors.New("the event names no commit")}
	}
	text, found, err := f.GetFile(ctx, j.installation, e.Organization, e.Repository, ".taskcluster.yml", e.SHA)
	if err != nil {
		return fmt.Errorf("fetching .taskcluster.yml at %s: %w", e.SHA, err)
	}
	if !found {
		j.out.summary = "no .taskcluster.yml at " + e.SHA
		return nil
	}
	cfg, err := github.ParseConfig(j.s.Schemas, text)
	if err != nil {
		return j.userError("The .taskcluster.yml of this commit cannot be used", err)
	}
	tasksFor := e.TasksFor
	switch {
	case e.TasksFor == github.TasksForPullRequest:
		run, tf, err := j.pullPolicy(ctx)
		if err != nil || !run {
			return err
		}
		tasksFor = tf
	case e.TasksFor == github.TasksForIssueComment:
		if ok, err := j.commentPolicy(ctx); err != nil || !ok {
			return err
		}
	}
	j.ids = github.IDs(j.s.IDSecret, j.d.Host, j.d.DeliveryID)
	rendered, err := cfg.Render(github.RenderParams{Event: e, TasksFor: tasksFor, RootURL: j.s.RootURL, Now: j.d.Received, ID: j.ids})
	if err != nil {
		return j.userError("The .taskcluster.yml of this commit does not render", err)
	}
	if len(rendered.Tasks) == 0 && len(rendered.Hooks) == 0 {
		j.out.summary = ".taskcluster.yml rendered no tasks for " + e.Type
		if e.TasksFor == github.TasksForIssueComment {
			j.comment("No Taskcluster jobs started for this command", "Task graph produced empty list of tasks and hooks")
		}
		return nil
	}
	return j.createTasks(ctx, rendered, tasksFor)
}

// createTasks creates the rendered tasks with the event's role, records a
// build for every task group they make, and queues each group's pending
// status.
func (j *job) createTasks(ctx context.Context, r *github.Rendered, tasksFor string) error {
	expander, err := j.s.Roles.Expander(ctx)
	if err != nil {
		return fmt.Errorf("loading roles: %w", err)
	}
	scopes := expander.Expand(r.Scopes)
	var groups []string
	seen := map[string]bool{}
	var refused *api.Refusal
	created := 0
	claims, err := auth.EncodeForgeClaims(forgeClaims(j.e, r.Scopes))
	if err != nil {
		return permanent{err}
	}
	for _, t := range r.Tasks {
		body, err := json.Marshal(t.Definition)
		if err != nil {
			return permanent{fmt.Errorf("encoding task %s: %w", t.TaskID, err)}
		}
		if err := j.recordIdentity(ctx, t.TaskID, t.Definition, claims); err != nil {
			return err
		}
		_, err = j.s.Tasks.CreateTaskAs(ctx, t.TaskID, body, ClientID, scopes)
		if errors.As(err, &refused) {
			// A task the queue refused (another's under the same id, too)
			// gets no forge identity.
			if j.s.Identities != nil {
				if err := j.s.Identities.DeleteTaskIdentity(ctx, t.TaskID); err != nil {
					return err
				}
			}
			break
		}
		if err != nil {
			return fmt.Errorf("creating task %s: %w", t.TaskID, err)
		}
		created++
		if g, _ := t.Definition["taskGroupId"].(string); g != "" && !seen[g] {
			seen[g] = true
			groups = append(groups, g)
		} else if g == "" && !seen[t.TaskID] {
			seen[t.TaskID] = true
			groups = append(groups, t.TaskID)
		}
	}
	hookGroups, hookErr := j.triggerHooks(ctx, r, scopes, tasksFor, refused != nil)
	if hookErr != nil && !errors.As(hookErr, new(*hookRefusal)) {
		return hookErr
	}
	groups = append(groups, hookGroups...)
	now := j.s.Clock.Now()
	e := j.e
	for _, g := range groups {
		j.out.builds = append(j.out.builds, store.GithubBuild{TaskGroupID: g, Host: e.Host, Organization: e.Organization,
			Repository: e.Repository, SHA: e.SHA, State: github.StatePending, EventType: e.Type, EventID: e.DeliveryID,
			InstallationID: j.installation, PullRequestNumber: e.PullNumber, Reporting: r.Reporting, Created: now, Updated: now})
		if !j.s.usesChecks(&j.out.builds[len(j.out.builds)-1]) {
			// A build reporting with check runs gets them from the
			// reporter, one per task, and no status (as in Taskcluster).
			j.out.outbox = append(j.out.outbox, j.s.statusEntry(j.f, e.Organization, e.Repository, e.SHA, g, e.Type, github.StatePending, j.installation))
		}
	}
	j.out.summary = fmt.Sprintf("created %d of %d tasks in task groups %v", created, len(r.Tasks), groups)
	if refused == nil && hookErr == nil && r.AutoCancel && e.Kind == github.KindPullRequest && e.TasksFor == github.TasksForPullRequest && e.PullNumber != 0 {
		if err := j.autoCancel(ctx); err != nil {
			return err
		}
	}
	if refused != nil {
		j.out.summary = fmt.Sprintf("the queue refused a task: %s", refused.Code)
		return j.userError("Taskcluster could not create the tasks of this event", errors.New(roleRefusal(refused, r.Scopes)))
	}
	if hookErr != nil {
		return j.userError("Taskcluster could not trigger a hook of this event", hookErr)
	}
	return nil
}

// roleRefusal is the queue's refusal of a task as the repository's users
// must read it: a lack of scopes is the role's (repo:…, whose scopes the
// tasks are created with), not the service's client's, which they cannot
// change.
func roleRefusal(refused *api.Refusal, scopes []string) string {
	var roles []string
	for _, s := range scopes {
		if r, ok := strings.CutPrefix(s, "assume:"); ok {
			roles = append(roles, "`"+r+"`")
		}
	}
	if refused.Code != "InsufficientScopes" || len(roles) == 0 {
		return refused.Message
	}
	who := "The role " + strings.Join(roles, ", ")
	msg := strings.Replace(refused.Message, "Client ID "+ClientID+" does not have sufficient scopes",
		who+" does not have sufficient scopes to create the tasks of this event", 1)
	msg = strings.Replace(msg, "requires the client to satisfy", "requires the role to satisfy", 1)
	if msg == refused.Message {
		msg = who + " does not have sufficient scopes to create the tasks of this event:\n\n" + msg
	}
	return msg
}

// cancelClass is the class of pull-request event types whose builds
// supersede each other: opened, reopened and synchronize are one.
func cancelClass(eventType string) string {
	switch eventType {
	case "pull_request.opened", "pull_request.reopened", "pull_request.synchronize":
		return "pull_request.opened"
	}
	return eventType
}

// autoCancel cancels the superseded builds of a pull request
// (autoCancelPreviousChecks), without the race of deliveries that arrive
// out of order or on several replicas at once: the pull request's current
// head decides. When this event's commit is the head, the pending builds
// of other commits are cancelled; when it is not (a newer push came
// first), this event's own new groups are cancelled at once.
func (j *job) autoCancel(ctx context.Context) error {
	e := j.e
	pr, err := j.f.PullRequest(ctx, j.installation, e.Organization, e.Repository, e.PullNumber)
	if forge.IsStatus(err, http.StatusNotFound) {
		return nil // gone: nothing to supersede
	}
	if err != nil {
		return fmt.Errorf("reading pull request %d's head: %w", e.PullNumber, err)
	}
	head, _ := lookupString(pr, "head", "sha")
	now := j.s.Clock.Now()
	if head != "" && head != e.SHA {
		for i := range j.out.builds {
			b := &j.out.builds[i]
			if err := j.s.cancelGroup(ctx, b, now); err != nil {
				return err
			}
			b.State = github.StateCancelled
			for k := range j.out.outbox {
				if j.out.outbox[k].Key == "status:"+b.TaskGroupID {
					j.out.outbox[k] = j.s.statusEntry(j.f, b.Organization, b.Repository, b.SHA, b.TaskGroupID, b.EventType, github.StateCancelled, j.installation)
				}
			}
		}
		j.out.summary += "; superseded by " + head + " already: cancelled"
		return nil
	}
	builds, _, err := j.s.Store.ListGithubBuilds(ctx, store.GithubBuildFilter{Host: e.Host, Organization: e.Organization,
		Repository: e.Repository, PullRequestNumber: e.PullNumber, State: github.StatePending}, store.Page{Limit: 1000})
	if err != nil {
		return err
	}
	cancelled := 0
	for _, b := range builds {
		if b.SHA == e.SHA || b.EventID == e.DeliveryID || cancelClass(b.EventType) != cancelClass(e.Type) {
			continue
		}
		if err := j.s.cancelBuild(ctx, &b, now); err != nil {
			return fmt.Errorf("cancelling superseded build %s: %w", b.TaskGroupID, err)
		}
		cancelled++
	}
	if cancelled > 0 {
		j.out.summary += fmt.Sprintf("; cancelled %d superseded builds", cancelled)
	}
	return nil
}

// hookRefusal is a hook that could not be triggered for a reason the
// repository's users must see.
type hookRefusal struct{ msg string }

func (h *hookRefusal) Error() string { return h.msg }

// triggerHooks triggers the hooks the config names, each with a task id
// derived from the delivery (the group its build records), if the
// event's role grants github:trigger-hook:<name>. It stops at the first
// refusal; skip skips them all (the tasks were refused).
func (j *job) triggerHooks(ctx context.Context, r *github.Rendered, scopes []string, tasksFor string, skip bool) ([]string, error) {
	if skip || len(r.Hooks) == 0 {
		return nil, nil
	}
	if j.s.Hooks == nil {
		return nil, &hookRefusal{"this hopper triggers no hooks"}
	}
	var groups []string
	for i, h := range r.Hooks {
		group, id, ok := strings.Cut(h.Name, "/")
		if !ok || group == "" || id == "" {
			return groups, &hookRefusal{fmt.Sprintf("hooks[%d]: %q is not <hookGroupId>/<hookId>", i, h.Name)}
		}
		if !satisfies(scopes, "github:trigger-hook:"+h.Name) {
			return groups, &hookRefusal{fmt.Sprintf("the repository's role (%s) does not grant github:trigger-hook:%s", r.Scopes[0], h.Name)}
		}
		taskID := j.ids(fmt.Sprintf("hook:%d:%s", i, h.Name))
		context := h.Context
		if context == nil {
			context = map[string]any{}
		}
		payload, err := json.Marshal(map[string]any{"context": context, "event": j.e.Body, "now": queue.NewTime(j.d.Received).String(),
			"taskcluster_root_url": j.s.RootURL, "tasks_for": tasksFor, "taskId": taskID})
		if err != nil {
			return groups, permanent{err}
		}
		refused, err := j.s.Hooks.TriggerHook(ctx, group, id, payload, taskID, j.d.Received)
		if err != nil {
			return groups, fmt.Errorf("triggering hook %s: %w", h.Name, err)
		}
		if refused != "" {
			return groups, &hookRefusal{fmt.Sprintf("hook %s: %s", h.Name, refused)}
		}
		groups = append(groups, taskID)
	}
	return groups, nil
}

// statusEntry is the outbox entry of a build's status: one per build,
// replaced by each newer state.
func (s *Service) statusEntry(f *forge.Forge, owner, repo, sha, groupID, eventType, state string, installation int64) store.GithubOutboxEntry {
	body, _ := json.Marshal(map[string]string{"state": github.ForgeState(state), "target_url": s.groupURL(groupID),
		"description": github.StatusDescription(state, eventType), "context": github.StatusContext(f.Name(), eventType)})
	return store.GithubOutboxEntry{Host: f.Host, Key: "status:" + groupID, Kind: "status", Replace: true, Owner: owner, Repo: repo,
		Target: sha, InstallationID: installation, Body: body}
}

// userError tells the repository's users why nothing (more) ran: a
// comment on the pull request (or the commit), and an error status whose
// link opens the delivery's record with the whole message. The event is
// done: trying again would fail the same way.
func (j *job) userError(summary string, err error) error {
	e := j.e
	j.out.summary = summary + ": " + err.Error()
	j.out.failure = j.out.summary
	if e.PullNumber != 0 || j.f.Kind != forge.KindGitea {
		// Gitea and Forgejo take no comment on a commit: there the
		// error status's page says it.
		j.comment(summary, "```\n"+err.Error()+"\n```")
	}
	body, _ := json.Marshal(map[string]string{"state": "error", "target_url": j.s.deliveryURL(e.Host, e.DeliveryID),
		"description": truncate(summary, 140), "context": github.StatusContext(j.f.Name(), e.Type)})
	j.out.outbox = append(j.out.outbox, store.GithubOutboxEntry{Host: e.Host, Key: "status:error:" + e.DeliveryID, Kind: "status",
		Replace: true, Owner: e.Organization, Repo: e.Repository, Target: e.SHA, InstallationID: j.installation, Body: body})
	return nil
}

// comment queues a comment on the event's pull request, or on its commit
// when there is none. Its key is a digest of where and what it says, so
// an exact duplicate is never posted twice.
func (j *job) comment(summary, details string) {
	e := j.e
	text := "<details>\n<summary>" + summary + "</summary>\n\n" + details + "\n</details>"
	target := "sha:" + e.SHA
	if e.PullNumber != 0 {
		target = strconv.Itoa(e.PullNumber)
	}
	body, _ := json.Marshal(map[string]string{"body": text})
	j.out.outbox = append(j.out.outbox, store.GithubOutboxEntry{Host: e.Host, Key: "comment:" + digest(e.Organization, e.Repository, target, text),
		Kind: "comment", Owner: e.Organization, Repo: e.Repository, Target: target, InstallationID: j.installation, Body: body})
}

// react queues a reaction to the event's comment.
func (j *job) react(content string) {
	e := j.e
	body, _ := json.Marshal(map[string]string{"content": content})
	id := strconv.FormatInt(e.CommentID, 10)
	j.out.outbox = append(j.out.outbox, store.GithubOutboxEntry{Host: e.Host, Key: "reaction:" + e.Organization + "/" + e.Repository + ":" + id + ":" + content,
		Kind: "reaction", Owner: e.Organization, Repo: e.Repository, Target: id, InstallationID: j.installation, Body: body})
}

func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func lookupString(m map[string]any, path ...string) (string, bool) {
	var v any = m
	for _, k := range path {
		o, ok := v.(map[string]any)
		if !ok {
			return "", false
		}
		v = o[k]
	}
	s, ok := v.(string)
	return s, ok
}
