package hooksapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/clock"
	"github.com/hopper-ci/hopper/internal/hooks"
	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// ClientID is who hooks' tasks are created by, as InsufficientScopes
// messages name it (Taskcluster's hooks service has this client).
const ClientID = "static/taskcluster/hooks"

// TaskCreator creates a task with the given (expanded) scopes through the
// queue's own createTask logic; *queueapi.Server is one. Refusals are
// *api.Refusal.
type TaskCreator interface {
	CreateTaskAs(ctx context.Context, taskID string, body []byte, clientID string, scopes []string) (*queue.TaskState, error)
}

// TaskCreatorFunc adapts a function to TaskCreator.
type TaskCreatorFunc func(ctx context.Context, taskID string, body []byte, clientID string, scopes []string) (*queue.TaskState, error)

// CreateTaskAs implements TaskCreator.
func (f TaskCreatorFunc) CreateTaskAs(ctx context.Context, taskID string, body []byte, clientID string, scopes []string) (*queue.TaskState, error) {
	return f(ctx, taskID, body, clientID, scopes)
}

// Firer fires hooks: it renders the template, creates the task with the
// hook's role and says what to record. The API (triggers), the scheduler
// and the Pulse listener share it.
type Firer struct {
	Store store.HookStore
	Tasks TaskCreator
	Roles auth.ExpanderSource
	Clock clock.Clock
	Log   *slog.Logger
	// Lease is how long a replica holds a due hook while firing it
	// (default 10 s); if it dies meanwhile another replica fires the same
	// due time again after the lease, with the same taskId, and then the
	// due times that passed meanwhile (hooks.Claim). A fire that outlasts
	// its lease is merely repeated: the queue takes the same createTask as
	// the same task, and the fire is recorded once. A hook unclaimed for
	// longer than a lease after it was due was missed by every replica:
	// the due times of that outage are not made up.
	Lease time.Duration
	// RootURL is the deployment's public root URL, for the link in the
	// owner's email about a failed scheduled fire ("" leaves it out).
	RootURL string
}

// outcome is what one fire did.
type outcome struct {
	// taskID is set when a task was created.
	taskID string
	// record is the fire to record (nil when the template declined).
	record *store.LastFire
	// refusal is the API error of a failed trigger.
	refusal *hooks.Error
	// permanent is set on a failure that repeating the fire would not
	// mend: the template failed to render, or the queue refused the task
	// with a 4xx (Taskcluster mails the owner about these, not about 5xx).
	permanent bool
}

// fire renders and creates the task of one fire. An error means the fire
// could not be attempted properly (a database failure): nothing is to be
// recorded and a scheduled fire is retried.
func (f *Firer) fire(ctx context.Context, def *hooks.Definition, fire hooks.Fire) (*outcome, error) {
	record := &store.LastFire{HookGroupID: def.HookGroupID, HookID: def.HookID, FiredBy: fire.FiredBy,
		TaskID: fire.TaskID, TaskCreateTime: f.Clock.Now().UTC(), Result: hooks.ResultError}
	task, err := hooks.RenderTask(def, fire)
	if err != nil {
		record.Error = err.Error()
		return &outcome{record: record, refusal: hooks.RenderRefusal(err), permanent: true}, nil
	}
	if task == nil {
		return &outcome{}, nil
	}
	body, err := json.Marshal(task)
	if err != nil {
		return nil, fmt.Errorf("encoding the task of hook %s/%s: %w", def.HookGroupID, def.HookID, err)
	}
	expander, err := f.Roles.Expander(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading roles: %w", err)
	}
	scopes := expander.Expand([]string{hooks.RoleScope(def.HookGroupID, def.HookID)})
	_, err = f.Tasks.CreateTaskAs(ctx, fire.TaskID, body, ClientID, scopes)
	var refused *api.Refusal
	switch {
	case errors.As(err, &refused):
		te := &hooks.TaskError{Code: refused.Code, Status: refused.Status, Message: refused.Message, RequestInfo: refused.RequestInfo}
		record.Error = te.Record()
		return &outcome{record: record, refusal: hooks.TriggerRefusal(def, te), permanent: refused.Status < 500}, nil
	case err != nil:
		return nil, fmt.Errorf("creating task %s for hook %s/%s: %w", fire.TaskID, def.HookGroupID, def.HookID, err)
	}
	record.Result = hooks.ResultSuccess
	return &outcome{taskID: fire.TaskID, record: record}, nil
}

// DefaultScheduleTick is how often the Hooks service's cron looks for due
// hooks (FireDue, which internal/server schedules with maintenance.Every
// on every replica), so a hook fires within about a second of its due
// time.
const DefaultScheduleTick = time.Second

