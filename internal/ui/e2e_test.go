package ui_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/ui"
)

// TestServedByHopperServe runs the real binary: the UI is mounted, the root
// URL sends browsers to it, and API clients still get Taskcluster's JSON
// 404 there.
func TestServedByHopperServe(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the hopper binary")
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
