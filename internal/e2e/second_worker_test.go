package e2e_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestSecondWorkerScopes follows docs/production.md's "A second worker
// machine": a worker whose client holds only the two scopes the guide
// gives (claim from its queue, as any worker id of its group) runs a task
// to completion, its log and artifact uploaded.
func TestSecondWorkerScopes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	root := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	ctx := context.Background()
	const queue = "build/linux"
	stdout, stderr, code := hopperCLI(t, srv.Env(), "client", "create", "workers/build-1", "--description", "build machine 1",
		"--scope", "queue:claim-work:"+queue, "--scope", "queue:worker-id:build/*", "--json")
	require.Equal(t, 0, code, stderr)
	var client struct {
		AccessToken string `json:"accessToken"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &client))
	e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: queue, WorkerGroup: "build", WorkerID: "build-1", Config: map[string]any{
		"credentials": map[string]string{"clientId": "workers/build-1", "accessToken": client.AccessToken},
	}})

	taskID := tcclient.NewTaskID()
	def := backupTaskDef(queue)
	def.Payload = json.RawMessage(`{"command": [["sh", "-c", "mkdir -p out && echo built > out/app.txt && echo done"]],
		"artifacts": [{"type": "file", "path": "out/app.txt", "name": "public/app.txt"}], "maxRunTime": 60}`)
	_, err := root.CreateTask(ctx, taskID, def)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := root.Status(ctx, taskID)
		return err == nil && st.State == tcclient.StateCompleted
	}, 60*time.Second, 100*time.Millisecond)
	st, err := root.Status(ctx, taskID)
	require.NoError(t, err)
	require.Equal(t, "build-1", st.Runs[0].WorkerID)
	for _, name := range []string{"public/app.txt", "public/logs/live_backing.log"} {
		_, err := root.GetLatestArtifact(ctx, taskID, name)
		require.NoError(t, err, name)
	}
}
