package e2e_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/interactive"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestInteractiveGuideRole runs docs/interactive.md's role command as
// written: the role it creates grants the scope that opens shells in
// the tasks of any proj-ci/ queue, and no other queue's. (Shells
// themselves are internal/worker/workere2e's TestInteractiveGuidePayload
// and TestInteractiveCopyAndShellFromATerminal, which run the guide's
// payload and terminal lines.)
func TestInteractiveGuideRole(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	out, err := e2e.DocShell{Env: srv.Env()}.Run(t, e2e.DocExample(t, "interactive-role"))
	require.NoError(t, err, out)
	c := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	ctx := context.Background()
	role, err := c.GetRole(ctx, "project:ci-debuggers")
	require.NoError(t, err)
	require.Equal(t, "may debug proj-ci tasks", role.Description)
	granted, err := c.ExpandScopes(ctx, []string{"assume:project:ci-debuggers"})
	require.NoError(t, err)
	for queue, want := range map[string]bool{"proj-ci/builders": true, "proj-ci/linux-tests": true, "proj-web/builders": false} {
		require.Equal(t, want, auth.SetSatisfies(granted, interactive.ShellScope(queue)), "%s", queue)
	}
}
