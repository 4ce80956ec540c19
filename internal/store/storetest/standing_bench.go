package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/workermanager"
)

// BenchWorkerStanding measures what claimWork and reclaimTask ask of the
// store to refuse a worker its pool's manager stopped, both ways: "ahead"
// is the look of its own before the claim (the pool worker read, and for
// a reclaim the task read to find its holder) and then the claim, as the
// queue did before; "folded" reads the standing in the claim's first
// round trip (ClaimWorkParams.CheckStopped, UpdateTaskParams.Standing).
// statements, when set, counts the statements the store sent so far
// (reported per call).
func BenchWorkerStanding(b *testing.B, s store.Store, statements func() int64) {
	ctx := context.Background()
	key := store.WorkerKey{TaskQueueID: testQueue, WorkerGroup: workerGroup, WorkerID: workerID}
	if _, err := s.CreatePoolWorker(ctx, newPoolWorker(testQueue, workerGroup, workerID, workermanager.StateRunning)); err != nil {
		b.Fatal(err)
	}
	lookAhead := func() {
		if _, err := s.GetPoolWorker(ctx, workermanager.Key{WorkerPoolID: key.TaskQueueID, WorkerGroup: key.WorkerGroup, WorkerID: key.WorkerID}); err != nil {
			b.Fatal(err)
		}
	}
	created := 0
	create := func() string {
		created++
		id := fmt.Sprintf("standing-%d", created)
		if _, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: id, Task: NewTask(testQueue, Epoch, withGroup("bench")), Now: Epoch}); err != nil {
			b.Fatal(err)
		}
		return id
	}
	for range 100 {
		create()
	}
	now := Epoch.Add(time.Minute)
	count := func() int64 {
		if statements == nil {
			return 0
		}
		return statements()
	}
	var held string
	for _, folded := range []bool{false, true} {
		name := map[bool]string{false: "ahead", true: "folded"}[folded]
		b.Run("claimWork/"+name, func(b *testing.B) {
			var sent int64
			for b.Loop() {
				before := count()
				if !folded {
					lookAhead()
				}
				res, err := s.ClaimWork(ctx, store.ClaimWorkParams{TaskQueueID: testQueue, WorkerGroup: workerGroup, WorkerID: workerID,
					Count: 1, Now: now, TakenUntil: now.Add(claimTimeout), CheckQuarantine: true, CheckStopped: folded})
				if err != nil || len(res.Claims) != 1 {
					b.Fatalf("claimed %v (err %v), want one task", res, err)
				}
				sent += count() - before
				b.StopTimer()
				held = res.Claims[0].Task.TaskID
				create()
				b.StartTimer()
			}
			if statements != nil {
				b.ReportMetric(float64(sent)/float64(b.N), "statements/call")
			}
		})
	}
	for _, folded := range []bool{false, true} {
		name := map[bool]string{false: "ahead", true: "folded"}[folded]
		b.Run("reclaimTask/"+name, func(b *testing.B) {
			var sent int64
			for b.Loop() {
				now = now.Add(time.Millisecond) // each reclaim moves takenUntil
				before := count()
				var standing *store.WorkerStanding
				if folded {
					standing = &store.WorkerStanding{RunID: 0}
				} else {
					if _, err := s.GetTask(ctx, held); err != nil {
						b.Fatal(err)
					}
					lookAhead()
				}
				_, err := s.UpdateTask(ctx, store.UpdateTaskParams{TaskID: held, Now: now, Standing: standing,
					Apply: func(t *queue.TaskState, _ *queue.Transition) error {
						if standing != nil && standing.Stopped {
							return fmt.Errorf("the holder was stopped")
						}
						return t.Reclaim(0, now, now.Add(claimTimeout))
					}})
				if err != nil {
					b.Fatal(err)
				}
				sent += count() - before
			}
			if statements != nil {
				b.ReportMetric(float64(sent)/float64(b.N), "statements/call")
			}
		})
	}
}
