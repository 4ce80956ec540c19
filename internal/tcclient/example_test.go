package tcclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/tcclient/tcclienttest"
)

// Example shows the worker side of the queue protocol: claim a task, use
// the claim's temporary credentials for everything about that run, and
// resolve it.
func Example() {
	ctx := context.Background()
	queue := tcclienttest.New(tcclienttest.Options{})
	defer queue.Close()
	admin := queue.Client(queue.AddClient("admin", "*"))
	worker := queue.Client(queue.AddClient("worker", "queue:claim-work:proj/builder", "queue:worker-id:grp/w1"))

	now := time.Now()
	taskID := tcclient.NewTaskID()
	_, _ = admin.CreateTask(ctx, taskID, &tcclient.TaskDefinition{
		TaskQueueID: "proj/builder",
		Created:     tcclient.NewTime(now),
		Deadline:    tcclient.NewTime(now.Add(time.Hour)),
		Payload:     json.RawMessage(`{"command": [["true"]], "maxRunTime": 60}`),
		Metadata:    tcclient.TaskMetadata{Name: "example", Description: "d", Owner: "me@example.com", Source: "https://example.com"},
	})

	resp, err := worker.ClaimWork(ctx, "proj/builder", &tcclient.ClaimWorkRequest{WorkerGroup: "grp", WorkerID: "w1", Tasks: 1})
	if err != nil || len(resp.Tasks) == 0 {
		fmt.Println("no claim:", err)
		return
	}
	claim := resp.Tasks[0]
	run := worker.WithCredentials(&claim.Credentials)
	status, err := run.ReportCompleted(ctx, claim.Status.TaskID, claim.RunID)
	if err != nil {
		fmt.Println("report failed:", err)
		return
	}
	fmt.Println(status.State)
	// Output: completed
}
