package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

func rootClient(srv *e2e.Server) *tcclient.Client {
	return &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
}

func newTask(taskQueueID string) *tcclient.TaskDefinition {
	now := time.Now()
	return &tcclient.TaskDefinition{
		TaskQueueID: taskQueueID,
		Created:     tcclient.NewTime(now),
		Deadline:    tcclient.NewTime(now.Add(time.Hour)),
		Payload:     json.RawMessage(`{}`),
		Metadata:    tcclient.TaskMetadata{Name: "replica", Description: "replica test", Owner: "e2e@example.com", Source: "https://example.com"},
	}
}

// TestReplicasShareOnePostgres runs two `hopper serve` processes on one
// database, like replicas behind a load balancer: 32 claimers split between
// them take 2,000 tasks, and every task is claimed exactly once; a
// claimWork waiting on one replica wakes when the other makes a task
// pending.
func TestReplicasShareOnePostgres(t *testing.T) {
	t.Parallel()
	db := e2e.FreshPostgres(t)
	args := []string{"--db", db, "--claim-timeout", "10m"}
	env := []string{"HOPPER_SECRET_KEY=" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"}
	a := e2e.StartServer(t, e2e.ServerOptions{Args: args, Env: env})
	b := e2e.StartServer(t, e2e.ServerOptions{Args: args, Env: env})
	ca, cb := rootClient(a), rootClient(b)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("wake across replicas", func(t *testing.T) {
		q := "replicas/wake"
		got := make(chan time.Time, 1)
		go func() {
			res, err := cb.ClaimWork(ctx, q, &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "waiter", Tasks: 1})
			if err == nil && len(res.Tasks) == 1 {
				got <- time.Now()
			}
			close(got)
		}()
		e2e.WaitPolling(t, cb, q, "g", "waiter") // the long-poll waits on B
		_, err := ca.CreateTask(ctx, tcclient.NewTaskID(), newTask(q))
		require.NoError(t, err)
		created := time.Now()
		select {
		case at, ok := <-got:
			require.True(t, ok, "claimWork on replica B returned no task")
			t.Logf("claimWork on B woke %s after createTask on A returned", at.Sub(created))
			// Without the cross-process wake-up only the backup poll (5 s)
			// would deliver it; the wake-up takes milliseconds.
			require.Less(t, at.Sub(created), 2*time.Second)
		case <-time.After(20 * time.Second):
			t.Fatal("claimWork on replica B did not wake")
		}
	})

	t.Run("no task claimed twice", func(t *testing.T) {
		const tasks, claimers = 2000, 32
		q := "replicas/load"
		ids := make([]string, tasks)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for i := range ids {
			ids[i] = tcclient.NewTaskID()
			wg.Add(1)
			sem <- struct{}{}
			go func(i int) {
				defer wg.Done()
				defer func() { <-sem }()
				c := ca
				if i%2 == 1 {
					c = cb
				}
				_, err := c.CreateTask(ctx, ids[i], newTask(q))
				if err != nil {
					t.Errorf("createTask: %v", err)
				}
			}(i)
		}
		wg.Wait()
		var (
			mu      sync.Mutex
			claimed = map[string]int{}
			total   atomic.Int64
		)
		// Claimers still long-polling once every task is taken are released.
		claimCtx, stopClaimers := context.WithCancel(ctx)
		defer stopClaimers()
		for w := 0; w < claimers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				c := ca
				if w%2 == 1 {
					c = cb
				}
				for total.Load() < tasks {
					res, err := c.ClaimWork(claimCtx, q, &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: fmt.Sprintf("w%d", w), Tasks: 4})
					if claimCtx.Err() != nil {
						return
					}
					if err != nil {
						t.Errorf("claimWork: %v", err)
						return
					}
					for _, cl := range res.Tasks {
						mu.Lock()
						claimed[cl.Status.TaskID]++
						mu.Unlock()
						if total.Add(1) == tasks {
							stopClaimers()
						}
						creds := cl.Credentials
						if _, err := c.WithCredentials(&creds).ReportCompleted(ctx, cl.Status.TaskID, cl.RunID); err != nil {
							t.Errorf("reportCompleted: %v", err)
						}
					}
				}
			}(w)
		}
		wg.Wait()
		require.Len(t, claimed, tasks)
		for id, n := range claimed {
			require.Equal(t, 1, n, "task %s claimed %d times", id, n)
		}
		counts, err := ca.TaskQueueCounts(ctx, q)
		require.NoError(t, err)
		require.Zero(t, counts.PendingTasks)
	})
}
