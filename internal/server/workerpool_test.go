package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// staticPoolWorker creates a static pool (once) and a worker of it,
// registers the worker and returns a client with its credentials.
func staticPoolWorker(t *testing.T, r *running, pool, group, id string) *tcclient.Client {
	t.Helper()
	ctx := context.Background()
	if _, err := r.client.GetWorkerPool(ctx, pool); err != nil {
		_, err := r.client.CreateWorkerPool(ctx, pool, &tcclient.WorkerPoolDefinition{ProviderID: "static", Description: "removal",
			Config: json.RawMessage(`{}`), Owner: "ops@example.com"})
		require.NoError(t, err)
	}
	secret := tcclient.NewTaskID() + tcclient.NewTaskID()
	_, err := r.client.CreateStaticWorker(ctx, pool, group, id, tcclient.NewTime(time.Now().Add(time.Hour)), 2, secret)
	require.NoError(t, err)
	reg, err := (&tcclient.Client{RootURL: r.rootURL}).RegisterStaticWorker(ctx, pool, "static", group, id, secret)
	require.NoError(t, err)
	creds := reg.Credentials
	return &tcclient.Client{RootURL: r.rootURL, Credentials: &creds, MaxRetries: -1}
}

// requireStatus requires err to be an API error with the status.
func requireStatus(t *testing.T, status int, err error, what string) {
	t.Helper()
	require.Error(t, err, what)
	var apiErr *tcclient.APIError
	require.ErrorAs(t, err, &apiErr, what)
	require.Equal(t, status, apiErr.StatusCode, "%s: %v", what, err)
}

// TestRemovedWorkerIsRefusedAndStopsAfterItsRuns removes a registered
// static worker in the middle of a task, on each driver, and checks what
// its credentials may still do: the queue refuses it work (claimWork,
// claimTask) where it used to hand it more tasks, its own task's retry
// among them, and the secrets service its pool's secret; shouldWorkerTerminate answers false while the run its
// removal resolved may still be running on it (its claim not run out),
// where it answered true at once and generic-worker never exited, and
// true after.
func TestRemovedWorkerIsRefusedAndStopsAfterItsRuns(t *testing.T) {
	t.Parallel()
	for _, d := range fuzzDrivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			const claimTimeout = 4 * time.Second
			r := start(t, server.Config{DB: d.db(t), LongPoll: 500 * time.Millisecond, ClaimTimeout: claimTimeout})
			ctx := context.Background()
			const pool = "removal/static"
			worker := staticPoolWorker(t, r, pool, "rack", "m1")
			running, waiting := tcclient.NewTaskID(), tcclient.NewTaskID()
			_, err := r.client.CreateTask(ctx, running, newTask(pool))
			require.NoError(t, err)
			claims, err := worker.ClaimWork(ctx, pool, &tcclient.ClaimWorkRequest{WorkerGroup: "rack", WorkerID: "m1", Tasks: 1})
			require.NoError(t, err)
			require.Len(t, claims.Tasks, 1)
			claim := claims.Tasks[0]
			require.Equal(t, running, claim.Status.TaskID)
			secretName := "worker-pool:" + pool
			require.NoError(t, r.client.SetSecret(ctx, secretName, &tcclient.Secret{Secret: json.RawMessage(`{"token":"pool's"}`),
				Expires: tcclient.NewTime(time.Now().Add(time.Hour))}))
			_, err = worker.GetSecret(ctx, secretName)
			require.NoError(t, err, "the pool's secret, before the removal")
			_, err = r.client.CreateTask(ctx, waiting, newTask(pool))
			require.NoError(t, err)

			require.NoError(t, r.client.RemoveWorker(ctx, pool, "rack", "m1"))
			st, err := r.client.Status(ctx, running)
			require.NoError(t, err)
			require.Equal(t, "exception", st.Runs[0].State)
			require.Equal(t, "worker-shutdown", st.Runs[0].ReasonResolved)
			require.Equal(t, "pending", st.Runs[1].State)

			stop, reason, err := worker.ShouldWorkerTerminate(ctx, pool, "rack", "m1")
			require.NoError(t, err)
			require.False(t, stop, "told to stop while its resolved run's claim lasts: %s", reason)
			t.Logf("shouldWorkerTerminate during the lost run: false (%s)", reason)

			_, err = worker.ClaimWork(ctx, pool, &tcclient.ClaimWorkRequest{WorkerGroup: "rack", WorkerID: "m1", Tasks: 2})
			requireStatus(t, http.StatusConflict, err, "claimWork of a removed worker")
			_, err = worker.ClaimTask(ctx, waiting, 0, &tcclient.ClaimTaskRequest{WorkerGroup: "rack", WorkerID: "m1"})
			requireStatus(t, http.StatusConflict, err, "claimTask of a removed worker")
			_, err = worker.GetSecret(ctx, secretName)
			requireStatus(t, http.StatusUnauthorized, err, "the pool's secret for a removed worker")
			taskClient := &tcclient.Client{RootURL: r.rootURL, Credentials: &claim.Credentials, MaxRetries: -1}
			_, err = taskClient.ReclaimTask(ctx, running, 0)
			requireStatus(t, http.StatusConflict, err, "reclaimTask of the removed worker's resolved run")
			for _, id := range []string{running, waiting} {
				st, err := r.client.Status(ctx, id)
				require.NoError(t, err)
				require.Equal(t, "pending", st.Runs[len(st.Runs)-1].State, "task %s", id)
			}

			testclock.WaitFor(t, time.Minute, "shouldWorkerTerminate to say true once the lost run's claim ran out", func() bool {
				stop, reason, err = worker.ShouldWorkerTerminate(ctx, pool, "rack", "m1")
				require.NoError(t, err)
				return stop
			})
			require.True(t, time.Now().After(claim.TakenUntil.Time), "not before the claim ran out")
			t.Logf("shouldWorkerTerminate after the claim ran out: true (%s)", reason)
		})
	}
}

