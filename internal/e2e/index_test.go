package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
)

// TestIndexOfficialClient drives every Index API method with the npm
// taskcluster-client (e2e/node/index.mjs): indexing through routes on
// completion, finding, paging, inserting and deleting with their scopes,
// the artifact redirect, expiry and bad input.
func TestIndexOfficialClient(t *testing.T) {
	t.Parallel()
	e2e.RequireNode(t)
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := e2e.RunNode(ctx, t, "index.mjs", srv.Env()...)
	t.Log(out)
	require.Contains(t, out, "ok - bad input answers Taskcluster error bodies", "the script ran to its end")
}
