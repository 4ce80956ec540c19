package e2e_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// taskclusterCLI is Taskcluster's shell client (clients/client-shell of
// taskcluster/taskcluster), built by hand: HOPPER_TEST_TASKCLUSTER_CLI, or
// ~/.cache/hopper-test/taskcluster-cli/taskcluster.
func taskclusterCLI(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("HOPPER_TEST_TASKCLUSTER_CLI")
	if bin == "" {
		home, _ := os.UserHomeDir()
		bin = filepath.Join(home, ".cache", "hopper-test", "taskcluster-cli", "taskcluster")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("Taskcluster's shell client is not built at %s: build clients/client-shell of a taskcluster/taskcluster checkout "+
			"(go build -o %s ./clients/client-shell) or name one in HOPPER_TEST_TASKCLUSTER_CLI", bin, bin)
	}
	return bin
}

// chromium is the Chromium the browser tests drive.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium installed (CI installs Debian's chromium)")
	return ""
}

// TestTaskclusterSigninAfterSingleSignOn runs the guide's `taskcluster
// signin` with Taskcluster's own shell client against hopper whose people
// sign in through an OpenID provider (oidc-provider): Chromium opens the
// console's command-line sign-in page, signs in with the provider there,
// and the console creates the person's client, which the command prints
// and the next command uses.
func TestTaskclusterSigninAfterSingleSignOn(t *testing.T) {
	t.Parallel()
	tc := taskclusterCLI(t)
	browserBin := chromium(t)
	if _, err := os.Stat(filepath.Join(e2e.RepoRoot(), "e2e", "oidc", "node_modules", "puppeteer-core")); err != nil {
		t.Skip("puppeteer-core not installed: run `npm ci --prefix e2e/oidc`")
	}
	listen := e2e.FreePort(t)
	rootURL := "http://" + listen
	port := strings.TrimPrefix(e2e.FreePort(t), "127.0.0.1:")
	op := startOIDC(t, port, rootURL, map[string][]string{"alice": {"builders"}}, 10*time.Minute)
	srv := startCorpHopper(t, listen, op.issuer)
	out, err := e2e.DocShell{Env: srv.Env()}.Run(t, e2e.DocExample(t, "login-identity-role"))
	require.NoError(t, err, out)
	secret := exec.Command(e2e.Binary(t), "secret", "set", "acme/deploy", "--key", "token")
	secret.Stdin = strings.NewReader("v1")
	secret.Env = append(cleanEnv(), srv.Env()...)
	b, err := secret.CombinedOutput()
	require.NoError(t, err, string(b))

	// The command opens the browser with xdg-open (github.com/pkg/browser):
	// here a script that hands the address to this test.
	bin := t.TempDir()
	urlFile := filepath.Join(t.TempDir(), "url")
	require.NoError(t, os.WriteFile(filepath.Join(bin, "xdg-open"),
		[]byte("#!/bin/sh\necho \"$1\" > "+urlFile+".tmp && mv "+urlFile+".tmp "+urlFile+"\n"), 0o755))
	require.NoError(t, os.Symlink(tc, filepath.Join(bin, "taskcluster")))
	type shellResult struct {
		out string
		err error
	}
	guide := make(chan shellResult, 1)
	example := e2e.DocExample(t, "login-taskcluster-signin")
	go func() {
		out, err := e2e.DocShell{Env: []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}, Timeout: 5 * time.Minute,
			Replace: []string{"https://hopper.example.com", srv.RootURL}}.Run(t, example)
		guide <- shellResult{out, err}
	}()
	var opened []byte
	require.NoError(t, testclock.Poll(t.Context(), time.Minute, func() bool {
		opened, _ = os.ReadFile(urlFile)
		return len(opened) > 0
	}))
	require.Contains(t, string(opened), srv.RootURL+"/auth/clients/create?")

	cmd := exec.Command("node", "signin.mjs")
	cmd.Dir = filepath.Join(e2e.RepoRoot(), "e2e", "oidc")
	cmd.Env = append(os.Environ(), "CHROMIUM="+browserBin, "SIGNIN_URL="+strings.TrimSpace(string(opened)),
		"SIGNIN_USER=alice", "SIGNIN_PROVIDER=corp")
	b, err = cmd.CombinedOutput()
	require.NoError(t, err, string(b))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var seen struct {
		ClientID string
		Scopes   []string
		Reached  string
		Text     string
	}
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &seen), string(b))
	require.Regexp(t, `^corp/alice\|alice/laptop-[A-Za-z0-9_-]{6}$`, seen.ClientID)
	require.Equal(t, []string{"secrets:get:acme/*"}, seen.Scopes, "the scope asked for, which the person holds")
	require.True(t, strings.HasPrefix(seen.Reached, "http://localhost:"), seen.Reached)
	require.Contains(t, seen.Text, "You have successfully signed in")

	res := <-guide
	require.NoError(t, res.err, res.out)
	require.Contains(t, res.out, `{"secret":{"token":"v1"}`, "the next command read the secret with the client signin made")
	require.NotContains(t, srv.Logs(), "corp-client-secret")
}

// TestHopperLoginInChromium runs `hopper login` with Chromium as the
// person's browser: oidc-provider's pages, hopper's page for the command
// (its Allow and Deny forms post to hopper, which sends the browser to
// the loopback port), and the command's answer page.
func TestHopperLoginInChromium(t *testing.T) {
	t.Parallel()
	browserBin := chromium(t)
	if _, err := os.Stat(filepath.Join(e2e.RepoRoot(), "e2e", "oidc", "node_modules", "puppeteer-core")); err != nil {
		t.Skip("puppeteer-core not installed: run `npm ci --prefix e2e/oidc`")
	}
	listen := e2e.FreePort(t)
	port := strings.TrimPrefix(e2e.FreePort(t), "127.0.0.1:")
	op := startOIDC(t, port, "http://"+listen, map[string][]string{"alice": {"builders"}}, 10*time.Minute)
	srv := startCorpHopper(t, listen, op.issuer)
	credFile := filepath.Join(t.TempDir(), "credentials.json")
	env := []string{"TASKCLUSTER_ROOT_URL=" + srv.RootURL, "HOPPER_CREDENTIALS=" + credFile}
	for _, button := range []string{"deny", "allow"} {
		run := startLogin(t, env, "--no-browser")
		cmd := exec.Command("node", "login.mjs")
		cmd.Dir = filepath.Join(e2e.RepoRoot(), "e2e", "oidc")
		cmd.Env = append(os.Environ(), "CHROMIUM="+browserBin, "LOGIN_URL="+run.address(t, cliURL)[1], "LOGIN_USER=alice", "LOGIN_BUTTON="+button)
		b, err := cmd.CombinedOutput()
		require.NoError(t, err, string(b))
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		var seen struct{ Identity, Reached, Text string }
		require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &seen), string(b))
		require.Equal(t, "corp/alice|alice", seen.Identity)
		require.Regexp(t, `^http://127\.0\.0\.1:[0-9]+/callback$`, seen.Reached, seen.Text)
		if button == "deny" {
			require.Contains(t, seen.Text, "you denied the command")
			require.Equal(t, 1, run.wait(t))
			_, err = os.Stat(credFile)
			require.ErrorIs(t, err, os.ErrNotExist)
			continue
		}
		require.Contains(t, seen.Text, "Signed in")
		require.Equal(t, 0, run.wait(t), run.stderr.String())
		require.Contains(t, run.stderr.String(), "Signed in as corp/alice|alice")
		_, err = os.Stat(credFile)
		require.NoError(t, err)
	}
}
