package tasklog_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/worker/tasklog"
)

// TestServeLiveResumes: a reader that lost its stream asks for the rest
// with Range: bytes=N- and gets exactly the bytes from N on (206), while
// the log grows and once it is closed (then with its length); a range
// past the end of a closed log is 416; any other Range gets the whole
// log.
func TestServeLiveResumes(t *testing.T) {
	t.Parallel()
	l := setup(t)
	_, err := io.WriteString(l, "0123456789")
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { tasklog.ServeLive(l, w, r) }))
	defer srv.Close()
	get := func(rng string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res, string(body)
	}

	// While the log grows: the 206 starts at once, the rest follows.
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	req.Header.Set("Range", "bytes=4-")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusPartialContent, res.StatusCode)
	require.Empty(t, res.Header.Get("Content-Range"), "the length of a growing log is not known")
	_, err = io.WriteString(l, "abc")
	require.NoError(t, err)
	l.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, "456789abc", string(body))

	tests := []struct {
		rng, body, contentRange string
		status                  int
	}{
		{"", "0123456789abc", "", http.StatusOK},
		{"bytes=0-", "0123456789abc", "bytes 0-12/13", http.StatusPartialContent},
		{"bytes=10-", "abc", "bytes 10-12/13", http.StatusPartialContent},
		{"bytes=13-", "", "", http.StatusPartialContent},
		{"bytes=14-", "", "bytes */13", http.StatusRequestedRangeNotSatisfiable},
		{"bytes=2-5", "0123456789abc", "", http.StatusOK},
		{"lines=2-", "0123456789abc", "", http.StatusOK},
	}
	for _, tc := range tests {
		res, body := get(tc.rng)
		require.Equal(t, tc.status, res.StatusCode, tc.rng)
		require.Equal(t, tc.body, body, tc.rng)
		require.Equal(t, tc.contentRange, res.Header.Get("Content-Range"), tc.rng)
	}
}
