package ui_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestConsoleTerminalInBrowser drives the task page's terminal in headless
// Chromium (web/browser/terminal.mjs) against a real hopper and worker:
// "Create interactive task" copies a failed task with features.interactive
// on, and typing echo $TASK_ID in the copy's terminal shows its id.
func TestConsoleTerminalInBrowser(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary and a headless browser")
	}
	chromium := browser(t)
	webDir := filepath.Join(e2e.RepoRoot(), "web")
	if _, err := os.Stat(filepath.Join(webDir, "node_modules", "puppeteer-core")); err != nil {
		t.Skip("puppeteer-core not installed: run `npm ci --prefix web`")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	root := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: "ui-test/shell", WorkerID: "shell"})
	failed := tcclient.NewTaskID()
	def := newTaskDef("ui-test/shell", "", "flaky build")
	def.Payload = json.RawMessage(`{"command":[["sh","-c","echo broken; exit 1"]],"maxRunTime":60}`)
	_, err := root.CreateTask(ctx, failed, def)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := root.Status(ctx, failed)
		return err == nil && st.State == tcclient.StateFailed
	}, 2*time.Minute, 100*time.Millisecond)

	data, err := json.Marshal(map[string]any{"rootUrl": srv.RootURL, "failedTask": failed, "failedName": "flaky build",
		"root": map[string]string{"clientId": srv.ClientID, "accessToken": srv.Token}})
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, "node", filepath.Join("browser", "terminal.mjs"))
	cmd.Dir = webDir
	cmd.Env = append(os.Environ(), "HOPPER_UI_FIXTURE="+string(data), "CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	t.Log(string(out))
	// The copy runs on until its keep-alive; cancel it either way.
	if m := regexp.MustCompile(`INTERACTIVE (\S+)`).FindSubmatch(out); m != nil {
		_, _ = root.CancelTask(context.Background(), string(m[1]))
	}
	require.NoError(t, err, "browser test failed:\n%s", out)
	require.Contains(t, string(out), "PASS all")
}
