package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// BulkFiller adds n pending copies of the pending task seedID to its task
// queue, named seedID-1 … seedID-n and each queued behind the one before,
// by a fast path of the driver's tests (a single INSERT … SELECT), so large
// queues can be set up in seconds rather than through n createTask
// transactions.
type BulkFiller func(tb testing.TB, seedID string, n int)

// BenchClaimWork measures claimWork of one task from a queue holding
// pending tasks. Each claimed task is replaced, outside the timer, by a new
// one, so the queue keeps its length throughout.
func BenchClaimWork(b *testing.B, s store.Store, pending int, fill BulkFiller) {
	ctx := context.Background()
	create := func(id string) {
		_, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: id, Task: NewTask(testQueue, Epoch, withGroup("bench")), Now: Epoch})
		if err != nil {
			b.Fatal(err)
		}
	}
	began := time.Now()
	create("seed")
	fill(b, "seed", pending-1)
	if n, _, err := s.TaskQueueCounts(ctx, testQueue, Epoch); err != nil || n != pending {
		b.Fatalf("queue holds %d pending tasks, want %d (err %v)", n, pending, err)
	}
	b.Logf("filled the queue with %d pending tasks in %s", pending, time.Since(began))

	now := Epoch.Add(time.Minute)
	i := 0
	for b.Loop() {
		res, err := s.ClaimWork(ctx, store.ClaimWorkParams{TaskQueueID: testQueue, WorkerGroup: workerGroup, WorkerID: workerID,
			Count: 1, Now: now, TakenUntil: now.Add(claimTimeout)})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Claims) != 1 {
			b.Fatalf("claimed %d tasks, want 1", len(res.Claims))
		}
		b.StopTimer()
		create(fmt.Sprintf("refill-%d", i))
		i++
		b.StartTimer()
	}
}

// BenchCreateClaimComplete measures one task's whole life: createTask,
// claimWork and reportCompleted.
func BenchCreateClaimComplete(b *testing.B, s store.Store) {
	ctx := context.Background()
	now := Epoch
	i := 0
	for b.Loop() {
		id := fmt.Sprintf("life-%d", i)
		i++
		if _, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: id, Task: NewTask(testQueue, now, withGroup("bench")), Now: now}); err != nil {
			b.Fatal(err)
		}
		res, err := s.ClaimWork(ctx, store.ClaimWorkParams{TaskQueueID: testQueue, WorkerGroup: workerGroup, WorkerID: workerID,
			Count: 1, Now: now, TakenUntil: now.Add(claimTimeout)})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Claims) != 1 || res.Claims[0].Task.TaskID != id {
			b.Fatalf("claimed %d tasks, want %s", len(res.Claims), id)
		}
		_, err = s.UpdateTask(ctx, store.UpdateTaskParams{TaskID: id, Now: now, Apply: func(ts *queue.TaskState, tr *queue.Transition) error {
			return ts.ReportCompleted(0, now, tr)
		}})
		if err != nil {
			b.Fatal(err)
		}
	}
}
