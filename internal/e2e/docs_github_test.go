package e2e_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/forge"
)

// TestGithubGuideForgeConfig loads docs/github.md's forge configuration as
// written (its /etc/hopper files made in a temporary directory).
func TestGithubGuideForgeConfig(t *testing.T) {
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "github-app.pem"), pemKey, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gitea-token"), []byte("a-token\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gitea-webhook-secret"), []byte("a secret\n"), 0o600))
	t.Setenv("GITHUB_WEBHOOK_SECRET", "the github secret")
	config := filepath.Join(dir, "forges.yml")
	require.NoError(t, os.WriteFile(config, []byte(e2e.DocExample(t, "github-forges-config").Replace(t, "/etc/hopper/", dir+"/")), 0o600))
	forges, err := forge.Load(config)
	require.NoError(t, err)
	require.Len(t, forges, 2)
	require.Equal(t, "github.com", forges[0].Host)
	require.Equal(t, forge.KindGitHub, forges[0].Kind)
	require.Equal(t, int64(123456), forges[0].AppID)
	require.Equal(t, "git.example.com", forges[1].Host)
	require.Equal(t, forge.KindGitea, forges[1].Kind)
	require.Equal(t, "https://git.example.com/api/v1", forges[1].APIURL)
}

// TestGithubGuideRolesAndTaskclusterYml runs docs/github.md's role
// commands against a server as written, and renders its starting
// .taskcluster.yml for each event it is for.
func TestGithubGuideRolesAndTaskclusterYml(t *testing.T) {
	t.Parallel()
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	out, err := e2e.DocShell{Env: srv.Env()}.Run(t, e2e.DocExample(t, "github-role-create"))
	require.NoError(t, err, out)
	for _, id := range []string{"repo:github.com/me/project:branch:*", "repo:github.com/me/project:pull-request"} {
		role, err := rootClient(srv).GetRole(context.Background(), id)
		require.NoError(t, err)
		require.Contains(t, role.Scopes, "queue:create-task:project:none")
	}

	dir := t.TempDir()
	yml := filepath.Join(dir, ".taskcluster.yml")
	require.NoError(t, os.WriteFile(yml, []byte(e2e.DocExample(t, "github-taskcluster-yml").Text), 0o600))
	type rendered struct {
		Tasks []struct {
			Task struct {
				TaskQueueID string `json:"taskQueueId"`
				Payload     struct {
					Env map[string]string `json:"env"`
				} `json:"payload"`
				Metadata struct{ Description, Owner string }
			} `json:"task"`
		} `json:"tasks"`
		Scopes []string `json:"scopes"`
		Policy string   `json:"policy"`
	}
	for _, tc := range []struct {
		args  []string
		tasks int
		sha   string
		role  string
	}{
		{[]string{"--event", "github-push", "--org", "me", "--repo", "project"}, 1, "b79ce60be819cdc482c9c6a84dc3c457959aa66f", "assume:repo:github.com/me/project:branch:main"},
		{[]string{"--event", "github-pull-request", "--org", "me", "--repo", "project"}, 1, "b12ead3c5f3499e34356c970e20d7858f1747542", "assume:repo:github.com/me/project:pull-request"},
		{[]string{"--event", "github-issue-comment", "--org", "me", "--repo", "project"}, 1, "b12ead3c5f3499e34356c970e20d7858f1747542", "assume:repo:github.com/me/project:pull-request"},
		{[]string{"--event", "github-release", "--org", "me", "--repo", "project"}, 0, "", "assume:repo:github.com/me/project:release:published"},
	} {
		stdout, stderr, code := hopperCLI(t, nil, append([]string{"github", "render", "-f", yml}, tc.args...)...)
		require.Equal(t, 0, code, stderr)
		var r rendered
		require.NoError(t, json.Unmarshal([]byte(stdout), &r), stdout)
		require.Len(t, r.Tasks, tc.tasks, tc.args)
		require.Equal(t, tc.role, r.Scopes[0])
		if tc.tasks > 0 {
			require.Equal(t, "proj/ci", r.Tasks[0].Task.TaskQueueID)
			require.Equal(t, tc.sha, r.Tasks[0].Task.Payload.Env["SHA"])
			require.Equal(t, "https://github.com/me/project.git", r.Tasks[0].Task.Payload.Env["REPO"])
		}
		if tc.args[1] == "github-pull-request" {
			require.Equal(t, "collaborators", r.Policy)
		}
	}
}
