package workerpool_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/storetest"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
	"github.com/hopper-ci/hopper/internal/workermanager"
	"github.com/hopper-ci/hopper/internal/workerpool"
)

// TestStoppedWorkersRunsResolvedWhateverStoppedIt stops a worker the way
// a removeWorker cut short leaves it (the worker recorded stopped or
// stopping, its claimed runs not resolved: the replica died between the
// two steps, and the client's retry found it already stopped) and checks
// that the worker scanner resolves what it still holds
// exception/worker-shutdown, with a retry run, on both drivers, once: a
// second pass (or a second scanner) changes nothing.
func TestStoppedWorkersRunsResolvedWhateverStoppedIt(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		for _, providerType := range []string{workermanager.ProviderTypeStatic, workermanager.ProviderTypeDocker} {
			t.Run(driver+"/"+providerType, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				st := replicas(t, driver, 2)
				clock := testclock.New(time.Now().Truncate(time.Millisecond))
				now := clock.Now()
				providerID := "static"
				providers := map[string]workerpool.PoolProvider{}
				if providerType != workermanager.ProviderTypeStatic {
					providerID = "docker"
					providers[providerID] = workerpool.PoolProvider{Type: providerType, Provider: idleEngine{}}
				}
				pool := &workermanager.Pool{WorkerPoolID: testQueue, ProviderID: providerID, PreviousProviderIDs: []string{},
					Config: json.RawMessage(`{}`), Owner: "o@example.com", Created: now, LastModified: now}
				require.NoError(t, st[0].CreateWorkerPool(ctx, pool))
				w := workermanager.NewRequestedWorker(pool, "g", "w", 3, now)
				w.State, w.RegisteredAt = workermanager.StateRunning, now
				_, err := st[0].CreatePoolWorker(ctx, w)
				require.NoError(t, err)
				// Another worker of the pool, still running, keeps its run.
				other := workermanager.NewRequestedWorker(pool, "g", "other", 1, now)
				other.State, other.RegisteredAt = workermanager.StateRunning, now
				_, err = st[0].CreatePoolWorker(ctx, other)
				require.NoError(t, err)

				claim := func(workerID string) string {
					id := tcclient.NewTaskID()
					_, err := st[0].CreateTask(ctx, store.CreateTaskParams{TaskID: id, Task: storetest.NewTask(testQueue, now), Now: now})
					require.NoError(t, err)
					res, err := st[0].ClaimWork(ctx, store.ClaimWorkParams{TaskQueueID: testQueue, WorkerGroup: "g", WorkerID: workerID,
						Count: 1, Now: now, TakenUntil: now.Add(20 * time.Minute)})
					require.NoError(t, err)
					require.Len(t, res.Claims, 1)
					return id
				}
				held := []string{claim("w"), claim("w"), claim("w")}
				kept := claim("other")

				// The first step of removeWorker, alone.
				_, err = st[0].UpdatePoolWorker(ctx, w.Key(), func(w *workermanager.Worker) error {
					w.Remove(providerType, now)
					return nil
				})
				require.NoError(t, err)

				clock.Advance(time.Second)
				pub := &storetest.ChangeRecorder{}
				scanners := make([]*workerpool.WorkerScanner, len(st))
				for i := range st {
					scanners[i] = &workerpool.WorkerScanner{Store: st[i], Providers: providers,
						Resolver: &workerpool.WorkerRunResolver{Store: st[i], Publisher: pub}, Holder: "scanner", Clock: clock}
				}
				_, err = scanners[0].RunOnce(ctx)
				require.NoError(t, err)
				for _, id := range held {
					task, err := st[0].GetTask(ctx, id)
					require.NoError(t, err)
					require.Len(t, task.Runs, 2, "task %s: the stopped worker's run resolved and retried", id)
					require.Equal(t, queue.StateException, task.Runs[0].State)
					require.Equal(t, queue.ReasonWorkerShutdown, task.Runs[0].ReasonResolved)
					require.Equal(t, queue.StatePending, task.Runs[1].State)
				}
				task, err := st[0].GetTask(ctx, kept)
				require.NoError(t, err)
				require.Len(t, task.Runs, 1)
				require.Equal(t, queue.StateRunning, task.Runs[0].State, "a running worker's run is left alone")
				require.Len(t, pub.Events(held...), 2*len(held), "one exception and one pending event per run: %v", pub.Events())

				// Again, on the other replica: nothing more.
				clock.Advance(time.Minute)
				_, err = scanners[1].RunOnce(ctx)
				require.NoError(t, err)
				_, err = scanners[0].RunOnce(ctx)
				require.NoError(t, err)
				require.Len(t, pub.Events(held...), 2*len(held), "resolved once: %v", pub.Events())
				for _, id := range held {
					task, err := st[1].GetTask(ctx, id)
					require.NoError(t, err)
					require.Len(t, task.Runs, 2)
				}
			})
		}
	}
}
