package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestSecretsAndIndexThroughCLIAndProxy: `hopper secret` stores a value
// read from a file; a task run by `hopper worker` reads it through the
// taskcluster-proxy with the task's scopes (secrets:get:<name>) and is
// refused another secret; the completed task is then found with
// `hopper index find` at its index route.
func TestSecretsAndIndexThroughCLIAndProxy(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (the task fetches through the proxy with it)")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	const tq = "e2e/secrets"
	e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: tq})
	env := []string{"TASKCLUSTER_ROOT_URL=" + srv.RootURL, "TASKCLUSTER_CLIENT_ID=" + srv.ClientID, "TASKCLUSTER_ACCESS_TOKEN=" + srv.Token}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	valueFile := filepath.Join(t.TempDir(), "db.json")
	require.NoError(t, os.WriteFile(valueFile, []byte(`{"password": "proxy-pass-4711"}`), 0o600))
	out, errOut, code := hopperCLI(t, env, "secret", "set", "proj/db", "--file", valueFile, "--expires", "2h")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "secret proj/db set")
	require.NotContains(t, out, "proxy-pass-4711")
	out, errOut, code = hopperCLI(t, env, "secret", "set", "proj/other", "--file", valueFile)
	require.Equal(t, 0, code, errOut)
	out, errOut, code = hopperCLI(t, env, "secret", "get", "proj/db")
	require.Equal(t, 0, code, errOut)
	require.JSONEq(t, `{"password": "proxy-pass-4711"}`, out)
	out, errOut, code = hopperCLI(t, env, "secret", "list")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "proj/db\nproj/other\n", out)
	_, errOut, code = hopperCLI(t, env, "secret", "set", "proj/bad", "--file", writeTemp(t, "not json"))
	require.Equal(t, 64, code)
	require.Contains(t, errOut, "must be a JSON object")
	require.NotContains(t, errOut, "not json", "errors never quote the value")

	c := rootClient(srv)
	taskID := tcclient.NewTaskID()
	def := newTask(tq)
	def.Scopes = []string{"secrets:get:proj/db"}
	def.Routes = []string{"index.e2e.proxy.latest"}
	def.Payload = json.RawMessage(`{"maxRunTime": 60, "features": {"taskclusterProxy": true}, "command": [["sh", "-c",
		"curl -fsS \"$TASKCLUSTER_PROXY_URL/api/secrets/v1/secret/proj%2Fdb\" && echo && echo other=$(curl -s -o /dev/null -w '%{http_code}' \"$TASKCLUSTER_PROXY_URL/api/secrets/v1/secret/proj%2Fother\")"]]}`)
	_, err := c.CreateTask(ctx, taskID, def)
	require.NoError(t, err)
	status := waitTaskResolved(ctx, t, c, taskID)
	out, errOut, code = hopperCLI(t, env, "task", "log", taskID)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, tcclient.StateCompleted, status.State, "task log:\n%s", out)
	require.Contains(t, out, `"password":"proxy-pass-4711"`, "the task read its secret through the proxy")
	require.Contains(t, out, "other=403", "a secret outside the task's scopes is refused")

	out, errOut, code = hopperCLI(t, env, "index", "find", "e2e.proxy.latest", "--json")
	require.Equal(t, 0, code, errOut)
	var entry tcclient.IndexedTask
	require.NoError(t, json.Unmarshal([]byte(out), &entry))
	require.Equal(t, taskID, entry.TaskID)
	out, errOut, code = hopperCLI(t, env, "index", "insert", "e2e.proxy.pinned", taskID, "--rank", "3", "--data", `{"why":"release"}`)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, taskID)
	out, errOut, code = hopperCLI(t, env, "index", "list", "e2e.proxy")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "e2e.proxy.latest")
	require.Contains(t, out, "e2e.proxy.pinned")
	out, errOut, code = hopperCLI(t, env, "index", "list")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "e2e.")
	_, errOut, code = hopperCLI(t, env, "index", "find", "e2e.proxy.none")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "404 ResourceNotFound")

	out, errOut, code = hopperCLI(t, env, "secret", "remove", "proj/db")
	require.Equal(t, 0, code, errOut)
	_, errOut, code = hopperCLI(t, env, "secret", "get", "proj/db")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "404 ResourceNotFound")
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "value")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// waitTaskResolved polls the task's status until it is resolved.
func waitTaskResolved(ctx context.Context, t *testing.T, c *tcclient.Client, taskID string) *tcclient.TaskStatus {
	t.Helper()
	for {
		st, err := c.Status(ctx, taskID)
		require.NoError(t, err)
		switch st.State {
		case tcclient.StateCompleted, tcclient.StateFailed, tcclient.StateException:
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("task %s still %s", taskID, st.State)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
