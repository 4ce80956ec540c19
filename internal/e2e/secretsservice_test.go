package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
)

// TestSecretsOfficialClient drives every Secrets API method with the npm
// taskcluster-client (e2e/node/secrets.mjs) against `hopper serve
// --log-level debug`, then checks that the value never reached the log.
func TestSecretsOfficialClient(t *testing.T) {
	t.Parallel()
	e2e.RequireNode(t)
	srv := e2e.StartServer(t, e2e.ServerOptions{Args: []string{"--log-level", "debug"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var b [16]byte
	_, _ = rand.Read(b[:])
	value := "hunter-" + hex.EncodeToString(b[:])
	out := e2e.RunNode(ctx, t, "secrets.mjs", append(srv.Env(), "E2E_SECRET_VALUE="+value)...)
	t.Log(out)
	require.Contains(t, out, "ok - bad input answers Taskcluster error bodies without the value", "the script ran to its end")
	logs := srv.Logs()
	require.Contains(t, logs, "secret created", "the audit lines are there")
	require.NotContains(t, logs, value, "a secret's value reached the server log")
}
