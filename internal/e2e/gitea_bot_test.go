package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGiteaBotReplaysAndErrors drives hopper from a real Gitea whose bot
// is not an administrator of the repository: the permission lookup Gitea
// refuses is an error on the commit and on the delivery's record (never
// an untrusted user); Gitea's Test delivery, which sends a push again
// (the branch's head pushed again, before and after the same commit)
// gives the commit no second task group; a
// push's error reaches Gitea as an error status only (Gitea takes no
// commit comment), never retried.
func TestGiteaBotReplaysAndErrors(t *testing.T) {
	t.Parallel()
	g := startGitea(t)
	srv, secret := startGiteaForge(t, g, g.botToken)
	root := rootClient(srv)
	ctx := context.Background()
	g.api(t, http.MethodPost, "/user/repos", map[string]any{"name": "demo", "auto_init": true, "default_branch": "main"}, nil)
	g.api(t, http.MethodPut, "/repos/alice/demo/collaborators/hopperbot", map[string]any{"permission": "write"}, nil)
	var hook struct {
		ID int64 `json:"id"`
	}
	g.api(t, http.MethodPost, "/repos/alice/demo/hooks", map[string]any{"type": "gitea", "active": true,
		"events": []string{"push", "pull_request", "pull_request_sync", "issue_comment", "pull_request_comment"},
		"config": map[string]string{"url": srv.RootURL + "/api/github/v1/github", "content_type": "json", "secret": secret}}, &hook)

	waitStatus := func(sha, context, want string) map[string]any {
		t.Helper()
		var got map[string]any
		require.Eventually(t, func() bool {
			var out []map[string]any
			g.api(t, http.MethodGet, "/repos/alice/demo/commits/"+sha+"/statuses", nil, &out)
			for _, s := range out {
				if s["context"] == context && s["status"] == want {
					got = s
					return true
				}
			}
			return false
		}, 60*time.Second, 250*time.Millisecond, "status %s %s of %s\nhopper:\n%s", context, want, sha, srv.Logs())
		return got
	}
	pushBuilds := func(sha string) int {
		bs, _, err := root.GithubBuilds(ctx, map[string][]string{"organization": {"alice"}, "repository": {"demo"}, "sha": {sha}})
		require.NoError(t, err)
		return len(bs)
	}

	// A push of .taskcluster.yml: one task group.
	mainSHA := g.putFile(t, "main", "", ".taskcluster.yml", giteaTaskclusterYml, "")
	waitStatus(mainSHA, "Taskcluster (push)", "pending")
	require.Equal(t, 1, pushBuilds(mainSHA))

	// Gitea's Replay (in the web UI) sends that push's body again under a
	// new delivery id: nothing more is created.
	g.replayFirstDelivery(t, hook.ID)
	require.Eventually(t, func() bool { return strings.Contains(srv.Logs(), "replays an earlier one") }, 60*time.Second, 250*time.Millisecond, srv.Logs())
	require.Equal(t, 1, pushBuilds(mainSHA))

	// Gitea's Test delivery sends a push of the branch's head (before and
	// after the same commit) under a new delivery id: it starts nothing
	// (checked below, once later deliveries have come).
	g.api(t, http.MethodPost, fmt.Sprintf("/repos/alice/demo/hooks/%d/tests", hook.ID), nil, nil)

	// A pull request by the repository's owner: the bot (write access)
	// may not read the owner's permission. The commit says so; nothing
	// blames the pull-request policy.
	featureSHA := g.putFile(t, "feature", "main", "feature.txt", "a change\n", "")
	var pr struct {
		Number int `json:"number"`
	}
	g.api(t, http.MethodPost, "/repos/alice/demo/pulls", map[string]any{"head": "feature", "base": "main", "title": "a change"}, &pr)
	st := waitStatus(featureSHA, "Taskcluster (pull_request)", "error")
	require.Contains(t, st["description"], "could not read alice's permission")
	require.NotContains(t, srv.Logs(), "not trusted under policy")
	failed, _, err := root.GithubFailedDeliveries(ctx, nil)
	require.NoError(t, err)
	require.NotEmpty(t, failed)
	require.Contains(t, failed[0].Error, "403")
	require.Contains(t, failed[0].Error, "administrator")
	require.Contains(t, st["target_url"], "/ui/#/delivery/")
	require.Equal(t, 1, pushBuilds(mainSHA), "the test delivery started nothing")

	// The pull request has the error's comment once; it ends with hopper's
	// marker, which Gitea leaves out of the rendered comment.
	var marked string
	require.Eventually(t, func() bool {
		var comments []struct {
			Body string `json:"body"`
		}
		g.api(t, http.MethodGet, fmt.Sprintf("/repos/alice/demo/issues/%d/comments", pr.Number), nil, &comments)
		var ours []string
		for _, c := range comments {
			if strings.Contains(c.Body, "<!-- hopper:comment:") {
				ours = append(ours, c.Body)
			}
		}
		if len(ours) == 1 {
			marked = ours[0]
		}
		return len(ours) == 1
	}, 60*time.Second, 250*time.Millisecond, "one marked comment on the pull request\nhopper:\n%s", srv.Logs())
	require.Contains(t, marked, "could not read alice's permission")
	require.Contains(t, g.render(t, marked), "could not read alice")
	require.NotContains(t, g.render(t, marked), "hopper:comment")

	// A push whose .taskcluster.yml does not render: an error status,
	// and nothing left to send again.
	var file struct {
		SHA string `json:"sha"`
	}
	g.api(t, http.MethodGet, "/repos/alice/demo/contents/.taskcluster.yml?ref=main", nil, &file)
	badSHA := g.putFile(t, "main", "", ".taskcluster.yml", "version: 1\ntasks: [{$eval: 'nope.x'}]\n", file.SHA)
	waitStatus(badSHA, "Taskcluster (push)", "error")
	require.NotContains(t, srv.Logs(), "trying again", "nothing the forge cannot take is retried")
	require.NotContains(t, srv.Logs(), g.botToken)
}

// replayFirstDelivery signs in to Gitea's web UI as alice and presses
// Replay on the hook's only delivery so far.
func (g *gitea) replayFirstDelivery(t *testing.T, hookID int64) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar}
	resp, err := c.PostForm(g.url+"/user/login", url.Values{"user_name": {"alice"}, "password": {"alice-password-1"}})
	require.NoError(t, err)
	resp.Body.Close()
	page := fmt.Sprintf("%s/alice/demo/settings/hooks/%d", g.url, hookID)
	var uuids [][]string
	require.Eventually(t, func() bool {
		resp, err := c.Get(page)
		if err != nil {
			return false
		}
		html, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		uuids = regexp.MustCompile(`/replay/([0-9a-f-]{36})`).FindAllStringSubmatch(string(html), -1)
		return len(uuids) == 1
	}, 30*time.Second, 250*time.Millisecond, "the hook's page lists one delivery with Replay")
	resp, err = c.PostForm(page+"/replay/"+uuids[0][1], url.Values{})
	require.NoError(t, err)
	resp.Body.Close()
	require.Less(t, resp.StatusCode, 400, "replay: %s", resp.Status)
}

// render is Gitea's HTML of a comment's markdown (POST /markdown in
// comment mode, as an issue's page renders it).
func (g *gitea) render(t *testing.T, text string) string {
	t.Helper()
	in, err := json.Marshal(map[string]string{"Text": text, "Mode": "comment"})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, g.url+"/api/v1/markdown", bytes.NewReader(in))
	require.NoError(t, err)
	req.Header.Set("Authorization", "token "+g.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	html, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", html)
	return string(html)
}