// FireDue fires every hook whose due time has come, one claimed hook and
// due time at a time, and returns how many due times it fired. Several replicas may run it at
// once: each due time is claimed by one, and the fire record and the move
// to the next due time are written in one transaction that applies only
// while the hook still waits for the fire's taskId, so a due time fires
// (and is recorded) once even when a lease runs out mid-fire.
func (f *Firer) FireDue(ctx context.Context) (int, error) {
	lease := f.Lease
	if lease <= 0 {
		lease = 10 * time.Second
	}
	fired := 0
	for ctx.Err() == nil {
		now := f.Clock.Now()
		h, err := f.Store.ClaimDueHook(ctx, now, now.Add(lease))
		if err != nil {
			return fired, fmt.Errorf("claiming a due hook: %w", err)
		}
		if h == nil {
			return fired, nil
		}
		if err := f.fireScheduled(ctx, h, hooks.Claim{Due: h.NextScheduled, LastClaimEnd: h.LastClaimEnd, At: now}, lease); err != nil {
			return fired, err
		}
		fired++
	}
	return fired, ctx.Err()
}

// fireScheduled fires one claimed hook for its due time. The task is
// created at the due time (task.created and JSON-e's now) with the
// hook's stored next taskId, so repeating the fire repeats the same
// createTask, which the queue accepts as the same task. The hook then
// waits for the due time the schedule's rule gives for the claim.
func (f *Firer) fireScheduled(ctx context.Context, h *store.Hook, claim hooks.Claim, lease time.Duration) error {
	def, err := definitionOf(h)
	if err != nil {
		return err
	}
	sched, err := hooks.ParseSchedule(def.Schedule)
	if err != nil {
		return fmt.Errorf("hook %s/%s has a stored schedule that no longer parses: %w", h.HookGroupID, h.HookID, err)
	}
	out, err := f.fire(ctx, def, hooks.Fire{FiredBy: hooks.FiredBySchedule, TaskID: h.NextTaskID, Now: h.NextScheduled})
	if err != nil {
		f.Log.Warn("scheduled fire failed; retrying at the next poll", "hookGroupId", h.HookGroupID, "hookId", h.HookID, "error", err)
		if rerr := f.Store.ReleaseHookClaim(ctx, h); rerr != nil {
			return errors.Join(err, rerr)
		}
		return nil
	}
	next, _ := sched.NextDue(claim, lease)
	nextID := ident.NewSlugID()
	var mail *notify.Message
	if out.permanent {
		mail = f.failureEmail(def, out.record)
	}
	applied, err := f.Store.FinishScheduledFire(ctx, store.FinishFireParams{HookGroupID: h.HookGroupID, HookID: h.HookID,
		FiredTaskID: h.NextTaskID, NextTaskID: nextID, NextScheduled: next, Finished: f.Clock.Now(), Fire: out.record, Notify: mail})
	if err != nil {
		return fmt.Errorf("recording the scheduled fire of hook %s/%s: %w", h.HookGroupID, h.HookID, err)
	}
	result := "declined"
	if out.record != nil {
		result = out.record.Result
	}
	f.Log.Info("hook fired", "hookGroupId", h.HookGroupID, "hookId", h.HookID, "firedBy", hooks.FiredBySchedule,
		"taskId", h.NextTaskID, "dueTime", h.NextScheduled, "nextDueTime", next, "result", result, "recorded", applied)
	if skipped, ok := sched.Next(claim.Due); ok && applied && skipped.Before(next) {
		f.Log.Warn("hook due times missed: no replica claimed the hook for longer than a lease", "hookGroupId", h.HookGroupID,
			"hookId", h.HookID, "firstMissed", skipped, "nextDueTime", next, "claimedAt", claim.At)
	}
	return nil
}

