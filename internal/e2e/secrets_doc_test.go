package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
)

// TestSecretsGuideExample runs docs/services.md's deploy task as written,
// on a real server and worker: it reads the secret through the proxy and
// its log, readable by anyone who may read its public artifacts, says it
// did without holding the secret.
func TestSecretsGuideExample(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	needTool(t, "curl", "sh", "wc")
	task := e2e.DocExample(t, "services-deploy-task").Text
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: "hopper/default"})
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "deploy.yaml"), []byte(task), 0o600))
	// The guide's commands, as written: the secret set and read back, the
	// task created and its log followed.
	stdout, err := e2e.DocShell{Dir: dir, Env: srv.Env(), Replace: []string{"<taskId>", "$(last_task_id)"}}.
		Run(t, e2e.DocExample(t, "services-secret-commands"))
	require.NoError(t, err, stdout)
	require.Contains(t, stdout, "s3cr3t", "secret get prints the secret")
	log := stdout[strings.Index(stdout, "created on"):]
	require.Regexp(t, `fetched the deploy secret \(\d+ bytes\)`, log)
	require.NotContains(t, log, "s3cr3t", "the secret stays out of the task's log")
	require.False(t, strings.Contains(log, "Resolution: failed"), log)
}
