// Package flowapi serves the read side of the queue's flow control
// (README "Flow control") for the web console and scripts:
//
//	GET /api/flow/v1/task-queues/<provisionerId>/<workerType>/keys
//
// answers each flow key of the task queue with its policy (the newest
// task's declaration) and its pending, running and held-back tasks. It
// needs the scope that reading the queue's pending count needs.
package flowapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/store"
)

// Key is one flow key as the endpoint answers it.
type Key struct {
	Key              string `json:"key"`
	Limit            int    `json:"limit"` // 0: no limit
	Supersede        bool   `json:"supersede"`
	CancelInProgress bool   `json:"cancelInProgress"`
	Pending          int    `json:"pending"`
	Running          int    `json:"running"`
	// Limited counts the pending tasks the limit holds back.
	Limited    int   `json:"limited"`
	Superseded int64 `json:"superseded"`
	Canceled   int64 `json:"canceled"`
}

// Response is the endpoint's answer.
type Response struct {
	TaskQueueID string `json:"taskQueueId"`
	Keys        []Key  `json:"keys"`
}

// BasePath is where the flow-control API lives below the root URL.
const BasePath = "/api/flow/v1"

// Deps are what the flow-control API needs.
type Deps struct {
	Store store.FlowStore
	// Version is reported by __version__.
	Version string
}

// Routes returns the routes for api.Options.Routes.
func Routes(d Deps) []api.Route {
	st := d.Store
	return append(api.ServiceHealthRoutes(BasePath, time.Now(), d.Version), api.Route{
		Name: "flowKeys", Method: http.MethodGet,
		Paths:       []string{BasePath + "/task-queues/{taskQueueId}/keys", BasePath + "/task-queues/{tqProvisioner}/{tqWorkerType}/keys"},
		Scopes:      `"queue:pending-count:<taskQueueId>"`,
		EarlyScopes: true,
		Handle: func(c *api.Call) (any, error) {
			taskQueueID := c.Params["taskQueueId"]
			keys, err := st.FlowKeys(c.Context(), taskQueueID)
			if err != nil {
				return nil, fmt.Errorf("listing flow keys of %s: %w", taskQueueID, err)
			}
			out := Response{TaskQueueID: taskQueueID, Keys: make([]Key, 0, len(keys))}
			for _, k := range keys {
				out.Keys = append(out.Keys, Key{Key: k.Key, Limit: k.Limit, Supersede: k.Supersede, CancelInProgress: k.CancelInProgress,
					Pending: k.Pending, Running: k.Running, Limited: k.Limited(), Superseded: k.Superseded, Canceled: k.Canceled})
			}
			return out, nil
		},
	})
}