// FireMessage fires a hook for a Pulse message, if the hook still exists
// and the message matches its triggerSchema (others are dropped, as
// Taskcluster drops them).
func (f *Firer) FireMessage(ctx context.Context, hookGroupID, hookID string, body []byte) error {
	h, err := f.Store.GetHook(ctx, hookGroupID, hookID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	def, err := definitionOf(h)
	if err != nil {
		return err
	}
	if ok, why := hooks.MessageMatches(def, body); !ok {
		f.Log.Info("Pulse message dropped: it does not match the hook's triggerSchema", "hookGroupId", hookGroupID, "hookId", hookID, "problem", why)
		return nil
	}
	var payload any
	if err := json.Unmarshal(body, &payload); err != nil {
		return nil
	}
	taskID := ident.NewSlugID()
	out, err := f.fire(ctx, def, hooks.Fire{FiredBy: hooks.FiredByPulse, TaskID: taskID, Payload: payload, Now: f.Clock.Now()})
	if err != nil {
		return err
	}
	if out.record == nil {
		return nil
	}
	return f.Store.AddLastFire(ctx, out.record)
}

// definitionOf decodes a stored hook's definition.
func definitionOf(h *store.Hook) (*hooks.Definition, error) {
	def := &hooks.Definition{HookGroupID: h.HookGroupID, HookID: h.HookID, Metadata: h.Metadata, Task: h.Task, TriggerSchema: h.TriggerSchema}
	if err := json.Unmarshal(h.Bindings, &def.Bindings); err != nil {
		return nil, fmt.Errorf("decoding the bindings of hook %s/%s: %w", h.HookGroupID, h.HookID, err)
	}
	if err := json.Unmarshal(h.Schedule, &def.Schedule); err != nil {
		return nil, fmt.Errorf("decoding the schedule of hook %s/%s: %w", h.HookGroupID, h.HookID, err)
	}
	return def, nil
}

// Trigger fires a hook for another hopper service (the github service
// triggers the hooks a `.taskcluster.yml` names) as triggerHook would:
// the payload must match the hook's triggerSchema, the task is created
// with the hook's role as taskID, and the fire is recorded. A refusal
// (no such hook, a payload the schema refuses, a template that fails, a
// task the role does not allow) is a *hooks.Error; other errors are
// internal. now is the fire's time, so repeating a trigger renders the
// same task, which the queue takes as the same task.
func (f *Firer) Trigger(ctx context.Context, hookGroupID, hookID string, payload []byte, taskID, clientID string, now time.Time) error {
	h, err := f.Store.GetHook(ctx, hookGroupID, hookID)
	if errors.Is(err, store.ErrNotFound) {
		return &hooks.Error{Code: api.CodeResourceNotFound, Message: fmt.Sprintf("No hook %s/%s", hookGroupID, hookID)}
	}
	if err != nil {
		return err
	}
	def, err := definitionOf(h)
	if err != nil {
		return err
	}
	if _, err := hooks.CheckTriggerPayload(def, payload); err != nil {
		return err
	}
	var decoded any
	if err := json.Unmarshal(payload, &decoded); err != nil {
		return fmt.Errorf("decoding the trigger payload: %w", err)
	}
	out, err := f.fire(ctx, def, hooks.Fire{FiredBy: hooks.FiredByTriggerHook, TaskID: taskID, Payload: decoded, ClientID: clientID, Now: now})
	if err != nil {
		return err
	}
	if out.record != nil {
		if err := f.Store.AddLastFire(ctx, out.record); err != nil {
			return err
		}
	}
	if out.refusal != nil {
		return out.refusal
	}
	return nil
}

// failureEmail is the mail to a hook's owner about a scheduled fire that
// created no task, or nil when the hook's metadata says emailOnError:
// false (absent means true, as in Taskcluster's schema) or names no
// owner. It is queued with the fire's record and sent by the notify
// outbox (which needs an SMTP relay, --notify-config).
func (f *Firer) failureEmail(def *hooks.Definition, record *store.LastFire) *notify.Message {
	var meta struct {
		Owner        string `json:"owner"`
		EmailOnError *bool  `json:"emailOnError"`
	}
	if err := json.Unmarshal(def.Metadata, &meta); err != nil || meta.Owner == "" || (meta.EmailOnError != nil && !*meta.EmailOnError) {
		return nil
	}
	id := def.HookGroupID + "/" + def.HookID
	email := &notify.Email{
		Address: meta.Owner,
		Subject: "Scheduled hook " + id + " created no task",
		Content: "The scheduled fire of hook `" + id + "` at " + record.TaskCreateTime.UTC().Format(time.RFC3339) +
			" created no task (taskId `" + record.TaskID + "`). The error was:\n\n```\n" + record.Error +
			"\n```\n\nThe hook fires again at its next due time; until the hook or its role (`hook-id:" + id +
			"`) is fixed, that fire fails the same way. `hopper hook fires " + def.HookGroupID + " " + def.HookID +
			"` lists every fire.\n\nYou get this mail as the hook's owner; set `emailOnError: false` in its metadata to stop it.",
	}
	if f.RootURL != "" {
		email.Link = &notify.Link{Text: "The hook", Href: strings.TrimRight(f.RootURL, "/") + "/ui/#/hooks/" +
			url.PathEscape(def.HookGroupID) + "/" + url.PathEscape(def.HookID)}
	}
	return &notify.Message{Email: email}
}
