package e2e_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
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
)

// gitea is a real Gitea (HOPPER_TEST_GITEA names its binary: build it
// from code.gitea.io/gitea v1.26.0 with -tags 'sqlite sqlite_unlock_notify')
// on loopback, SQLite, installed, webhooks allowed to loopback.
type gitea struct {
	url, token string
	// botToken is hopperbot's, a user who is no administrator (with
	// write:repository and write:issue), as docs/github.md once advised.
	botToken string
}

func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func startGitea(t *testing.T) *gitea {
	t.Helper()
	bin := os.Getenv("HOPPER_TEST_GITEA")
	if bin == "" {
		t.Skip("HOPPER_TEST_GITEA is not set: the end-to-end test against a real Gitea needs its binary (go build -tags 'sqlite sqlite_unlock_notify' in code.gitea.io/gitea@v1.26.0)")
	}
	// A Gitea built without the bindata tag reads its templates, locales
	// and assets from its source tree: the module's directory.
	assets := os.Getenv("HOPPER_TEST_GITEA_ASSETS")
	if assets == "" {
		out, err := exec.Command("go", "env", "GOMODCACHE").Output()
		require.NoError(t, err)
		assets = filepath.Join(strings.TrimSpace(string(out)), "code.gitea.io", "gitea@v1.26.0")
	}
	if _, err := os.Stat(filepath.Join(assets, "options", "locale")); err != nil {
		t.Skipf("Gitea's assets are not at %s (set HOPPER_TEST_GITEA_ASSETS to its source tree): %v", assets, err)
	}
	dir := t.TempDir()
	port := freeLoopbackPort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	ini := filepath.Join(dir, "app.ini")
	require.NoError(t, os.WriteFile(ini, []byte(fmt.Sprintf(`APP_NAME = hopper-e2e
RUN_MODE = prod
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true
WORK_PATH = %[1]s
[server]
HTTP_ADDR = 127.0.0.1
HTTP_PORT = %[2]d
ROOT_URL = %[3]s/
DISABLE_SSH = true
OFFLINE_MODE = true
STATIC_ROOT_PATH = %[4]s
LFS_START_SERVER = false
[database]
DB_TYPE = sqlite3
PATH = %[1]s/gitea.db
[repository]
ROOT = %[1]s/repos
DEFAULT_BRANCH = main
[security]
INSTALL_LOCK = true
SECRET_KEY = hopper-e2e-secret-key
[service]
DISABLE_REGISTRATION = true
[webhook]
ALLOWED_HOST_LIST = loopback
DELIVER_TIMEOUT = 10
[log]
MODE = console
LEVEL = warn
[indexer]
REPO_INDEXER_ENABLED = false
[cron]
ENABLED = false
`, dir, port, url, assets)), 0o600))
	giteaFrontendPlaceholders(t, filepath.Join(dir, "custom"))
	env := append(os.Environ(), "GITEA_WORK_DIR="+dir, "HOME="+dir, "GITEA_CUSTOM="+filepath.Join(dir, "custom"))
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append(args, "--config", ini)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "gitea %v: %s", args, out)
		return string(out)
	}
	run("migrate")
	run("admin", "user", "create", "--username", "alice", "--password", "alice-password-1", "--email", "alice@example.com", "--admin", "--must-change-password=false")
	token := giteaTokenIn(t, run("admin", "user", "generate-access-token", "--username", "alice", "--token-name", "hopper", "--scopes", "all", "--raw"))
	run("admin", "user", "create", "--username", "hopperbot", "--password", "hopperbot-password-1", "--email", "bot@example.com", "--must-change-password=false")
	bot := giteaTokenIn(t, run("admin", "user", "generate-access-token", "--username", "hopperbot", "--token-name", "hopper", "--scopes", "write:repository,write:issue", "--raw"))
	var logs bytes.Buffer
	cmd := exec.Command(bin, "web", "--config", ini)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("gitea logs:\n%s", logs.String())
		}
	})
	g := &gitea{url: url, token: token, botToken: bot}
	require.Eventually(t, func() bool {
		resp, err := http.Get(url + "/api/v1/version")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 200*time.Millisecond, "gitea did not start")
	return g
}

// giteaTokenIn finds the token in generate-access-token's output. Gitea's
// console log shares stdout and is written asynchronously, so under load
// its lines can come after the token: the last line is not always it.
func giteaTokenIn(t *testing.T, out string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if line = strings.TrimSpace(line); giteaTokenRE.MatchString(line) {
			return line
		}
	}
	t.Fatalf("no access token in gitea's output: %s", out)
	return ""
}

var giteaTokenRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// giteaFrontendPlaceholders gives Gitea, whose module source has no built
// frontend (public/assets holds only images; building it takes Gitea's
// node toolchain), empty files at the asset paths its pages load. Without
// them each page's <script onerror="alert(...)"> opens a dialog for the
// 404, which blocks the page in a browser: it never fires load. Gitea's
// sign-in and grant pages are plain server-rendered forms, so the browser
// test drives them without Gitea's JavaScript and styles. The theme file
// carries the meta block Gitea reads to list it as a usable theme.
func giteaFrontendPlaceholders(t *testing.T, custom string) {
	t.Helper()
	files := map[string]string{
		"js/iife.js":               "/* Gitea's frontend is not built for the tests */\n",
		"js/index.js":              "/* Gitea's frontend is not built for the tests */\n",
		"css/index.css":            "/* Gitea's frontend is not built for the tests */\n",
		"css/theme-gitea-auto.css": "gitea-theme-meta-info {\n  --theme-display-name: \"Auto\";\n  --theme-color-scheme: \"auto\";\n}\n",
	}
	for name, content := range files {
		path := filepath.Join(custom, "public", "assets", filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
}

// api calls Gitea's API as alice.
func (g *gitea) api(t *testing.T, method, path string, in, out any) int {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		require.NoError(t, err)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, g.url+"/api/v1"+path, body)
	require.NoError(t, err)
	req.Header.Set("Authorization", "token "+g.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	require.Less(t, resp.StatusCode, 300, "%s %s: %s", method, path, data)
	if out != nil {
		require.NoError(t, json.Unmarshal(data, out), string(data))
	}
	return resp.StatusCode
}

// putFile commits a file to a branch (from another branch when from is
// set) through Gitea's contents API, which pushes like git does, and
// returns the commit.
func (g *gitea) putFile(t *testing.T, branch, from, path, content, sha string) string {
	t.Helper()
	in := map[string]any{"content": base64.StdEncoding.EncodeToString([]byte(content)), "message": "update " + path, "branch": branch}
	if from != "" {
		in["branch"], in["new_branch"] = from, branch
	}
	method := http.MethodPost
	if sha != "" {
		in["sha"] = sha
		method = http.MethodPut
	}
	var out struct {
		Commit struct{ SHA string } `json:"commit"`
	}
	g.api(t, method, "/repos/alice/demo/contents/"+path, in, &out)
	return out.Commit.SHA
}

// statuses returns a commit's statuses by context, the newest of each.
func (g *gitea) statuses(t *testing.T, sha string) map[string]string {
	t.Helper()
	var out []struct {
		ID      int64  `json:"id"`
		Context string `json:"context"`
		Status  string `json:"status"`
	}
	g.api(t, http.MethodGet, "/repos/alice/demo/commits/"+sha+"/statuses", nil, &out)
	newest := map[string]int64{}
	states := map[string]string{}
	for _, s := range out {
		if s.ID > newest[s.Context] {
			newest[s.Context], states[s.Context] = s.ID, s.Status
		}
	}
	return states
}

const giteaTaskclusterYml = `version: 1
policy:
  pullRequests: collaborators
  allowComments: collaborators
tasks:
  $let:
    owner: {$if: 'tasks_for == "github-push"', then: '${event.pusher.name}@example.com', else: '${event.sender.login}@example.com'}
  in:
    $if: 'tasks_for in ["github-push", "github-issue-comment"] || event["action"] in ["opened", "reopened", "synchronize"]'
    then:
      - taskQueueId: gitea-e2e/ci
        deadline: {$fromNow: '1 day'}
        payload: {}
        metadata:
          name: '${tasks_for}'
          description: '${event.forge.kind} ${event.forge.event}'
          owner: '${owner}'
          source: '${event.repository.html_url}'
`

// TestGiteaEndToEnd drives hopper from a real Gitea: a repository with a
// webhook to hopper, a push of .taskcluster.yml, a pull request, a
// `/taskcluster` comment; each creates its task with the Gitea host's
// role, and the statuses come back to the commits through Gitea's API.
func TestGiteaEndToEnd(t *testing.T) {
	t.Parallel()
	g := startGitea(t)
	srv, secret := startGiteaForge(t, g, g.token)
	root := rootClient(srv)
	ctx := context.Background()

	g.api(t, http.MethodPost, "/user/repos", map[string]any{"name": "demo", "auto_init": true, "default_branch": "main"}, nil)
	g.api(t, http.MethodPost, "/repos/alice/demo/hooks", map[string]any{"type": "gitea", "active": true,
		"events": []string{"push", "pull_request", "pull_request_sync", "issue_comment", "pull_request_comment"},
		"config": map[string]string{"url": srv.RootURL + "/api/github/v1/github", "content_type": "json", "secret": secret}}, nil)

	waitStatus := func(sha, context, want string) {
		t.Helper()
		require.Eventually(t, func() bool { return g.statuses(t, sha)[context] == want }, 60*time.Second, 250*time.Millisecond,
			"status %s of %s: %v\nhopper:\n%s", context, sha, g.statuses(t, sha), srv.Logs())
	}
	builds := func(q string) []tcclient.GithubBuild {
		t.Helper()
		bs, _, err := root.GithubBuilds(ctx, map[string][]string{"organization": {"alice"}, "repository": {"demo"}})
		require.NoError(t, err)
		var out []tcclient.GithubBuild
		for _, b := range bs {
			if strings.HasPrefix(b.EventType, q) {
				out = append(out, b)
			}
		}
		return out
	}

	// A push of .taskcluster.yml to main.
	mainSHA := g.putFile(t, "main", "", ".taskcluster.yml", giteaTaskclusterYml, "")
	waitStatus(mainSHA, "Taskcluster (push)", "pending")
	push := builds("push")
	require.Len(t, push, 1)
	group, err := root.ListTaskGroup(ctx, push[0].TaskGroupID, tcclient.ListOptions{})
	require.NoError(t, err)
	require.Len(t, group.Tasks, 1)
	task := group.Tasks[0].Task
	require.Equal(t, "github-push", task.Metadata.Name)
	require.Equal(t, "gitea push", task.Metadata.Description)
	require.Equal(t, "alice@example.com", task.Metadata.Owner)

	// The task fails: the status says so.
	_, err = root.CancelTask(ctx, group.Tasks[0].Status.TaskID)
	require.NoError(t, err)
	waitStatus(mainSHA, "Taskcluster (push)", "failure")

	// A pull request from a branch (alice owns the repository: trusted
	// by the permission endpoint, where the collaborator check says 404).
	featureSHA := g.putFile(t, "feature", "main", "feature.txt", "a change\n", "")
	var pr struct {
		Number int `json:"number"`
	}
	g.api(t, http.MethodPost, "/repos/alice/demo/pulls", map[string]any{"head": "feature", "base": "main", "title": "a change"}, &pr)
	waitStatus(featureSHA, "Taskcluster (pull_request)", "pending")

	// A new push to the pull request (Gitea says synchronized).
	var file struct {
		SHA string `json:"sha"`
	}
	g.api(t, http.MethodGet, "/repos/alice/demo/contents/feature.txt?ref=feature", nil, &file)
	syncSHA := g.putFile(t, "feature", "", "feature.txt", "a second change\n", file.SHA)
	waitStatus(syncSHA, "Taskcluster (pull_request)", "pending")
	require.Eventually(t, func() bool { return len(builds("pull_request.synchronize")) == 1 }, 30*time.Second, 250*time.Millisecond)

	// A comment asking for a run.
	g.api(t, http.MethodPost, fmt.Sprintf("/repos/alice/demo/issues/%d/comments", pr.Number), map[string]string{"body": "/taskcluster run it"}, nil)
	require.Eventually(t, func() bool { return len(builds("issue_comment")) == 1 }, 60*time.Second, 250*time.Millisecond, srv.Logs())
	waitStatus(syncSHA, "Taskcluster (issue_comment)", "pending")
	require.NotContains(t, srv.Logs(), g.token)
	require.NotContains(t, srv.Logs(), secret)
}

// startGiteaForge starts hopper serve with g as its one forge, reached
// with token, and the roles of alice/demo's branches and pull requests:
// it returns the server and the webhook secret.
func startGiteaForge(t *testing.T, g *gitea, token string) (srv *e2e.Server, secret string) {
	t.Helper()
	host := strings.TrimPrefix(g.url, "http://")
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))
	config := filepath.Join(dir, "forges.yml")
	require.NoError(t, os.WriteFile(config, []byte(`forges:
  - host: `+host+`
    kind: gitea
    apiUrl: `+g.url+`/api/v1
    token: {file: `+tokenFile+`}
    webhookSecrets: [{env: GITEA_E2E_SECRET}]
`), 0o600))
	secret = "gitea e2e webhook secret"
	srv = e2e.StartServer(t, e2e.ServerOptions{Args: []string{"--forge-config", config}, Env: []string{"GITEA_E2E_SECRET=" + secret}})
	root := rootClient(srv)
	for _, role := range []string{"branch:*", "pull-request"} {
		_, err := root.CreateRole(context.Background(), "repo:"+host+"/alice/demo:"+role, &tcclient.RoleRequest{Description: "gitea e2e",
			Scopes: []string{"queue:create-task:lowest:gitea-e2e/ci", "queue:create-task:project:none"}})
		require.NoError(t, err)
	}
	return srv, secret
}
