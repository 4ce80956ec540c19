package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
)

// TestHooksOfficialClient drives every method of the Hooks API with the
// npm taskcluster-client (e2e/node/hooks.mjs).
func TestHooksOfficialClient(t *testing.T) {
	t.Parallel()
	e2e.RequireNode(t)
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := e2e.RunNode(ctx, t, "hooks.mjs", srv.Env()...)
	t.Log(out)
	require.Contains(t, out, "ok - removeHook", "the script ran to its end")
	// No trigger token reaches the server's log (it runs at debug level,
	// with an access line per request).
	_, tokens, ok := strings.Cut(out, "tokens used: ")
	require.True(t, ok)
	for _, token := range strings.Fields(strings.SplitN(tokens, "\n", 2)[0]) {
		require.NotContains(t, srv.Logs(), token)
	}
}
