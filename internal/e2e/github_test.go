package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/forge/forgetest"
)

// TestGithubOfficialClient drives the Github service with the npm
// taskcluster-client and a real webhook payload (e2e/node/github.mjs),
// against a hopper serving a GitHub App whose GitHub is local and checks
// every request against GitHub's OpenAPI description.
func TestGithubOfficialClient(t *testing.T) {
	t.Parallel()
	e2e.RequireNode(t)
	gh := forgetest.Start(t)
	const sha = "6113728f27ae82c7b1a177c8d03f9e96e0adf246" // the push example's commit
	const tq = "github-e2e/ci"
	tcyml := `version: 1
tasks:
  - taskQueueId: ` + tq + `
    deadline: {$fromNow: '1 day'}
    payload: {}
    metadata: {name: e2e, description: '${tasks_for}', owner: 'ci@example.com', source: '${event.repository.html_url}'}
`
	gh.Install("Codertocat", "Hello-World", 1)
	gh.SetFile("Codertocat", "Hello-World", sha, ".taskcluster.yml", tcyml)
	dir := t.TempDir()
	yml := filepath.Join(dir, "tcyml")
	require.NoError(t, os.WriteFile(yml, []byte(tcyml), 0o600))
	const secret = "e2e webhook secret"
	srv := startGithubAppServer(t, gh, secret)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := e2e.RunNode(ctx, t, "github.mjs", append(srv.Env(), "GITHUB_WEBHOOK_SECRET="+secret, "GITHUB_E2E_QUEUE="+tq, "GITHUB_E2E_TCYML="+yml)...)
	t.Log(out)
	require.Contains(t, out, "ok - cancelBuilds", "the script ran to its end")

	// The statuses reached the local GitHub: pending, then error for the
	// cancel (createStatus's own came between).
	ours := func() []forgetest.Call {
		var out []forgetest.Call
		for _, c := range gh.Calls("/statuses/" + sha) {
			if c.Body["context"] == "Taskcluster (push)" {
				out = append(out, c)
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return len(ours()) == 2 }, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, "pending", ours()[0].Body["state"])
	require.Equal(t, "error", ours()[1].Body["state"])
	require.Len(t, gh.Calls("/issues/1/comments"), 1)
	// `hopper github render` against the stored delivery shows its task
	// and the branch's role; a broken file says why.
	builds, _, err := rootClient(srv).GithubBuilds(ctx, nil)
	require.NoError(t, err)
	require.Len(t, builds, 1)
	require.Equal(t, "github.com", builds[0].Host)
	require.Equal(t, gh.Server.URL+"/Codertocat/Hello-World/commit/"+sha, builds[0].ForgeURL)
	stdout, stderr, code := hopperCLI(t, srv.Env(), "github", "render", "-f", yml, "--delivery", "github.com/"+builds[0].EventID)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `"assume:repo:github.com/Codertocat/Hello-World:branch:master"`)
	require.Contains(t, stdout, `"description": "github-push"`)
	// The guide's render commands, as written, in a checkout holding its
	// starting .taskcluster.yml, against the delivery just stored.
	guide := t.TempDir()
	writeFile(t, guide, ".taskcluster.yml", e2e.DocExample(t, "github-taskcluster-yml").Text)
	writeFile(t, guide, "pr.json", `{"number": 7}`)
	out, err = e2e.DocShell{Dir: guide, Env: srv.Env(), Replace: []string{"<X-GitHub-Delivery>", builds[0].EventID}}.Run(t, e2e.DocExample(t, "github-render"))
	require.NoError(t, err, out)
	require.Contains(t, out, `"tasks_for": "github-pull-request"`)
	require.Contains(t, out, `"assume:repo:github.com/Codertocat/Hello-World:branch:master"`)
	bad := writeFile(t, dir, "bad.yml", "version: 1\ntasks: [{$eval: nope}]\n")
	_, stderr, code = hopperCLI(t, srv.Env(), "github", "render", "-f", bad, "--event", "github-push")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "InterpreterError at template.tasks[0]: unknown context value nope")

	// No secret reaches the log.
	require.NotContains(t, srv.Logs(), secret)
	require.NotContains(t, srv.Logs(), "PRIVATE KEY")
}

// startGithubAppServer starts hopper serve with one forge, github.com as
// the GitHub App served by gh (app 4242, its key in a file), whose
// webhooks are signed with secret.
func startGithubAppServer(t *testing.T, gh *forgetest.GitHub, secret string) *e2e.Server {
	t.Helper()
	dir := t.TempDir()
	key := filepath.Join(dir, "app.pem")
	require.NoError(t, os.WriteFile(key, gh.PEM, 0o600))
	config := filepath.Join(dir, "forges.yml")
	require.NoError(t, os.WriteFile(config, []byte(`forges:
  - host: github.com
    kind: github
    apiUrl: `+gh.Server.URL+`
    appId: 4242
    privateKey: {file: `+key+`}
    webhookSecrets: [{env: E2E_GITHUB_WEBHOOK_SECRET}]
`), 0o600))
	return e2e.StartServer(t, e2e.ServerOptions{Args: []string{"--forge-config", config}, Env: []string{"E2E_GITHUB_WEBHOOK_SECRET=" + secret}})
}
