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

// TestServicesGuideObjectsScript runs docs/services.md's Object example
// as written, with node and the official taskcluster-client beside it, as
// a user's project would: it uploads an object and prints it downloaded.
func TestServicesGuideObjectsScript(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary and node")
	}
	e2e.RequireNode(t)
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	// The script must sit beside node_modules for the bare import to
	// resolve, as it would in a user's project.
	script := filepath.Join(e2e.NodeDir(), ".guide-objects-"+tcclient.NewTaskID()+".mjs")
	require.NoError(t, os.WriteFile(script, []byte(e2e.DocExample(t, "services-objects-js").Text), 0o600))
	t.Cleanup(func() { _ = os.Remove(script) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Base(script))
	cmd.Dir = e2e.NodeDir()
	cmd.Env = append(os.Environ(), srv.Env()...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, "hello, objects", strings.TrimSpace(string(out)))
}
