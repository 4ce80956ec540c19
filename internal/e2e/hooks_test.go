package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
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

// TestHookCLI drives `hopper hook` against a real server with the README's
// nightly-build example.
func TestHookCLI(t *testing.T) {
	t.Parallel()
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	root := srv.Env()
	nightlyHook := e2e.DocExample(t, "services-nightly-hook").Text
	dir := t.TempDir()
	file := filepath.Join(dir, "nightly.yaml")
	require.NoError(t, os.WriteFile(file, []byte(nightlyHook), 0o600))
	ok := func(args ...string) string {
		t.Helper()
		stdout, stderr, code := hopperCLI(t, root, args...)
		require.Equal(t, 0, code, "hopper %v: %s", args, stderr)
		return stdout
	}
	fail := func(want string, args ...string) {
		t.Helper()
		stdout, stderr, code := hopperCLI(t, root, args...)
		require.NotEqual(t, 0, code, "hopper %v should fail: %s", args, stdout)
		require.Contains(t, stderr, want)
	}

	ok("role", "create", "hook-id:nightly/*", "--description", "what nightly hooks may do",
		"--scope", "queue:create-task:lowest:hopper/default", "--scope", "queue:create-task:project:none", "--scope", "queue:scheduler-id:-")
	out := ok("hook", "create", "nightly", "build", "-f", file, "--json")
	var created tcclient.Hook
	require.NoError(t, json.Unmarshal([]byte(out), &created))
	require.Equal(t, []string{"0 30 2 * * *"}, created.Schedule)

	out = ok("hook", "show", "nightly", "build")
	require.Regexp(t, `schedule:\s+0 30 2 \* \* \*`, out)
	require.Regexp(t, `next fire:\s+\d{4}-\d\d-\d\dT02:30:00.000Z`, out)
	require.Contains(t, out, "never fired")
	require.Contains(t, ok("hook", "list"), "nightly")
	require.Contains(t, ok("hook", "list", "nightly"), "build")

	require.Contains(t, ok("hook", "fires", "nightly", "build"), "hook nightly/build has not fired yet")
	require.JSONEq(t, `{"lastFires": []}`, ok("hook", "fires", "nightly", "build", "--json"))

	// A payload the hook's triggerSchema refuses (by default it takes only
	// {}) creates nothing and is recorded as a failed fire.
	fail("400 InputError", "hook", "trigger", "nightly", "build", "-p", `{"surprise": true}`)
	out = ok("hook", "fires", "nightly", "build")
	require.Contains(t, out, "triggerHook")
	require.Contains(t, out, "error")

	// -p takes inline JSON, @FILE or a file name.
	taskID := strings.TrimSpace(ok("hook", "trigger", "nightly", "build", "-p", "{}"))
	require.Len(t, taskID, 22)
	require.Len(t, strings.TrimSpace(ok("hook", "trigger", "nightly", "build", "-p", "@"+writeFile(t, dir, "payload.json", "{}\n"))), 22)
	fail("give inline JSON", "hook", "trigger", "nightly", "build", "-p", filepath.Join(dir, "missing.json"))
	taskID = strings.TrimSpace(ok("hook", "trigger", "nightly", "build"))
	require.Len(t, taskID, 22)
	out = ok("hook", "fires", "nightly", "build")
	require.Contains(t, out, taskID)
	require.Contains(t, out, "triggerHook")
	require.Contains(t, out, "pending")
	require.Contains(t, ok("hook", "show", "nightly", "build"), "created task "+taskID)

	// The README's webhook: `hopper hook token` prints the URL to POST to.
	webhook := strings.TrimSpace(ok("hook", "token", "nightly", "build"))
	require.True(t, strings.HasPrefix(webhook, srv.RootURL+"/api/hooks/v1/hooks/nightly/build/trigger/"), webhook)
	postWebhook := func(url string) int {
		t.Helper()
		resp, err := http.Post(url, "application/json", strings.NewReader("{}"))
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, postWebhook(webhook))
	require.Contains(t, ok("hook", "fires", "nightly", "build"), "triggerHookWithToken")
	renewed := strings.TrimSpace(ok("hook", "token", "nightly", "build", "--reset"))
	require.NotEqual(t, webhook, renewed)
	require.NotEqual(t, http.StatusOK, postWebhook(webhook), "the token before --reset still fires the hook")
	require.Equal(t, http.StatusOK, postWebhook(renewed))

	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte(strings.Replace(nightlyHook, "0 30 2 * * *", "61 * * * *", 1)), 0o600))
	fail("400 InputError: Constraint error, got value 61 expected range 0-59 in 61 * * * *", "hook", "update", "nightly", "build", "-f", bad)
	fail("a hook definition needs metadata and task", "hook", "create", "nightly", "x", "-f", writeFile(t, dir, "empty.yaml", "schedule: []\n"))

	weekly := filepath.Join(dir, "weekly.yaml")
	require.NoError(t, os.WriteFile(weekly, []byte(strings.Replace(nightlyHook, "0 30 2 * * *", "@weekly", 1)), 0o600))
	ok("hook", "update", "nightly", "build", "-f", weekly)
	require.Regexp(t, `schedule:\s+@weekly`, ok("hook", "show", "nightly", "build"))

	require.Contains(t, ok("hook", "remove", "nightly", "build"), "removed hook nightly/build")
	fail("404 ResourceNotFound", "hook", "show", "nightly", "build")
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// TestServiceScopesOfficialClient checks, with the npm taskcluster-client,
// that every method of Hooks, Index, Secrets, Object and Purge-Cache asks
// for the scope Taskcluster names, and that each answers the monitoring
// methods (e2e/node/scopes.mjs).
func TestServiceScopesOfficialClient(t *testing.T) {
	t.Parallel()
	e2e.RequireNode(t)
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := e2e.RunNode(ctx, t, "scopes.mjs", srv.Env()...)
	t.Log(out)
	require.Contains(t, out, "ok - every service answers ping, lbheartbeat, heartbeat and version", "the script ran to its end")
}
