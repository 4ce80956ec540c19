package hooksapi

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/hooks"
	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

func (h *handlers) triggerHook(c *api.Call) (any, error) {
	group, id, err := ids(c)
	if err != nil {
		return nil, err
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"hookGroupId": group, "hookId": id}); err != nil {
		return nil, err
	}
	res, err := h.Caller(c)
	if err != nil {
		return nil, err
	}
	_, def, err := h.loadHook(c, group, id)
	if err != nil {
		return nil, err
	}
	return h.trigger(c, def, hooks.FiredByTriggerHook, res.ClientID)
}

func (h *handlers) triggerHookWithToken(c *api.Call) (any, error) {
	group, id, err := ids(c)
	if err != nil {
		return nil, err
	}
	stored, def, err := h.loadHook(c, group, id)
	if err != nil {
		return nil, err
	}
	token, err := h.openToken(stored)
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(c.Params["token"])) != 1 {
		return nil, &api.Error{Code: api.CodeAuthenticationFailed, Message: "invalid hook token"}
	}
	return h.trigger(c, def, hooks.FiredByToken, "")
}

// trigger is what triggerHook and triggerHookWithToken share: check the
// payload, fire, record the fire, answer.
func (h *handlers) trigger(c *api.Call, def *hooks.Definition, firedBy, clientID string) (any, error) {
	taskID, err := hooks.CheckTriggerPayload(def, c.Input)
	if err != nil {
		// A refused payload is a failed fire, recorded like a template
		// that fails to render, so the hook's owner sees in its fires
		// what its callers sent wrong (Taskcluster records nothing).
		refused := &store.LastFire{HookGroupID: def.HookGroupID, HookID: def.HookID, FiredBy: firedBy,
			TaskID: ident.NewSlugID(), TaskCreateTime: c.Now.UTC(), Result: hooks.ResultError, Error: err.Error()}
		if err := h.Store.AddLastFire(c.Context(), refused); err != nil {
			return nil, err
		}
		return nil, apiError(err)
	}
	if taskID == "" {
		taskID = ident.NewSlugID()
	}
	var payload any
	if err := json.Unmarshal(c.Input, &payload); err != nil {
		return nil, fmt.Errorf("decoding the trigger payload: %w", err)
	}
	out, err := h.Firer.fire(c.Context(), def, hooks.Fire{FiredBy: firedBy, TaskID: taskID, Payload: payload, ClientID: clientID, Now: c.Now})
	if err != nil {
		return nil, err
	}
	if out.record != nil {
		if err := h.Store.AddLastFire(c.Context(), out.record); err != nil {
			return nil, err
		}
	}
	if out.refusal != nil {
		return nil, apiError(out.refusal)
	}
	if out.taskID == "" {
		return map[string]any{}, nil
	}
	return map[string]any{"taskId": out.taskID, "status": map[string]any{"taskId": out.taskID}}, nil
}

func (h *handlers) openToken(stored *store.Hook) (string, error) {
	token, err := h.Sealer.Open(stored.TriggerToken, tokenAssociatedAD+stored.HookGroupID+"/"+stored.HookID)
	if err != nil {
		return "", fmt.Errorf("opening the trigger token of hook %s/%s: %w", stored.HookGroupID, stored.HookID, err)
	}
	return token, nil
}

func (h *handlers) getTriggerToken(c *api.Call) (any, error) {
	group, id, err := ids(c)
	if err != nil {
		return nil, err
	}
	stored, _, err := h.loadHook(c, group, id)
	if err != nil {
		return nil, err
	}
	token, err := h.openToken(stored)
	if err != nil {
		return nil, err
	}
	return map[string]string{"token": token}, nil
}

func (h *handlers) resetTriggerToken(c *api.Call) (any, error) {
	group, id, err := ids(c)
	if err != nil {
		return nil, err
	}
	token := ident.NewSlugID()
	sealed, err := h.Sealer.Seal(token, tokenAssociatedAD+group+"/"+id)
	if err != nil {
		return nil, fmt.Errorf("sealing the trigger token: %w", err)
	}
	_, err = h.Store.UpdateHook(c.Context(), group, id, func(hk *store.Hook) error {
		hk.TriggerToken = sealed
		hk.LastModified = c.Now
		return nil
	})
	if err != nil {
		if apiErr := notFoundIfMissing(err); apiErr != nil {
			return nil, apiErr
		}
		return nil, err
	}
	return map[string]string{"token": token}, nil
}

func (h *handlers) listLastFires(c *api.Call) (any, error) {
	group, id, err := ids(c)
	if err != nil {
		return nil, err
	}
	fires, next, err := h.Store.ListLastFires(c.Context(), group, id, c.Page())
	if err != nil {
		return nil, err
	}
	if len(fires) == 0 {
		// A hook that never fired has an empty history; only a hook that
		// does not exist is not found.
		if _, _, err := h.loadHook(c, group, id); err != nil {
			return nil, err
		}
		return map[string]any{"lastFires": []any{}}, nil
	}
	taskIDs := make([]string, 0, len(fires))
	for _, f := range fires {
		taskIDs = append(taskIDs, f.TaskID)
	}
	tasks, err := h.Store.GetTasks(c.Context(), taskIDs)
	if err != nil {
		return nil, err
	}
	states := map[string]string{}
	for _, t := range tasks {
		if t != nil {
			states[t.TaskID] = string(t.Status().State)
		}
	}
	type entry struct {
		HookGroupID    string `json:"hookGroupId"`
		HookID         string `json:"hookId"`
		FiredBy        string `json:"firedBy"`
		TaskID         string `json:"taskId"`
		TaskCreateTime string `json:"taskCreateTime"`
		Result         string `json:"result"`
		Error          string `json:"error"`
		TaskState      string `json:"taskState"`
	}
	out := make([]entry, 0, len(fires))
	for _, f := range fires {
		state := states[f.TaskID]
		if state == "" {
			state = "unknown"
		}
		out = append(out, entry{f.HookGroupID, f.HookID, f.FiredBy, f.TaskID,
			queue.NewTime(f.TaskCreateTime).String(), f.Result, f.Error, state})
	}
	reply := map[string]any{"lastFires": out}
	if next != "" {
		reply["continuationToken"] = next
	}
	return reply, nil
}
