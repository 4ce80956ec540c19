package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
)

// TestWorkerManagerOfficialClient drives every WorkerManager method with
// the npm taskcluster-client (e2e/node/workermanager.mjs) against `hopper
// serve`: pools, static workers, registration with the credentials used
// against the queue and the secrets service, reregistration, errors, the
// queue's worker views and removal resolving the worker's claimed run.
func TestWorkerManagerOfficialClient(t *testing.T) {
	t.Parallel()
	e2e.RequireNode(t)
	srv := e2e.StartServer(t, e2e.ServerOptions{Args: []string{"--log-level", "debug"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := e2e.RunNode(ctx, t, "workermanager.mjs", srv.Env()...)
	t.Log(out)
	require.Contains(t, out, "ok - a removed worker can neither register nor reregister", "the script ran to its end")
}
