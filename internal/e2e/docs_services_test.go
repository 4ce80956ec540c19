package e2e_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
)

// TestServicesGuideExamples runs docs/services.md's shell examples as
// written against a server: purging a cache, the nightly hook's commands
// (its role, create, show, trigger, fires, list) on the guide's hook file,
// the index (a task indexed, found, listed, its artifact by name) and
// rendering the guide's JSON-e template.
func TestServicesGuideExamples(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	dir := t.TempDir()
	sh := e2e.DocShell{Dir: dir, Env: srv.Env()}

	out, err := sh.Run(t, e2e.DocExample(t, "services-cache-purge"))
	require.NoError(t, err, out)
	require.Contains(t, out, "my-cache")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "nightly-hook.yaml"), []byte(e2e.DocExample(t, "services-nightly-hook").Text), 0o600))
	out, err = sh.Run(t, e2e.DocExample(t, "services-nightly-hook-commands"))
	require.NoError(t, err, out)
	require.Regexp(t, `schedule:\s+0 30 2 \* \* \*`, out)
	taskID := regexp.MustCompile(`(?m)^([A-Za-z0-9_-]{22})$`).FindStringSubmatch(out)
	require.NotNil(t, taskID, "hook trigger prints the taskId:\n%s", out)
	require.Regexp(t, `(?m)^.*`+regexp.QuoteMeta(taskID[1])+`.*success`, out, "hook fires lists the fire")

	// The index example needs a worker for its nightly task.
	e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: "hopper/default"})
	out, err = e2e.DocShell{Dir: dir, Env: srv.Env(), Replace: []string{"<taskId>", "$(last_task_id)"}}.
		Run(t, e2e.DocExample(t, "services-index-commands"))
	require.NoError(t, err, out)
	require.Regexp(t, `(?mi)^HTTP/1\.1 303`, out, "the index's artifact URL redirects to the artifact")
	require.Contains(t, out, "revision")
	require.Contains(t, out, "latest")

	out, err = sh.Run(t, e2e.DocExample(t, "services-jsone-render"))
	require.NoError(t, err, out)
	var task map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &task), out)
	require.Equal(t, "fXa8Ye1eTs2hm4mC6Ms4Sg", task["taskGroupId"])
	require.Equal(t, map[string]any{"command": []any{"echo 10", "echo 20", "echo 30"}, "nightly": true}, task["payload"])
}
