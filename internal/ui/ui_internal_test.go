package ui

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEveryEmbeddedFileHasAType: a file added to static/ without a
// deliberate content type would go out as application/octet-stream, which
// browsers refuse to run or apply under nosniff.
func TestEveryEmbeddedFileHasAType(t *testing.T) {
	t.Parallel()
	h := Handler()
	var names []string
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p[len("static/"):])
		}
		return err
	})
	require.NoError(t, err)
	require.Contains(t, names, "index.html")
	for _, name := range names {
		require.NotEqual(t, "application/octet-stream", contentType(name), name)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, Prefix+name, nil))
		require.Equal(t, http.StatusOK, rec.Code, name)
		require.Equal(t, contentType(name), rec.Header().Get("Content-Type"), name)
	}
}

func TestContentType(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"a.html": "text/html; charset=utf-8",
		"a.js":   "text/javascript; charset=utf-8",
		"a.css":  "text/css; charset=utf-8",
		"a.svg":  "image/svg+xml",
		"a.png":  "image/png",
		"a.json": "application/json",
		"a.bin":  "application/octet-stream",
		"noext":  "application/octet-stream",
	}
	for name, want := range tests {
		require.Equal(t, want, contentType(name), name)
	}
}
