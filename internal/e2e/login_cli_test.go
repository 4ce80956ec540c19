package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// oidcProvider is panva's oidc-provider (e2e/oidc/provider.mjs), a real
// OpenID provider with the device flow, run by node.
type oidcProvider struct {
	issuer string
	cmd    *exec.Cmd
}

// startOIDC starts the provider with hopper as its client, sending people
// back to rootURL's callback of provider "corp", on port; groups maps
// users to their groups claim; a device code lasts deviceTTL.
func startOIDC(t *testing.T, port, rootURL string, groups map[string][]string, deviceTTL time.Duration) *oidcProvider {
	t.Helper()
	dir := filepath.Join(e2e.RepoRoot(), "e2e", "oidc")
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not installed: cannot run the OpenID provider oidc-provider")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "oidc-provider")); err != nil {
		t.Skip("oidc-provider not installed: run `npm ci --prefix e2e/oidc`")
	}
	g, err := json.Marshal(groups)
	require.NoError(t, err)
	cmd := exec.Command("node", "provider.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "OIDC_PORT="+port, "OIDC_CLIENT_ID=hopper", "OIDC_CLIENT_SECRET=corp-client-secret",
		"OIDC_REDIRECT_URIS="+rootURL+"/login/corp/callback", "OIDC_GROUPS="+string(g),
		fmt.Sprintf("OIDC_DEVICE_TTL=%d", int(deviceTTL.Seconds())))
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	logs := &e2e.SyncBuffer{}
	cmd.Stderr = logs
	require.NoError(t, cmd.Start())
	p := &oidcProvider{cmd: cmd}
	t.Cleanup(p.stop)
	ready := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if issuer, ok := strings.CutPrefix(s.Text(), "ready "); ok {
				ready <- issuer
			}
		}
	}()
	select {
	case p.issuer = <-ready:
	case <-time.After(time.Minute):
		t.Fatalf("oidc-provider did not start:\n%s", logs.String())
	}
	return p
}

// stop ends the provider (a provider that is down).
func (p *oidcProvider) stop() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// startCorpHopper serves hopper at listen with the provider as "corp",
// and the role corp-group:builders giving secrets:get:acme/*.
func startCorpHopper(t *testing.T, listen, issuer string) *e2e.Server {
	t.Helper()
	config := filepath.Join(t.TempDir(), "login.json")
	require.NoError(t, os.WriteFile(config, []byte(`{"providers": [{"name": "corp", "kind": "oidc", "displayName": "Corporate SSO",
		"issuer": "`+issuer+`", "clientId": "hopper", "clientSecretEnv": "HOPPER_CORP_CLIENT_SECRET",
		"scopes": ["profile", "email", "groups"], "requireVerifiedEmail": true}]}`), 0o600))
	srv := e2e.StartServer(t, e2e.ServerOptions{Listen: listen, Env: []string{"HOPPER_LOGIN_CONFIG=" + config,
		"HOPPER_CORP_CLIENT_SECRET=corp-client-secret"}})
	role := exec.Command(e2e.Binary(t), "role", "create", "corp-group:builders", "--description", "builders of corp",
		"--scope", "secrets:get:acme/*")
	role.Env = append(cleanEnv(), srv.Env()...)
	out, err := role.CombinedOutput()
	require.NoError(t, err, string(out))
	return srv
}

// personForms drives the provider's and hopper's pages as a person
// would: sign in as user, consent, and at hopper's command-line page
// allow (or deny) the command; it follows redirects until the browser
// reaches the command's loopback port, and returns that page.
var formAction = regexp.MustCompile(`<form[^>]*action="([^"]*)"`)

func (b *browser) person(start, user string, allow bool) (int, string) {
	b.t.Helper()
	method, to, form, header := http.MethodGet, start, url.Values(nil), []string(nil)
	aborted := false
	for range 30 {
		status, h, page := b.do(method, to, form, header...)
		if aborted {
			return status, page
		}
		method, form, header = http.MethodGet, nil, nil
		base, err := url.Parse(to)
		require.NoError(b.t, err)
		switch {
		case status == http.StatusFound || status == http.StatusSeeOther:
			next, err := base.Parse(h.Get("Location"))
			require.NoError(b.t, err)
			to = next.String()
			continue
		case status != http.StatusOK:
			return status, page
		case strings.HasPrefix(to, "http://127.0.0.1:") && strings.Contains(to, "/callback?"), !strings.Contains(page, "<form"):
			return status, page
		}
		m := formAction.FindStringSubmatch(page)
		require.NotNil(b.t, m, page)
		action, err := base.Parse(strings.ReplaceAll(m[1], "&amp;", "&"))
		require.NoError(b.t, err)
		method, to, form = http.MethodPost, action.String(), hiddenFields(page)
		switch {
		case strings.Contains(page, `name="login"`):
			form.Set("login", user)
			form.Set("password", "any password")
		case strings.Contains(page, `id="allow"`): // hopper's page
			header = []string{"Origin", base.Scheme + "://" + base.Host}
			if !allow {
				m := regexp.MustCompile(`action="([^"]*/deny[^"]*)"`).FindStringSubmatch(page)
				require.NotNil(b.t, m)
				action, _ = base.Parse(strings.ReplaceAll(m[1], "&amp;", "&"))
				to = action.String()
			}
			form = nil
		case strings.Contains(page, "op.deviceConfirmForm") && !allow:
			form.Del("confirm")
			form.Set("abort", "yes")
			aborted = true
		}
	}
	b.t.Fatalf("the sign-in went round in circles from %s", start)
	return 0, ""
}