// TestClaimLandingAsAWorkerIsRemoved: a claimWork long-poll that began
// before the worker was removed is handed a task created after; the
// queue refuses that worker's reclaimTask, shouldWorkerTerminate keeps it
// until the run is resolved, and the worker scanner resolves it (the
// removal found nothing to resolve).
func TestClaimLandingAsAWorkerIsRemoved(t *testing.T) {
	t.Parallel()
	for _, d := range fuzzDrivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			r := start(t, server.Config{DB: d.db(t), LongPoll: 5 * time.Second})
			ctx := context.Background()
			const pool = "removal/landing"
			var (
				claim  tcclient.TaskClaim
				id     string
				worker *tcclient.Client
			)
			for try := 0; ; try++ {
				require.Less(t, try, 5, "the long-poll never waited before the removal")
				id = fmt.Sprintf("m%d", try)
				worker = staticPoolWorker(t, r, pool, "rack", id)
				got := make(chan error, 1)
				var resp *tcclient.ClaimWorkResponse
				go func() {
					var err error
					resp, err = worker.ClaimWork(ctx, pool, &tcclient.ClaimWorkRequest{WorkerGroup: "rack", WorkerID: id, Tasks: 1})
					got <- err
				}()
				time.Sleep(500 * time.Millisecond) // the call is waiting, most likely
				require.NoError(t, r.client.RemoveWorker(ctx, pool, "rack", id))
				taskID := tcclient.NewTaskID()
				_, err := r.client.CreateTask(ctx, taskID, newTask(pool))
				require.NoError(t, err)
				if err := <-got; err != nil {
					requireStatus(t, http.StatusConflict, err, "a claimWork that began after the removal")
					t.Logf("try %d: the claimWork began after the removal; again", try)
					continue
				}
				if len(resp.Tasks) == 0 {
					continue
				}
				claim = resp.Tasks[0]
				break
			}
			taskClient := &tcclient.Client{RootURL: r.rootURL, Credentials: &claim.Credentials, MaxRetries: -1}
			_, err := taskClient.ReclaimTask(ctx, claim.Status.TaskID, claim.RunID)
			requireStatus(t, http.StatusConflict, err, "reclaimTask of a run held by a removed worker")
			stop, reason, err := worker.ShouldWorkerTerminate(ctx, pool, "rack", id)
			require.NoError(t, err)
			require.False(t, stop, "told to stop while it holds a run: %s", reason)
			testclock.WaitFor(t, time.Minute, "the worker scanner to resolve the run the removed worker held", func() bool {
				st, err := r.client.Status(ctx, claim.Status.TaskID)
				require.NoError(t, err)
				return st.Runs[claim.RunID].State == "exception"
			})
			st, err := r.client.Status(ctx, claim.Status.TaskID)
			require.NoError(t, err)
			require.Equal(t, "worker-shutdown", st.Runs[claim.RunID].ReasonResolved)
			require.Equal(t, "pending", st.Runs[claim.RunID+1].State)
		})
	}
}

// TestReregistrationAnswerLost: a worker whose reregisterWorker answer
// never arrived asks again with the secret it holds, on each driver, and
// is answered (it was refused, and the worker could not register again);
// once it uses the secret it then got, the older ones are refused.
func TestReregistrationAnswerLost(t *testing.T) {
	t.Parallel()
	for _, d := range fuzzDrivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			r := start(t, server.Config{DB: d.db(t)})
			ctx := context.Background()
			const pool = "reregister/static"
			_, err := r.client.CreateWorkerPool(ctx, pool, &tcclient.WorkerPoolDefinition{ProviderID: "static", Description: "lost answers",
				Config: json.RawMessage(`{}`), Owner: "ops@example.com"})
			require.NoError(t, err)
			static := tcclient.NewTaskID() + tcclient.NewTaskID()
			_, err = r.client.CreateStaticWorker(ctx, pool, "rack", "m1", tcclient.NewTime(time.Now().Add(time.Hour)), 1, static)
			require.NoError(t, err)
			reg, err := (&tcclient.Client{RootURL: r.rootURL}).RegisterStaticWorker(ctx, pool, "static", "rack", "m1", static)
			require.NoError(t, err)
			as := func(reg *tcclient.WorkerRegistration) *tcclient.Client {
				creds := reg.Credentials
				return &tcclient.Client{RootURL: r.rootURL, Credentials: &creds, MaxRetries: -1}
			}
			first := reg.Secret
			lost, err := as(reg).ReregisterWorker(ctx, pool, "rack", "m1", first)
			require.NoError(t, err)
			// Its answer is lost: the worker asks again with what it has.
			again, err := as(reg).ReregisterWorker(ctx, pool, "rack", "m1", first)
			require.NoError(t, err, "a worker whose reregistration answer was lost")
			require.NotEqual(t, lost.Secret, again.Secret)
			_, err = as(again).ReregisterWorker(ctx, pool, "rack", "m1", lost.Secret)
			requireStatus(t, http.StatusBadRequest, err, "the lost secret, replaced")
			next, err := as(again).ReregisterWorker(ctx, pool, "rack", "m1", again.Secret)
			require.NoError(t, err)
			for _, old := range []string{first, lost.Secret} {
				_, err = as(next).ReregisterWorker(ctx, pool, "rack", "m1", old)
				requireStatus(t, http.StatusBadRequest, err, "a secret retired by the use of its successor")
			}
			_, err = as(next).ReregisterWorker(ctx, pool, "rack", "m1", next.Secret)
			require.NoError(t, err)
		})
	}
}
