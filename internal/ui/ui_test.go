package ui_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/ui"
)

// serve runs one request through a mux with the UI mounted as hopper
// mounts it.
func serve(t *testing.T, method, target string, header http.Header) *http.Response {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(ui.Prefix, ui.Handler())
	req := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	return rec.Result()
}

func TestHandlerServesFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path        string
		contentType string
		contains    string
	}{
		{"/ui/", "text/html; charset=utf-8", `<script src="app.js" defer></script>`},
		{"/ui/index.html", "text/html; charset=utf-8", "<title>hopper</title>"},
		{"/ui/app.js", "text/javascript; charset=utf-8", "/api/live/v1/events"},
		{"/ui/style.css", "text/css; charset=utf-8", ":root"},
		{"/ui/favicon.svg", "image/svg+xml", "<svg"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			res := serve(t, http.MethodGet, tt.path, nil)
			body, err := io.ReadAll(res.Body)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, res.StatusCode)
			require.Equal(t, tt.contentType, res.Header.Get("Content-Type"))
			require.Equal(t, ui.ContentSecurityPolicy, res.Header.Get("Content-Security-Policy"))
			require.Contains(t, res.Header.Get("Content-Security-Policy"), "default-src 'self'")
			require.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
			require.Equal(t, "no-cache", res.Header.Get("Cache-Control"))
			require.NotEmpty(t, res.Header.Get("ETag"))
			require.Contains(t, string(body), tt.contains)
		})
	}
}

func TestHandlerRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		method string
		path   string
		status int
	}{
		{"unknown file", http.MethodGet, "/ui/nope.js", http.StatusNotFound},
		{"directory of the embed", http.MethodGet, "/ui/static/app.js", http.StatusNotFound},
		{"dot-dot", http.MethodGet, "/ui/x/../app.js", http.StatusNotFound},
		{"double slash", http.MethodGet, "/ui//app.js", http.StatusNotFound},
		{"post", http.MethodPost, "/ui/", http.StatusMethodNotAllowed},
		{"put", http.MethodPut, "/ui/app.js", http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Straight to the handler: ServeMux would clean the path
			// with a redirect before the handler saw it.
			req := httptest.NewRequest(tt.method, "http://x"+"/ui/", nil)
			req.URL.Path = tt.path
			rec := httptest.NewRecorder()
			ui.Handler().ServeHTTP(rec, req)
			require.Equal(t, tt.status, rec.Code)
			require.Equal(t, ui.ContentSecurityPolicy, rec.Header().Get("Content-Security-Policy"))
			if tt.status == http.StatusMethodNotAllowed {
				require.Equal(t, "GET, HEAD", rec.Header().Get("Allow"))
			}
		})
	}
}

func TestHandlerRevalidation(t *testing.T) {
	t.Parallel()
	first := serve(t, http.MethodGet, "/ui/app.js", nil)
	etag := first.Header.Get("ETag")
	require.Regexp(t, `^"[0-9a-f]{24}"$`, etag)

	again := serve(t, http.MethodGet, "/ui/app.js", http.Header{"If-None-Match": {etag}})
	require.Equal(t, http.StatusNotModified, again.StatusCode)

	other := serve(t, http.MethodGet, "/ui/style.css", nil)
	require.NotEqual(t, etag, other.Header.Get("ETag"), "each file has its own ETag")

	head := serve(t, http.MethodHead, "/ui/", nil)
	body, err := io.ReadAll(head.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, head.StatusCode)
	require.Empty(t, body)
	require.Equal(t, "text/html; charset=utf-8", head.Header.Get("Content-Type"))
}

// TestPageLoadsOnlyOwnFiles: under default-src 'self' anything the page
// pulls from elsewhere, or inline, would be blocked, so index.html must
// reference only files the handler serves and hold no inline script or
// style.
func TestPageLoadsOnlyOwnFiles(t *testing.T) {
	t.Parallel()
	res := serve(t, http.MethodGet, "/ui/", nil)
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	page := string(body)
	require.NotRegexp(t, `<script>|<script [^>]*>[^<]`, page, "inline script")
	require.NotContains(t, page, "<style")
	require.NotContains(t, page, " style=")
	refs := regexp.MustCompile(`(?:src|href)="([^"#]+)"`).FindAllStringSubmatch(page, -1)
	require.NotEmpty(t, refs)
	for _, m := range refs {
		ref := m[1]
		require.False(t, strings.Contains(ref, "//"), "external reference %q", ref)
		got := serve(t, http.MethodGet, ui.Prefix+ref, nil)
		require.Equal(t, http.StatusOK, got.StatusCode, "index.html references %q", ref)
	}
}

// TestSourceBuildsNoMarkupFromStrings guards the escaping rule: the
// console's source (web/src, compiled into app.js) never assigns HTML
// strings, so API data can only become text. (The bundle holds Preact,
// whose renderer mentions innerHTML for a prop this source never uses.)
func TestSourceBuildsNoMarkupFromStrings(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "..", "web", "src", "*", "*.ts*"))
	require.NoError(t, err)
	top, err := filepath.Glob(filepath.Join("..", "..", "web", "src", "*.ts*"))
	require.NoError(t, err)
	files = append(files, top...)
	require.NotEmpty(t, files)
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, banned := range []string{"dangerouslySetInnerHTML", "innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
			require.NotContains(t, string(src), banned, f)
		}
	}
}