// loginRun is a running `hopper login`.
type loginRun struct {
	cmd    *exec.Cmd
	stdout *e2e.SyncBuffer
	stderr *e2e.SyncBuffer
	done   chan struct{}
}

func startLogin(t *testing.T, env []string, args ...string) *loginRun {
	t.Helper()
	cmd := exec.Command(e2e.Binary(t), append([]string{"login"}, args...)...)
	cmd.Env = append(cleanEnv(), env...)
	r := &loginRun{cmd: cmd, stdout: &e2e.SyncBuffer{}, stderr: &e2e.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = r.stdout, r.stderr
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-r.done
	})
	return r
}

// address waits for the line matching re on stderr.
func (r *loginRun) address(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	var m []string
	err := testclock.Poll(context.Background(), 3*time.Minute, func() bool {
		m = re.FindStringSubmatch(r.stderr.String())
		return m != nil
	})
	require.NoError(t, err, "hopper login printed: %s", r.stderr.String())
	return m
}

// wait returns the exit code.
func (r *loginRun) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(5 * time.Minute):
		t.Fatalf("hopper login did not finish: %s", r.stderr.String())
	}
	return r.cmd.ProcessState.ExitCode()
}

func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TASKCLUSTER_") && !strings.HasPrefix(kv, "HOPPER_CREDENTIALS=") && !strings.HasPrefix(kv, "BROWSER=") {
			out = append(out, kv)
		}
	}
	return out
}

var cliURL = regexp.MustCompile(`(http://\S+/login/corp/cli\?\S+)`)

