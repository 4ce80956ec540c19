package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestReadmeJavaScriptExample runs the README's example exactly as written,
// as `node hi.mjs`, with each taskcluster-client line the README names
// (87.x in e2e/node, 55.x in e2e/node-client55): the task it creates
// exists and the link it prints opens the task's UI page.
func TestReadmeJavaScriptExample(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary and node")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not installed")
	}
	example := e2e.DocExample(t, "readme-hi-mjs").Text
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	client := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	for _, dir := range []string{"node", "node-client55"} {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			modDir := filepath.Join(e2e.RepoRoot(), "e2e", dir)
			if _, err := os.Stat(filepath.Join(modDir, "node_modules", "taskcluster-client")); err != nil {
				t.Skipf("taskcluster-client not installed: run `npm ci --prefix e2e/%s`", dir)
			}
			// The script must sit beside node_modules for the bare import
			// to resolve, as it would in a user's project.
			script := filepath.Join(modDir, ".readme-example-"+tcclient.NewTaskID()+".mjs")
			require.NoError(t, os.WriteFile(script, []byte(example), 0o600))
			t.Cleanup(func() { _ = os.Remove(script) })
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "node", filepath.Base(script))
			cmd.Dir = modDir
			cmd.Env = append(os.Environ(), srv.Env()...)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, string(out))
			link := strings.TrimSpace(string(out))
			prefix := srv.RootURL + "/ui/#/task/"
			require.True(t, strings.HasPrefix(link, prefix), "prints the task's page: %q", link)
			task, err := client.Task(ctx, strings.TrimPrefix(link, prefix))
			require.NoError(t, err)
			require.Equal(t, "hi", task.Metadata.Name)
		})
	}
}
