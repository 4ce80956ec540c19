package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/hopper-ci/hopper/internal/e2e"
)

// TestOfficialClientLifecycle drives a real `hopper serve` with the npm
// taskcluster-client: every life-cycle method and outcome, dependencies,
// retries, groups, queue views and error codes (e2e/node/lifecycle.mjs).
func TestOfficialClientLifecycle(t *testing.T) {
	t.Parallel()
	e2e.RequireNode(t)
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := e2e.RunNode(ctx, t, "lifecycle.mjs", srv.Env()...)
	t.Log(out)
}
