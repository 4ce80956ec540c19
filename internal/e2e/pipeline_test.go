package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestPipelineFile creates the README's pipeline with `hopper task create
// -f pipeline.yaml` against a real server and worker: one task group of
// three tasks, each run after the task it needs.
func TestPipelineFile(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	pipeline := e2e.DocExample(t, "readme-pipeline").Text
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: "hopper/default"})
	file := filepath.Join(t.TempDir(), "pipeline.yaml")
	require.NoError(t, os.WriteFile(file, []byte(pipeline), 0o600))

	stdout, stderr, code := hopperCLI(t, srv.Env(), "task", "create", "-f", file, "--json")
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stderr, "the README's payloads draw no warning")
	var created struct {
		TaskGroupID string `json:"taskGroupId"`
		Tasks       map[string]struct {
			TaskID string              `json:"taskId"`
			Status tcclient.TaskStatus `json:"status"`
		} `json:"tasks"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &created))
	require.Len(t, created.Tasks, 3)

	q := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	ctx := context.Background()
	resolved := map[string]time.Time{}
	started := map[string]time.Time{}
	for _, label := range []string{"build", "test", "deploy"} {
		id := created.Tasks[label].TaskID
		def, err := q.Task(ctx, id)
		require.NoError(t, err)
		require.Equal(t, created.TaskGroupID, def.TaskGroupID, "one task group")
		require.Equal(t, label, def.Metadata.Name)
		var st *tcclient.TaskStatus
		require.Eventually(t, func() bool {
			st, err = q.Status(ctx, id)
			return err == nil && st.State == tcclient.StateCompleted
		}, 60*time.Second, 100*time.Millisecond, "%s completes", label)
		started[label], resolved[label] = st.Runs[0].Started.Time, st.Runs[0].Resolved.Time
	}
	def, err := q.Task(ctx, created.Tasks["test"].TaskID)
	require.NoError(t, err)
	require.Equal(t, []string{created.Tasks["build"].TaskID}, def.Dependencies)
	require.False(t, started["test"].Before(resolved["build"]), "test ran after build")
	require.False(t, started["deploy"].Before(resolved["test"]), "deploy ran after test")

	// The text form names every task and the group's page.
	stdout, stderr, code = hopperCLI(t, srv.Env(), "task", "create", "-f", file)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `^Task group \S+ created: 3 tasks\n  build   \S{22}  (pending|running)\n  test    \S{22}  unscheduled\n  deploy  \S{22}  unscheduled\n`+srv.RootURL+`/ui/#/group/\S+\n$`, stdout)
}
