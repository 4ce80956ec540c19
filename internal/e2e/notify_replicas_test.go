package e2e_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/notifysend/mailpittest"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestNotifySurvivesReplicaKill: two `hopper serve` replicas share one
// PostgreSQL database. Replica A's mail server is unreachable, so every
// notification it records stays pending; reportFailed calls for tasks with
// an email route pour into A, which is killed (SIGKILL) while they are in
// flight, and the calls that failed are repeated on B. Replica B, whose
// mail server works, then sends every failed task's email exactly once: a
// transition A committed has its notification, one it did not commit has
// none until B makes it.
func TestNotifySurvivesReplicaKill(t *testing.T) {
	t.Parallel()
	db := e2e.FreshPostgres(t)
	mp := mailpittest.Start(t, mailpittest.Options{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedPort := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	config := func(name string, port int) string {
		path := filepath.Join(t.TempDir(), name+".yml")
		require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf("smtp: {host: 127.0.0.1, port: %d, tls: none, from: hopper@ci.example}\n", port)), 0o600))
		return path
	}
	env := []string{"HOPPER_SECRET_KEY=" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"}
	a := e2e.StartServer(t, e2e.ServerOptions{Args: []string{"--db", db, "--claim-timeout", "10m", "--notify-config", config("a", closedPort)}, Env: env})
	b := e2e.StartServer(t, e2e.ServerOptions{Args: []string{"--db", db, "--claim-timeout", "10m", "--notify-config", config("b", mp.SMTPPort)}, Env: env})
	ca, cb := rootClient(a), rootClient(b)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	const tasks, reporters, killAfter = 60, 8, 20
	const q = "replicas/notify"
	ids := make([]string, tasks)
	for i := range ids {
		ids[i] = tcclient.NewTaskID()
		def := newTask(q)
		def.Routes = []string{fmt.Sprintf("notify.email.dev%02d@example.com.on-failed", i)}
		_, err := cb.CreateTask(ctx, ids[i], def)
		require.NoError(t, err)
	}
	var claims []tcclient.TaskClaim
	for len(claims) < tasks {
		res, err := cb.ClaimWork(ctx, q, &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w", Tasks: 32})
		require.NoError(t, err)
		claims = append(claims, res.Tasks...)
	}
	var (
		wg     sync.WaitGroup
		done   atomic.Int64
		next   atomic.Int64
		mu     sync.Mutex
		failed []tcclient.TaskClaim
		killed sync.Once
	)
	for range reporters {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(claims) {
					return
				}
				cl := claims[i]
				creds := cl.Credentials
				c := ca.WithCredentials(&creds)
				c.MaxRetries = -1
				rc, rcancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := c.ReportFailed(rc, cl.Status.TaskID, cl.RunID)
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
		})
	}
	wg.Wait()
	<-a.Done()
	t.Logf("%d reports answered by A before it was killed, %d to repeat on B", done.Load(), len(failed))
	require.NotEmpty(t, failed, "A was killed before the reports ended")
	for _, cl := range failed {
		creds := cl.Credentials
		_, err := cb.WithCredentials(&creds).ReportFailed(ctx, cl.Status.TaskID, cl.RunID)
		if err != nil {
			require.Equal(t, 409, tcclient.StatusCode(err), "repeating reportFailed of %s on B: %v", cl.Status.TaskID, err)
		}
	}

	// B sends them all: at once for the ones A never tried, after their
	// back-off for the ones A failed to send (or after the lease, for one
	// A was sending when it died).
	require.Eventually(t, func() bool {
		for _, id := range ids {
			list, err := cb.TaskNotifications(ctx, id)
			if err != nil || len(list) != 1 || list[0].State != "sent" {
				return false
			}
		}
		return true
	}, 7*time.Minute, time.Second)
	byAddress := map[string]int{}
	ids2 := map[string]bool{}
	for _, m := range mp.Messages(t) {
		byAddress[m.To[0].Address]++
		require.False(t, ids2[m.MessageID], "message %s twice", m.MessageID)
		ids2[m.MessageID] = true
	}
	require.Len(t, byAddress, tasks)
	for addr, n := range byAddress {
		require.Equal(t, 1, n, addr)
	}
}
