package cli_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
)

// TestEndToEndBlockedDependent: when a step of a pipeline fails, its
// dependent stays unscheduled until its deadline. `task group --watch`
// ends at once (exit 1) saying which task blocked which, and `task status`
// of the dependent says it is blocked and by which task.
func TestEndToEndBlockedDependent(t *testing.T) {
	t.Parallel()
	needBinary(t)
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	env := srv.Env()
	var b [4]byte
	_, _ = rand.Read(b[:])
	queue := fmt.Sprintf("cli-e2e/blocked-%x", b)
	startWorker(t, srv, queue)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	file := filepath.Join(t.TempDir(), "pipeline.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`taskQueueId: `+queue+`
tasks:
  build:
    payload: {command: [[sh, -c, "exit 1"]], maxRunTime: 60}
  test:
    needs: [build]
    payload: {command: [[sh, -c, "echo never"]], maxRunTime: 60}
`), 0o600))
	type created struct {
		TaskGroupID string `json:"taskGroupId"`
		Tasks       map[string]struct {
			TaskID string `json:"taskId"`
		} `json:"tasks"`
	}
	res := hopper(ctx, t, env, "task", "create", "-f", file, "--json")
	require.Equal(t, 0, res.code, res.stderr)
	c := decode[created](t, res)
	build, test := c.Tasks["build"].TaskID, c.Tasks["test"].TaskID

	res = hopper(ctx, t, env, "task", "group", "--watch", c.TaskGroupID)
	require.NoError(t, ctx.Err(), "the watch ended by itself")
	require.Equal(t, 1, res.code, res.stdout)
	require.Contains(t, res.stdout, "unscheduled  "+test+"  test  blocked by "+build+" (build, failed)\n")
	require.Contains(t, res.stderr, "1 blocked); nothing more can run")

	res = hopper(ctx, t, env, "task", "status", test)
	require.Equal(t, 0, res.code, res.stderr)
	require.Contains(t, res.stdout, "No runs yet.\n\nBlocked by "+build+" (build), which failed: this task needs all its dependencies completed")
}
