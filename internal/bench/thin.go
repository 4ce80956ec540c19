package bench

import (
	"context"
	"fmt"
	"net/http"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// The benchmark's creators and workers share the machine with the queue
// they measure, so they decode only what they use from each reply, as a
// thin worker would: the queue's own work (and every byte it sends) is
// unchanged, and less of the machine goes to the load generator.

// thinClaim is what a benchmark worker uses of a claim.
type thinClaim struct {
	Status struct {
		TaskID string `json:"taskId"`
	} `json:"status"`
	RunID       int                  `json:"runId"`
	Credentials tcclient.Credentials `json:"credentials"`
}

// thinStatus is what the benchmark checks of a status reply.
type thinStatus struct {
	Status struct {
		TaskID string `json:"taskId"`
	} `json:"status"`
}

func claimWorkThin(ctx context.Context, c *tcclient.Client, taskQueueID string, req *tcclient.ClaimWorkRequest) ([]thinClaim, error) {
	var out struct {
		Tasks []thinClaim `json:"tasks"`
	}
	if err := c.Do(ctx, http.MethodPost, "/claim-work/"+tcclient.EscapePathParam(taskQueueID), nil, req, &out); err != nil {
		return nil, fmt.Errorf("claiming work from %s: %w", taskQueueID, err)
	}
	return out.Tasks, nil
}

func createTaskThin(ctx context.Context, c *tcclient.Client, taskID string, def *tcclient.TaskDefinition) error {
	var out thinStatus
	if err := c.Do(ctx, http.MethodPut, "/task/"+tcclient.EscapePathParam(taskID), nil, def, &out); err != nil {
		return fmt.Errorf("creating task %s: %w", taskID, err)
	}
	if out.Status.TaskID != taskID {
		return fmt.Errorf("creating task %s: the reply is about %q", taskID, out.Status.TaskID)
	}
	return nil
}

func reportCompletedThin(ctx context.Context, c *tcclient.Client, claim *thinClaim) error {
	var out thinStatus
	path := fmt.Sprintf("/task/%s/runs/%d/completed", tcclient.EscapePathParam(claim.Status.TaskID), claim.RunID)
	if err := c.WithCredentials(&claim.Credentials).Do(ctx, http.MethodPost, path, nil, nil, &out); err != nil {
		return fmt.Errorf("reporting task %s run %d completed: %w", claim.Status.TaskID, claim.RunID, err)
	}
	return nil
}
