package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestIndexSurvivesReplicaKill: two `hopper serve` replicas share one
// PostgreSQL database; reportCompleted calls for tasks with index routes
// pour into replica A, which is killed (SIGKILL) while they are in flight.
// The calls that failed are repeated on replica B. Every task must end
// completed and indexed at its own path, and the shared path must hold the
// highest rank: no completion is ever committed without its index entries.
func TestIndexSurvivesReplicaKill(t *testing.T) {
	t.Parallel()
	db := e2e.FreshPostgres(t)
	args := []string{"--db", db, "--claim-timeout", "10m"}
	env := []string{"HOPPER_SECRET_KEY=" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"}
	a := e2e.StartServer(t, e2e.ServerOptions{Args: args, Env: env})
	b := e2e.StartServer(t, e2e.ServerOptions{Args: args, Env: env})
	ca, cb := rootClient(a), rootClient(b)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const tasks, reporters, killAfter = 600, 16, 150
	const q = "replicas/index"
	ids := make([]string, tasks)
	rank := map[string]int{}
	for i := range ids {
		ids[i] = tcclient.NewTaskID()
		rank[ids[i]] = i
		def := newTask(q)
		def.Routes = []string{"index.kill.each." + ids[i], "index.kill.latest"}
		def.Extra = json.RawMessage(fmt.Sprintf(`{"index": {"rank": %d}}`, i))
		_, err := cb.CreateTask(ctx, ids[i], def)
		require.NoError(t, err)
	}
	var claims []tcclient.TaskClaim
	for len(claims) < tasks {
		res, err := cb.ClaimWork(ctx, q, &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w", Tasks: 32})
		require.NoError(t, err)
		claims = append(claims, res.Tasks...)
	}

	// Report on A from many goroutines; kill A once killAfter succeeded.
	var (
		wg     sync.WaitGroup
		done   atomic.Int64
		next   atomic.Int64
		mu     sync.Mutex
		failed []tcclient.TaskClaim
		killed sync.Once
	)
	for range reporters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(claims) {
					return
				}
				cl := claims[i]
				creds := cl.Credentials
				rc, rcancel := context.WithTimeout(ctx, 10*time.Second)
				c := ca.WithCredentials(&creds)
				c.MaxRetries = -1
				_, err := c.ReportCompleted(rc, cl.Status.TaskID, cl.RunID)
				rcancel()
				if err != nil {
					mu.Lock()
					failed = append(failed, cl)
					mu.Unlock()
					continue
				}
				if done.Add(1) == killAfter {
					killed.Do(func() { require.NoError(t, a.Signal(syscall.SIGKILL)) })
				}
			}
		}()
	}
	wg.Wait()
	<-a.Done()
	t.Logf("%d reports answered by A before it was killed, %d to repeat on B", done.Load(), len(failed))
	require.NotEmpty(t, failed, "A was killed before the reports ended")

	// Repeat what A did not answer on B: a report A committed before dying
	// is answered 409 (its run is already resolved), which is fine.
	for _, cl := range failed {
		creds := cl.Credentials
		_, err := cb.WithCredentials(&creds).ReportCompleted(ctx, cl.Status.TaskID, cl.RunID)
		if err != nil {
			require.Equal(t, 409, tcclient.StatusCode(err), "repeating reportCompleted of %s on B: %v", cl.Status.TaskID, err)
		}
	}

	for _, id := range ids {
		st, err := cb.Status(ctx, id)
		require.NoError(t, err)
		require.Equal(t, tcclient.StateCompleted, st.State, "task %s", id)
		e, err := cb.FindIndexedTask(ctx, "kill.each."+id)
		require.NoError(t, err, "completed task %s is missing from the index", id)
		require.Equal(t, id, e.TaskID)
		require.Equal(t, float64(rank[id]), e.Rank)
	}
	latest, err := cb.FindIndexedTask(ctx, "kill.latest")
	require.NoError(t, err)
	require.Equal(t, ids[tasks-1], latest.TaskID, "the highest rank holds the shared path")
	list, err := cb.ListIndexedTasks(ctx, "kill.each", tcclient.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Tasks, tasks)
}
