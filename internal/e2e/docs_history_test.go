package e2e_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
)

// TestHistoryGuideTaskList runs docs/history.md's `hopper task list`
// lines as written against a server with two failed tasks; the next
// page's token is the one a listing of one task prints on its last line.
func TestHistoryGuideTaskList(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: "hopper/default"})
	var failed []string
	for range 2 {
		_, errOut, code := hopperCLI(t, srv.Env(), "task", "run", "--name", "build linux", "--", "sh", "-c", "exit 1")
		require.Equal(t, 1, code, errOut)
		failed = append(failed, regexp.MustCompile(`Task (\S+) created`).FindStringSubmatch(errOut)[1])
	}
	out, err := e2e.DocShell{Env: srv.Env(), Replace: []string{"<token>",
		`"$(hopper task list --state failed --limit 1 | sed -n 's/^more tasks match: add --page //p')"`}}.
		Run(t, e2e.DocExample(t, "history-task-list"))
	require.NoError(t, err, out)
	for _, id := range failed {
		require.Contains(t, out, id)
	}
	// The last line's page holds the older of the two failed tasks.
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Contains(t, lines[len(lines)-1], failed[0])
}
