package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// HistoryIndexes are the indexes migration 013 added to find past tasks
// (store.HistoryStore): those of task_group_members, written when a task
// is created, and the partial ones of tasks, written when it resolves.
// The history benchmarks drop them to measure what they cost.
var HistoryIndexes = []string{
	"task_group_members_created", "task_group_members_queue_created",
	"tasks_resolved_created", "tasks_resolved_queue_created",
}

// BenchCreateTask measures createTask of a task without dependencies, in
// a group of 100 tasks (a CI graph's), on a store already holding
// prefilled tasks (copies through fill), each created a millisecond after
// the one before so that the time indexes grow at their end, as they do.
func BenchCreateTask(b *testing.B, s store.Store, prefill int, fill BulkFiller) {
	ctx := context.Background()
	if prefill > 0 {
		if _, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: "seed", Task: NewTask(testQueue, Epoch, withGroup("seed-group")), Now: Epoch}); err != nil {
			b.Fatal(err)
		}
		began := time.Now()
		fill(b, "seed", prefill)
		b.Logf("prefilled %d tasks in %s", prefill, time.Since(began))
	}
	i := 0
	for b.Loop() {
		now := Epoch.Add(time.Duration(i) * time.Millisecond)
		task := NewTask(testQueue, now, withGroup(fmt.Sprintf("group-%d", i/100)), func(t *queue.Task) { t.Metadata.Name = fmt.Sprintf("build %d", i) })
		if _, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: fmt.Sprintf("created-%d", i), Task: task, Now: now}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