// TestHopperLoginWithOIDCProvider signs in from a terminal through a
// real OpenID provider (oidc-provider): `hopper login` with the browser
// and a loopback redirect, and with the device flow; the stored
// credentials are the person's and the other commands use them; a
// denied command, a forged state on the loopback port, an expired device
// code and a provider that is down each end with a message and an exit
// code, and write nothing.
func TestHopperLoginWithOIDCProvider(t *testing.T) {
	t.Parallel()
	listen := e2e.FreePort(t)
	rootURL := "http://" + listen
	port := strings.TrimPrefix(e2e.FreePort(t), "127.0.0.1:")
	groups := map[string][]string{"alice": {"builders"}}
	op := startOIDC(t, port, rootURL, groups, 10*time.Minute)
	srv := startCorpHopper(t, listen, op.issuer)
	home := t.TempDir()
	credFile := filepath.Join(home, "credentials.json")
	env := []string{"TASKCLUSTER_ROOT_URL=" + srv.RootURL, "HOPPER_CREDENTIALS=" + credFile}
	ctx := context.Background()
	// The acme secret the builders may read.
	secret := exec.Command(e2e.Binary(t), "secret", "set", "acme/deploy", "--key", "token")
	secret.Stdin = strings.NewReader("v1")
	secret.Env = append(cleanEnv(), srv.Env()...)
	out, err := secret.CombinedOutput()
	require.NoError(t, err, string(out))

	// The guide's example: the browser (a script that hands the address
	// to this test's person) and the loopback redirect; then a command
	// as the person, with no TASKCLUSTER_* credentials at all.
	urlFile := filepath.Join(home, "browser-url")
	openScript := filepath.Join(home, "browser")
	require.NoError(t, os.WriteFile(openScript, []byte("#!/bin/sh\necho \"$1\" > "+urlFile+".tmp && mv "+urlFile+".tmp "+urlFile+"\n"), 0o755))
	type shellResult struct {
		out string
		err error
	}
	guide := make(chan shellResult, 1)
	example := e2e.DocExample(t, "login-hopper-login")
	go func() {
		out, err := e2e.DocShell{Env: []string{"HOPPER_CREDENTIALS=" + credFile, "BROWSER=" + openScript}, Timeout: 5 * time.Minute,
			Replace: []string{"https://hopper.example.com", srv.RootURL, "hopper login gitea", "hopper login corp"}}.Run(t, example)
		guide <- shellResult{out, err}
	}()
	var opened []byte
	require.NoError(t, testclock.Poll(ctx, time.Minute, func() bool {
		opened, _ = os.ReadFile(urlFile)
		return len(opened) > 0
	}))
	b := newBrowser(t)
	status, page := b.person(strings.TrimSpace(string(opened)), "alice", true)
	require.Equal(t, http.StatusOK, status, page)
	require.Contains(t, page, "Signed in")
	res := <-guide
	require.NoError(t, res.err, res.out)
	require.Regexp(t, `Signed in as corp/alice\|alice until`, res.out)
	require.Contains(t, res.out, "v1", "the person read the secret with the stored credentials")
	info, err := os.Stat(credFile)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	var stored struct {
		RootURL, Identity, ClientID, AccessToken, Certificate string
		Expires                                               time.Time
	}
	data, err := os.ReadFile(credFile)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &stored))
	require.Equal(t, srv.RootURL, stored.RootURL)
	require.Equal(t, "corp/alice|alice", stored.Identity)
	require.Equal(t, stored.Identity, stored.ClientID)
	require.NotEmpty(t, stored.Certificate)
	require.WithinDuration(t, time.Now().Add(time.Hour), stored.Expires, 2*time.Minute)
	person := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: stored.ClientID,
		AccessToken: stored.AccessToken, Certificate: stored.Certificate}}
	scopes, err := person.CurrentScopes(ctx)
	require.NoError(t, err)
	require.Contains(t, scopes, "assume:login-identity:corp/alice|alice")
	require.Contains(t, scopes, "secrets:get:acme/*", "the builders group's role gives its scopes")

	// A second sign-in reuses the browser's session: only hopper's page.
	run := startLogin(t, env, "--no-browser", "--export")
	status, page = b.person(run.address(t, cliURL)[1], "nobody-else", true)
	require.Equal(t, http.StatusOK, status, page)
	require.Equal(t, 0, run.wait(t), run.stderr.String())
	require.Contains(t, run.stdout.String(), "export TASKCLUSTER_CLIENT_ID='corp/alice|alice'\n")
	require.Contains(t, run.stdout.String(), "export TASKCLUSTER_CERTIFICATE=")

	// Refusals write nothing.
	require.NoError(t, os.Remove(credFile))
	// The person denies the command.
	run = startLogin(t, env, "--no-browser")
	status, page = b.person(run.address(t, cliURL)[1], "alice", false)
	require.Equal(t, http.StatusBadRequest, status, page)
	require.Equal(t, 1, run.wait(t))
	require.Contains(t, run.stderr.String(), "you denied the command in the browser; nothing was written")
	// Another page sends the browser to the loopback port with a state
	// of its own.
	run = startLogin(t, env, "--no-browser")
	start, err := url.Parse(run.address(t, cliURL)[1])
	require.NoError(t, err)
	forged := start.Query().Get("redirect_uri") + "?code=forged&state=forged-state-0123456789"
	status, page = b.person(forged, "alice", true)
	require.Equal(t, http.StatusBadRequest, status, page)
	require.Equal(t, 1, run.wait(t))
	require.Contains(t, run.stderr.String(), "another sign-in's state")
	_, err = os.Stat(credFile)
	require.ErrorIs(t, err, os.ErrNotExist)

	// The device flow: hopper asks the provider for the codes.
	device := regexp.MustCompile(`\(or open (http://\S+)\)`)
	run = startLogin(t, env, "--device")
	status, page = newBrowser(t).person(run.address(t, device)[1], "alice", true)
	require.Equal(t, http.StatusOK, status, page)
	require.Equal(t, 0, run.wait(t), run.stderr.String())
	require.Contains(t, run.stderr.String(), "Signed in as corp/alice|alice")
	require.NoError(t, os.Remove(credFile))
	// Denied at the provider.
	run = startLogin(t, env, "--device")
	newBrowser(t).person(run.address(t, device)[1], "alice", false)
	require.Equal(t, 1, run.wait(t))
	require.Contains(t, run.stderr.String(), "the sign-in was denied at Corporate SSO")
	// Nobody signs in before the code expires (1 s: the provider again,
	// with short-lived device codes).
	op.stop()
	op = startOIDC(t, port, rootURL, groups, time.Second)
	run = startLogin(t, env, "--device")
	run.address(t, device)
	require.Equal(t, 1, run.wait(t))
	require.Contains(t, run.stderr.String(), "the device code expired")
	_, err = os.Stat(credFile)
	require.ErrorIs(t, err, os.ErrNotExist)

	// The provider is down.
	op.stop()
	run = startLogin(t, env, "--device")
	require.Equal(t, 69, run.wait(t))
	require.Contains(t, run.stderr.String(), "Corporate SSO cannot be reached")
	_, err = os.Stat(credFile)
	require.ErrorIs(t, err, os.ErrNotExist)

	// Nothing secret reached hopper's log.
	require.NotContains(t, srv.Logs(), stored.AccessToken)
	require.NotContains(t, srv.Logs(), "corp-client-secret")
}
