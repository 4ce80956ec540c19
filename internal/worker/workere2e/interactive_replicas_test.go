package workere2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
)

// replicaSecret is the server secret the replicas of a test share.
const replicaSecret = "HOPPER_SECRET_KEY=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// startReplicas starts n `hopper serve` replicas sharing a fresh
// PostgreSQL database, a secret and a root token; extra are further flags
// of each. It skips without HOPPER_TEST_POSTGRES.
func startReplicas(t testing.TB, n int, extra ...string) []*env {
	t.Helper()
	db := e2e.FreshPostgres(t)
	var tok [33]byte
	_, _ = rand.Read(tok[:])
	token := base64.RawURLEncoding.EncodeToString(tok[:])
	out := make([]*env, n)
	for i := range out {
		srv, stop, err := launchReplica(shared.bin, t.TempDir(), e2e.FreePort(t), token,
			append([]string{"--db", db, "--claim-timeout", "20m"}, extra...), []string{replicaSecret})
		require.NoError(t, err)
		t.Cleanup(stop)
		out[i] = srv
	}
	return out
}

// TestInteractiveShellAcrossReplicas: the worker's agent is connected to
// replica B; a viewer opening the shell through replica A is authorized
// and audited there and reaches the worker through B, typing and reading
// as on one replica.
func TestInteractiveShellAcrossReplicas(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	rs := startReplicas(t, 2)
	a, b := rs[0], rs[1]
	queue := uniqueQueue("shellreplicas")
	startWorkerWith(t, queue, workerOpts{id: "shellreplicas", tasks: 1, server: b})
	id := createTaskOn(t, b, queue, map[string]any{
		"command": [][]string{{"true"}}, "features": map[string]bool{"interactive": true}, "maxRunTime": 60,
	}, nil)
	sh := openShell(t, a.admin, id)
	sh.send(t, `echo "through-a=$TASK_ID"`)
	sh.await(t, "through-a="+id)
	sh.send(t, "exit 0")
	select {
	case <-sh.closed:
	case code := <-sh.exit:
		require.Equal(t, 0, code)
	}
	_, err := a.admin.CancelTask(context.Background(), id)
	if err != nil {
		t.Logf("cancelling %s: %v (it may have resolved after the shell exited)", id, err)
	}
}
