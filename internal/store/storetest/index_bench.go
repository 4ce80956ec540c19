package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// BenchReportCompleted measures UpdateTask resolving a claimed task
// completed (what reportCompleted costs the store), for tasks with the
// given routes: none, or index routes whose entries are written in the
// same transaction. Creating and claiming each task is left out of the
// timing.
func BenchReportCompleted(b *testing.B, s store.Store, routes []string) {
	ctx := context.Background()
	now := Epoch
	i := 0
	for b.Loop() {
		b.StopTimer()
		id := fmt.Sprintf("done-%d", i)
		i++
		var taskRoutes []string
		for _, r := range routes {
			taskRoutes = append(taskRoutes, fmt.Sprintf(r, i))
		}
		def := NewTask(testQueue, now, withGroup("bench"), withRoutes(taskRoutes...))
		if _, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: id, Task: def, Now: now}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.UpdateTask(ctx, store.UpdateTaskParams{TaskID: id, Now: now, Apply: func(ts *queue.TaskState, tr *queue.Transition) error {
			return ts.Claim(0, workerGroup, workerID, now, now.Add(claimTimeout), tr)
		}}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		_, err := s.UpdateTask(ctx, store.UpdateTaskParams{TaskID: id, Now: now, Apply: func(ts *queue.TaskState, tr *queue.Transition) error {
			return ts.ReportCompleted(0, now, tr)
		}})
		if err != nil {
			b.Fatal(err)
		}
	}
}
