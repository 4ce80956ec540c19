package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestAuthOfficialClient drives clients, roles, claim credentials,
// authorizedScopes, anonymous access, signed URLs and the audit history with the npm
// taskcluster-client (e2e/node/auth.mjs).
func TestAuthOfficialClient(t *testing.T) {
	t.Parallel()
	e2e.RequireNode(t)
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := e2e.RunNode(ctx, t, "auth.mjs", srv.Env()...)
	t.Log(out)
	require.Contains(t, out, "ok - listAuditHistory and getEntityHistory", "the script ran to its end")
}

// TestAuthServeNeedsRootToken checks that hopper serve refuses to start
// without a root access token and says why.
func TestAuthServeNeedsRootToken(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2e.Binary(t), "serve", "--listen", e2e.FreePort(t), "--data-dir", t.TempDir())
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOPPER_ROOT_ACCESS_TOKEN=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr, "serve must fail: %s", out)
	require.Equal(t, 64, exitErr.ExitCode(), "a usage mistake exits 64")
	require.Contains(t, string(out), "HOPPER_ROOT_ACCESS_TOKEN is not set")
}

// hopperCLI runs the hopper binary with env on top of a clean
// environment (no TASKCLUSTER_* of the developer's), returning stdout,
// stderr and the exit code.
func hopperCLI(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2e.Binary(t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TASKCLUSTER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if exitErr, ok := err.(*exec.ExitError); ok {
		code = exitErr.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return stdout.String(), stderr.String(), code
}

// TestAuthCLI drives `hopper client` and `hopper role` against a real
// server: JSON and text output, credentials from TASKCLUSTER_*, one-line
// errors with a non-zero exit.
func TestAuthCLI(t *testing.T) {
	t.Parallel()
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	root := srv.Env()
	ok := func(env []string, args ...string) string {
		t.Helper()
		stdout, stderr, code := hopperCLI(t, env, args...)
		require.Equal(t, 0, code, "hopper %v: %s", args, stderr)
		return stdout
	}
	fail := func(env []string, want string, args ...string) {
		t.Helper()
		stdout, stderr, code := hopperCLI(t, env, args...)
		require.Equal(t, 1, code, "hopper %v should fail: %s", args, stdout)
		require.Empty(t, stdout)
		// The error's first line says what failed; the lines after it, if
		// any, say what to fix (the missing scopes), each indented.
		first, detail, _ := strings.Cut(strings.TrimSpace(stderr), "\n")
		require.NotEmpty(t, first)
		for _, l := range strings.Split(detail, "\n") {
			require.True(t, l == "" || strings.HasPrefix(l, "  "), "detail lines are indented: %q", stderr)
		}
		require.Contains(t, stderr, want)
	}

	out := ok(root, "role", "create", "cli-readers", "--description", "reads private/cli", "--scope", "queue:get-artifact:private/cli/*", "--json")
	var role tcclient.Role
	require.NoError(t, json.Unmarshal([]byte(out), &role))
	require.Equal(t, []string{"assume:cli-readers", "queue:get-artifact:private/cli/*"}, role.ExpandedScopes)

	out = ok(root, "client", "create", "cli/worker", "--description", "made by the CLI", "--expires", "30d",
		"--scope", "queue:claim-work:cli/q", "--scope", "assume:cli-readers", "--json")
	var created tcclient.AuthClient
	require.NoError(t, json.Unmarshal([]byte(out), &created))
	require.Len(t, created.AccessToken, 44)
	require.Contains(t, created.ExpandedScopes, "queue:get-artifact:private/cli/*")
	require.WithinDuration(t, time.Now().Add(30*24*time.Hour), created.Expires.Time, time.Minute)

	// Text output shows the token once, and show never does.
	out = ok(root, "client", "reset-token", "cli/worker")
	require.Contains(t, out, "accessToken:")
	require.NotContains(t, out, created.AccessToken)
	fields := strings.Fields(out[strings.Index(out, "accessToken:"):])
	token := fields[1]
	require.Len(t, token, 44)
	out = ok(root, "client", "show", "cli/worker")
	require.Contains(t, out, "queue:get-artifact:private/cli/*")
	require.NotContains(t, out, token)
	require.NotContains(t, out, "accessToken")

	out = ok(root, "client", "list", "--json")
	var listed []tcclient.AuthClient
	require.NoError(t, json.Unmarshal([]byte(out), &listed))
	require.Len(t, listed, 1)
	require.Equal(t, "cli/worker", listed[0].ClientID)
	require.Contains(t, ok(root, "client", "list"), "cli/worker")
	require.Contains(t, ok(root, "role", "list"), "cli-readers")
	require.Contains(t, ok(root, "role", "show", "cli-readers"), "queue:get-artifact:private/cli/*")

	// The new client's own credentials work for what it may do and fail
	// cleanly for the rest.
	worker := []string{"TASKCLUSTER_ROOT_URL=" + srv.RootURL, "TASKCLUSTER_CLIENT_ID=cli/worker", "TASKCLUSTER_ACCESS_TOKEN=" + token}
	require.Contains(t, ok(worker, "client", "list"), "cli/worker", "anonymous role allows listing")
	fail(worker, "403 InsufficientScopes: Client ID cli/worker does not have sufficient scopes", "client", "create", "cli/other", "--description", "x")
	old := []string{"TASKCLUSTER_ROOT_URL=" + srv.RootURL, "TASKCLUSTER_CLIENT_ID=cli/worker", "TASKCLUSTER_ACCESS_TOKEN=" + created.AccessToken}
	fail(old, "401 AuthenticationFailed: Unauthorized: Bad mac", "role", "create", "x", "--description", "x")

	out = ok(root, "client", "disable", "cli/worker")
	require.Contains(t, out, "disabled")
	fail(worker, "is disabled", "role", "delete", "cli-readers")
	ok(root, "client", "enable", "cli/worker")

	fail(root, `400 InputError: clientId "static/taskcluster/root" starts with "static/"`, "client", "delete", "static/taskcluster/root")
	fail(root, "404 ResourceNotFound: Client not found", "client", "show", "cli/nobody")
	fail([]string{"TASKCLUSTER_CLIENT_ID=x"}, "TASKCLUSTER_ROOT_URL is not set", "client", "list")
	fail(root, "--expires", "client", "create", "cli/x", "--description", "x", "--expires", "soon")

	require.Contains(t, ok(root, "client", "delete", "cli/worker"), "deleted client cli/worker")
	require.Contains(t, ok(root, "client", "delete", "cli/worker"), "deleted client cli/worker")
	require.Contains(t, ok(root, "role", "delete", "cli-readers"), "deleted role cli-readers")
	fail(root, "404 ResourceNotFound: Role with roleId 'cli-readers' not found", "role", "show", "cli-readers")
}
