package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/hawk"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestCredentialsAreCheckedBeforeALargeBody: a call with wrong credentials
// and a large body (here one that never ends) is answered 401 without its
// body being read; a call with good credentials and a signed payload hash
// still has the hash checked against the body.
func TestCredentialsAreCheckedBeforeALargeBody(t *testing.T) {
	t.Parallel()
	r := start(t, server.Config{})
	url := r.rootURL + "/api/queue/v1/task/" + tcclient.NewTaskID()

	send := func(method, url string, creds hawk.Credentials, body io.Reader, hash string) (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, url, body)
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		h, err := hawk.RequestHeader(creds, method, url, time.Now(), "", hash, "")
		require.NoError(t, err)
		req.Header.Set("Authorization", h)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err, "the server waited for the whole body before checking the credentials")
		defer res.Body.Close()
		reply, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(reply)
	}

	// A body of unknown length that never ends.
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	go func() { _, _ = pw.Write([]byte(`{"payload":"` + strings.Repeat("x", 1<<20))) }()
	status, reply := send(http.MethodPut, url, hawk.Credentials{ID: server.RootClientID, Key: "not-the-root-token-0123456789"}, pr, "")
	require.Equal(t, http.StatusUnauthorized, status, reply)
	require.Contains(t, reply, `"code":"AuthenticationFailed"`)

	// Good credentials whose signed payload hash does not match the
	// (large) body: refused once the body is read (by createArtifact,
	// whose URL may be that long).
	big := `{"storageType":"reference","expires":"2030-01-01T00:00:00Z","contentType":"text/plain","url":"https://example.com/` + strings.Repeat("y", 200<<10) + `"}`
	wrongHash := hawk.PayloadHash("application/json", []byte(`{"storageType":"reference"}`))
	status, reply = send(http.MethodPost, r.rootURL+"/api/queue/v1/task/"+tcclient.NewTaskID()+"/runs/0/artifacts/public/x", hawk.Credentials{ID: server.RootClientID, Key: testRootToken}, strings.NewReader(big), wrongHash)
	require.Equal(t, http.StatusUnauthorized, status, reply[:min(len(reply), 300)])
	require.True(t, strings.Contains(reply, "Invalid payload hash"), "the payload hash was checked against the body")
}
