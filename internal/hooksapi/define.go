package hooksapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/hooks"
	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/store"
)

// checkCall checks a createHook/updateHook call in Taskcluster's order:
// the ids, then the caller's scopes; the definition comes after.
func (h *handlers) checkCall(c *api.Call) (hooks.DefinitionInput, string, string, error) {
	var in hooks.DefinitionInput
	group, id, err := ids(c)
	if err != nil {
		return in, "", "", err
	}
	if err := c.Decode(&in); err != nil {
		return in, "", "", err
	}
	if (in.HookGroupID != "" && in.HookGroupID != group) || (in.HookID != "" && in.HookID != id) {
		_, _, err := hooks.Define(in, hooks.DefineOptions{HookGroupID: group, HookID: id})
		return in, "", "", apiError(err)
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"hookGroupId": group, "hookId": id}); err != nil {
		return in, "", "", err
	}
	return in, group, id, nil
}

// storedParts encodes a definition's parts for the store.
func storedParts(def *hooks.Definition, hk *store.Hook) error {
	bindings, err := json.Marshal(def.Bindings)
	if err != nil {
		return err
	}
	schedule, err := json.Marshal(def.Schedule)
	if err != nil {
		return err
	}
	hk.Metadata, hk.Task, hk.Bindings, hk.Schedule, hk.TriggerSchema = def.Metadata, def.Task, bindings, schedule, def.TriggerSchema
	return nil
}

// nextDue is a schedule's first due time after now (zero: none).
func nextDue(sched *hooks.Schedule, now time.Time) time.Time {
	next, _ := sched.Next(now)
	return next
}

func (h *handlers) createHook(c *api.Call) (any, error) {
	in, group, id, err := h.checkCall(c)
	if err != nil {
		return nil, err
	}
	def, sched, err := hooks.Define(in, hooks.DefineOptions{HookGroupID: group, HookID: id, PulseAvailable: h.PulseAvailable})
	if err != nil {
		return nil, apiError(err)
	}
	token := ident.NewSlugID()
	sealed, err := h.Sealer.Seal(token, tokenAssociatedAD+def.HookGroupID+"/"+def.HookID)
	if err != nil {
		return nil, fmt.Errorf("sealing the trigger token: %w", err)
	}
	nextTaskID := ident.NewSlugID()
	hk := &store.Hook{HookGroupID: def.HookGroupID, HookID: def.HookID, TriggerToken: sealed, NextTaskID: nextTaskID,
		NextScheduled: nextDue(sched, c.Now), Created: c.Now, LastModified: c.Now}
	if err := storedParts(def, hk); err != nil {
		return nil, err
	}
	existing, err := h.Store.CreateHook(c.Context(), hk)
	if errors.Is(err, store.ErrExists) {
		prev, derr := definitionOf(existing)
		if derr != nil {
			return nil, derr
		}
		if !hooks.Same(def, prev) {
			return nil, &api.Error{Code: api.CodeRequestConflict, Message: fmt.Sprintf("hook `%s/%s` already exists.", def.HookGroupID, def.HookID)}
		}
		return def, nil
	}
	if err != nil {
		return nil, err
	}
	h.audit(c, "created", def, "hook-created")
	return def, nil
}

func (h *handlers) updateHook(c *api.Call) (any, error) {
	in, group, id, err := h.checkCall(c)
	if err != nil {
		return nil, err
	}
	// The existing hook is read so an update without bindings keeps them;
	// the write below re-reads it under its row lock.
	_, existing, err := h.loadHook(c, group, id)
	if err != nil {
		return nil, err
	}
	def, sched, err := hooks.Define(in, hooks.DefineOptions{HookGroupID: group, HookID: id, Existing: existing, PulseAvailable: h.PulseAvailable})
	if err != nil {
		return nil, apiError(err)
	}
	nextTaskID := ident.NewSlugID()
	_, err = h.Store.UpdateHook(c.Context(), group, id, func(hk *store.Hook) error {
		if err := storedParts(def, hk); err != nil {
			return err
		}
		// A new definition starts a new schedule: the next due time is
		// counted from now and gets a new taskId, so a fire of the old
		// definition still in flight records nothing.
		hk.NextTaskID, hk.NextScheduled, hk.ClaimedUntil, hk.LastModified = nextTaskID, nextDue(sched, c.Now), time.Time{}, c.Now
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("No such hook")
	}
	if err != nil {
		return nil, err
	}
	h.audit(c, "updated", def, "hook-updated")
	return def, nil
}

func (h *handlers) removeHook(c *api.Call) (any, error) {
	group, id, err := ids(c)
	if err != nil {
		return nil, err
	}
	if err := h.Store.DeleteHook(c.Context(), group, id); err != nil {
		return nil, err
	}
	h.audit(c, "deleted", &hooks.Definition{HookGroupID: group, HookID: id}, "hook-deleted")
	return map[string]any{}, nil
}

// audit logs a change of a hook and who made it (never a secret), tells
// the Pulse listener, and publishes the change on exchange.
func (h *handlers) audit(c *api.Call, action string, def *hooks.Definition, exchange string) {
	clientID := ""
	if res, err := h.Caller(c); err == nil && res != nil {
		clientID = res.ClientID
	}
	h.Logger.Info("hook "+action, "hookGroupId", def.HookGroupID, "hookId", def.HookID, "clientId", clientID)
	if h.Changed != nil {
		h.Changed()
	}
	if h.Events != nil {
		body, _ := json.Marshal(map[string]string{"hookGroupId": def.HookGroupID, "hookId": def.HookID})
		// The routing key has one reserved word, always "_" (Taskcluster's).
		msg := events.Message{Exchange: exchange, RoutingKey: "_", Body: body}
		if err := h.Events.Publish(c.Context(), msg); err != nil {
			h.Logger.Warn("publishing a hook change", "exchange", exchange, "hookGroupId", def.HookGroupID, "hookId", def.HookID, "error", err)
		}
	}
}
