package artifacts

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestS3RelayTakesChunkedObjectUploads: object data PUT the way
// Taskcluster's Go client sends it (chunked, no Content-Length) reaches the
// bucket through the relay, exactly the declared length and nothing else.
// A presigned URL would get 411 from S3 for the same request.
func TestS3RelayTakesChunkedObjectUploads(t *testing.T) {
	t.Parallel()
	spec := s3TestSpec(t)
	b, err := NewS3(t.Context(), spec, S3Options{RelaySigningKey: []byte("relay-test-key-0123456789abcdef!")})
	require.NoError(t, err)
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	b.relayBase = srv.URL // known only once the server listens

	ctx := t.Context()
	exp := time.Now().Add(time.Hour)
	put := func(rawURL, contentType string, body io.Reader) int {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, rawURL, body)
		require.NoError(t, err)
		req.Header.Set("Content-Type", contentType)
		return do(t, req).status
	}
	chunked := func(s string) io.Reader { return io.MultiReader(strings.NewReader(s)) }
	tests := []struct {
		name     string
		length   int64
		urlType  string // content type signed into the URL
		sentType string
		body     io.Reader
		tamper   func(string) string
		want     int
	}{
		{name: "chunked, declared length", length: 10, body: chunked("0123456789"), want: http.StatusOK},
		{name: "with Content-Length", length: 4, body: bytes.NewReader([]byte("abcd")), want: http.StatusOK},
		{name: "empty", length: 0, body: chunked(""), want: http.StatusOK},
		{name: "shorter than declared", length: 10, body: chunked("012345"), want: http.StatusBadRequest},
		{name: "longer than declared", length: 3, body: chunked("0123456789"), want: http.StatusBadRequest},
		{name: "Content-Length differs", length: 3, body: bytes.NewReader([]byte("0123")), want: http.StatusBadRequest},
		{name: "other content type", length: 1, sentType: "text/html", body: chunked("x"), want: http.StatusBadRequest},
		{name: "length changed in URL", length: 1, body: chunked("xy"), want: http.StatusForbidden,
			tamper: func(u string) string { return strings.Replace(u, "length=1", "length=2", 1) }},
		{name: "signature of another key", length: 1, body: chunked("x"), want: http.StatusForbidden,
			tamper: func(u string) string { return strings.Replace(u, "signature=", "signature=A", 1) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key := ObjectKeyPrefix + newKey(t, "public/relay.bin")
			ct := "application/octet-stream"
			u, err := b.PutURLWithLength(ctx, key, ct, tc.length, exp)
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(u, srv.URL+RelayMountPath), "object uploads go through the relay: %s", u)
			if tc.tamper != nil {
				u = tc.tamper(u)
			}
			sent := ct
			if tc.sentType != "" {
				sent = tc.sentType
			}
			require.Equal(t, tc.want, put(u, sent, tc.body))
			info, err := b.Stat(ctx, key)
			if tc.want != http.StatusOK {
				require.ErrorIs(t, err, ErrNotFound, "a refused upload leaves nothing behind")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.length, info.Size)
			require.Equal(t, ct, info.ContentType)
		})
	}
}

// TestS3RelayScope: artifact keys keep presigned URLs, a backend without a
// relay key presigns everything, and the relay refuses what it did not sign.
func TestS3RelayScope(t *testing.T) {
	t.Parallel()
	spec := s3TestSpec(t)
	withRelay, err := NewS3(t.Context(), spec, S3Options{RelayBaseURL: "http://127.0.0.1:1/", RelaySigningKey: []byte("k")})
	require.NoError(t, err)
	noRelay, err := NewS3(t.Context(), spec, S3Options{})
	require.NoError(t, err)
	exp := time.Now().Add(time.Hour)

	u, err := withRelay.PutURLWithLength(t.Context(), newKey(t, "public/a.txt"), "text/plain", 1, exp)
	require.NoError(t, err)
	require.NotContains(t, u, RelayMountPath, "artifact data is uploaded straight to the bucket")

	u, err = noRelay.PutURLWithLength(t.Context(), ObjectKeyPrefix+newKey(t, "public/a.txt"), "text/plain", 1, exp)
	require.NoError(t, err)
	require.NotContains(t, u, RelayMountPath)

	rec := httptest.NewRecorder()
	noRelay.ServeHTTP(rec, httptest.NewRequest(http.MethodPut, RelayMountPath+"x/y", strings.NewReader("x")))
	require.Equal(t, http.StatusNotFound, rec.Code)
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		rec = httptest.NewRecorder()
		withRelay.ServeHTTP(rec, httptest.NewRequest(method, RelayMountPath+"x/y", nil))
		require.Equal(t, http.StatusMethodNotAllowed, rec.Code, method)
	}
}
