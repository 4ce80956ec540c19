package ui_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/ui"
)

// TestServedByHopperServe runs the real binary: the UI is mounted, the root
// URL sends browsers to it, and API clients still get Taskcluster's JSON
// 404 there.
func TestServedByHopperServe(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips building and running the hopper binary")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(t *testing.T, path, accept string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.RootURL+path, nil)
		require.NoError(t, err)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		res, err := noFollow.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res, string(body)
	}
	const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

	t.Run("page", func(t *testing.T) {
		res, body := get(t, "/ui/", browserAccept)
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"))
		require.Equal(t, ui.ContentSecurityPolicy, res.Header.Get("Content-Security-Policy"))
		require.Contains(t, body, `<script src="app.js" defer></script>`)
	})
	t.Run("script", func(t *testing.T) {
		res, _ := get(t, "/ui/app.js", "")
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Equal(t, "text/javascript; charset=utf-8", res.Header.Get("Content-Type"))
	})
	t.Run("without slash", func(t *testing.T) {
		res, _ := get(t, "/ui", browserAccept)
		// ServeMux's own redirect to the subtree (its status varies
		// between Go releases).
		require.Contains(t, []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect}, res.StatusCode)
		require.Equal(t, "/ui/", res.Header.Get("Location"))
	})
	t.Run("root for browsers", func(t *testing.T) {
		res, _ := get(t, "/", browserAccept)
		require.Equal(t, http.StatusFound, res.StatusCode)
		require.Equal(t, "/ui/", res.Header.Get("Location"))
	})
	for _, accept := range []string{"", "application/json", "*/*"} {
		t.Run("root for API clients "+accept, func(t *testing.T) {
			res, body := get(t, "/", accept)
			require.Equal(t, http.StatusNotFound, res.StatusCode)
			require.True(t, strings.HasPrefix(res.Header.Get("Content-Type"), "application/json"))
			var got map[string]string
			require.NoError(t, json.Unmarshal([]byte(body), &got))
			require.Equal(t, map[string]string{"error": "Not found"}, got)
		})
	}
	t.Run("other unmatched paths stay JSON for browsers", func(t *testing.T) {
		res, body := get(t, "/nope", browserAccept)
		require.Equal(t, http.StatusNotFound, res.StatusCode)
		require.JSONEq(t, `{"error":"Not found"}`, body)
	})
	t.Run("anonymous can list a queue's pending and claimed tasks", func(t *testing.T) {
		for _, list := range []string{"pending", "claimed"} {
			res, body := get(t, "/api/queue/v1/task-queues/ui-test%2Fnone/"+list, "application/json")
			require.Equal(t, http.StatusOK, res.StatusCode, body)
			require.JSONEq(t, `{"tasks":[]}`, body)
		}
	})
}

// TestPageRendersInBrowser loads the page in headless Chromium (skipped
// where none is installed) against a real server and reads the rendered
// DOM: the script runs under the CSP, reads the API anonymously, and puts
// task data into the page as text.
func TestPageRendersInBrowser(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary and a headless browser")
	}
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		t.Skip("no headless Chromium installed")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	client := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	taskID, groupID := tcclient.NewTaskID(), tcclient.NewTaskID()
	now := time.Now()
	_, err := client.CreateTask(context.Background(), taskID, &tcclient.TaskDefinition{
		TaskQueueID: "ui-test/browser",
		TaskGroupID: groupID,
		Created:     tcclient.NewTime(now),
		Deadline:    tcclient.NewTime(now.Add(time.Hour)),
		Payload:     json.RawMessage(`{}`),
		Metadata: tcclient.TaskMetadata{Name: "<b>bold</b> & <img src=x>", Description: "browser test",
			Owner: "e2e@example.com", Source: "ssh://example.com/repo?x=<i>"},
	})
	require.NoError(t, err)

	dom := func(t *testing.T, hash string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
			"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--user-data-dir="+t.TempDir(), "--virtual-time-budget=3000", "--dump-dom", srv.RootURL+"/ui/"+hash)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, stderr.String())
		return string(out)
	}
	const escapedName = "&lt;b&gt;bold&lt;/b&gt; &amp; &lt;img src=x&gt;"

	t.Run("task", func(t *testing.T) {
		t.Parallel()
		page := dom(t, "#/task/"+taskID)
		require.Contains(t, page, "<h1>"+escapedName+"</h1>")
		require.Contains(t, page, `<span class="state state-pending">pending</span>`)
		require.Contains(t, page, `href="#/group/`+groupID+`"`)
		require.Contains(t, page, `href="#/queue/ui-test%2Fbrowser"`)
		require.NotContains(t, page, "<b>bold</b>")
		require.NotContains(t, page, `<img src="x"`)
		require.Contains(t, page, "<dd>ssh://example.com/repo?x=&lt;i&gt;</dd>", "only http(s) sources become links")
	})
	t.Run("group", func(t *testing.T) {
		t.Parallel()
		page := dom(t, "#/group/"+groupID)
		require.Contains(t, page, "0 / 1 resolved")
		require.Contains(t, page, `<a href="#/task/`+taskID+`">`+escapedName+"</a>")
	})
	t.Run("queue lists pending tasks anonymously", func(t *testing.T) {
		t.Parallel()
		page := dom(t, "#/queue/ui-test%2Fbrowser")
		require.Contains(t, page, `href="#/task/`+taskID+`"`)
		require.Contains(t, page, "No claimed tasks.")
	})
	t.Run("search by group id", func(t *testing.T) {
		t.Parallel()
		page := dom(t, "#/search/"+groupID)
		require.Contains(t, page, "Task group")
		require.Contains(t, page, "0 / 1 resolved")
	})
	t.Run("missing task", func(t *testing.T) {
		t.Parallel()
		page := dom(t, "#/task/"+tcclient.NewTaskID())
		require.Contains(t, page, `class="error"`)
		require.Contains(t, page, "HTTP 404 ResourceNotFound")
	})
}
