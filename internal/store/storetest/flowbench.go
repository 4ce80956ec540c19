package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// BenchFlowClaimWork measures claimWork of one task from a queue whose
// backlog of pending tasks is spread over keys with a limit of one, every
// key at its limit. With keyed set, each iteration first completes (outside
// the timer) the running task of the next key, so the claim finds exactly
// one key with room among them all; otherwise the claim takes a plain task
// created outside the timer, past the whole held-back backlog. Claimed
// keyed tasks are replaced outside the timer, so the backlog keeps its size.
// The driver's filler must copy flow_key and flow.
func BenchFlowClaimWork(b *testing.B, s store.Store, pending, keys int, keyed bool, fill BulkFiller) {
	ctx := context.Background()
	now := Epoch.Add(time.Minute)
	create := func(id string, key int) {
		mutate := []func(*queue.Task){withGroup("bench")}
		if key >= 0 {
			mutate = append(mutate, withFlow(fmt.Sprintf(`{"key": "key-%d", "limit": 1}`, key)))
		}
		if _, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: id, Task: NewTask(testQueue, Epoch, mutate...), Now: Epoch}); err != nil {
			b.Fatal(err)
		}
	}
	claim := func(want int) []store.Claimed {
		res, err := s.ClaimWork(ctx, store.ClaimWorkParams{TaskQueueID: testQueue, WorkerGroup: workerGroup, WorkerID: workerID,
			Count: want, Now: now, TakenUntil: now.Add(claimTimeout)})
		if err != nil {
			b.Fatal(err)
		}
		return res.Claims
	}
	complete := func(taskID string) {
		_, err := s.UpdateTask(ctx, store.UpdateTaskParams{TaskID: taskID, Now: now, Apply: report(queue.StateCompleted, 0, now)})
		if err != nil {
			b.Fatal(err)
		}
	}
	began := time.Now()
	for k := range keys {
		seed := fmt.Sprintf("seed%d", k)
		create(seed, k)
		fill(b, seed, pending/keys-1)
	}
	// Every key takes its one running task.
	running := make([]string, keys)
	for taken := 0; taken < keys; {
		claims := claim(32)
		if len(claims) == 0 {
			b.Fatalf("only %d of %d keys had a task claimed", taken, keys)
		}
		for _, c := range claims {
			var k int
			if _, err := fmt.Sscanf(c.Task.TaskID, "seed%d", &k); err != nil {
				b.Fatalf("claimed %s: %v", c.Task.TaskID, err)
			}
			running[k] = c.Task.TaskID
			taken++
		}
	}
	b.Logf("queued %d tasks over %d keys, each at its limit, in %s", pending, keys, time.Since(began))

	i := 0
	for b.Loop() {
		b.StopTimer()
		k := i % keys
		if keyed {
			complete(running[k])
		} else {
			create(fmt.Sprintf("plain%d", i), -1)
		}
		b.StartTimer()
		claims := claim(1)
		b.StopTimer()
		if len(claims) != 1 {
			b.Fatalf("claimed %d tasks, want 1", len(claims))
		}
		if keyed {
			running[k] = claims[0].Task.TaskID
			create(fmt.Sprintf("refill%d", i), k)
		}
		i++
		b.StartTimer()
	}
}
