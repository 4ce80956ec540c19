package e2e_test

import (
	"os"
	"path/filepath"
	"regexp"
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
	const secret = `{"token": "s3cr3t-value-not-for-logs"}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "secret.json"), []byte(secret), 0o600))
	_, stderr, code := hopperCLI(t, srv.Env(), "secret", "set", "myapp/deploy", "--file", filepath.Join(dir, "secret.json"), "--expires", "90d")
	require.Equal(t, 0, code, stderr)
	file := filepath.Join(dir, "deploy.yaml")
	require.NoError(t, os.WriteFile(file, []byte(task), 0o600))
	stdout, stderr, code := hopperCLI(t, srv.Env(), "task", "create", "-f", file)
	require.Equal(t, 0, code, stderr)
	taskID := regexp.MustCompile(`^Task (\S+) created`).FindStringSubmatch(stdout)[1]
	stdout, stderr, code = hopperCLI(t, srv.Env(), "task", "log", "--follow", taskID)
	require.Equal(t, 0, code, "%s\n%s", stdout, stderr)
	require.Regexp(t, `fetched the deploy secret \(\d+ bytes\)`, stdout)
	require.NotContains(t, stdout, "s3cr3t", "the secret stays out of the public log")
	require.False(t, strings.Contains(stdout, "Resolution: failed"), stdout)
}
