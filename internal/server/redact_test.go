package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// lockedBuffer is a log sink the server's goroutines write to while the
// test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestDebugLogNeverHoldsTokens: with the debug access log on, no line
// holds a hook's trigger token, a bewit, a blob URL's signature or a
// webhook's signature header, whether the request matched its route or
// not (a browser's GET of the trigger URL, a trailing or doubled slash,
// another case, a segment missing, a query string).
func TestDebugLogNeverHoldsTokens(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	r := start(t, server.Config{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ctx := context.Background()

	const group, id = "redact", "hook"
	_, err := r.client.CreateRole(ctx, "hook-id:"+group+"/*", &tcclient.RoleRequest{Description: "redact test",
		Scopes: []string{"queue:create-task:lowest:redact/q", "queue:create-task:project:none", "queue:scheduler-id:-"}})
	require.NoError(t, err)
	_, err = r.client.CreateHook(ctx, group, id, &tcclient.Hook{
		Metadata: json.RawMessage(`{"name":"redact","description":"d","owner":"o@example.com"}`),
		Task: json.RawMessage(`{"taskQueueId":"redact/q","created":{"$fromNow":"0 seconds"},"deadline":{"$fromNow":"1 hour"},
			"payload":{},"metadata":{"name":"n","description":"d","owner":"o@example.com","source":"https://example.com"}}`),
	})
	require.NoError(t, err)
	tok, err := r.client.GetTriggerToken(ctx, group, id, false)
	require.NoError(t, err)
	token := tok.Token
	require.NotEmpty(t, token)

	secrets := []string{token, url.PathEscape(token)}
	send := func(method, rawURL string, header http.Header, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, rawURL, strings.NewReader(body))
		require.NoError(t, err)
		for k, v := range header {
			req.Header[k] = v
		}
		if body != "" && req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/json")
		}
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}

	base := r.rootURL + "/api/hooks/v1/hooks/" + group + "/" + id + "/trigger/"
	triggers := []struct {
		method, url string
		want        int
	}{
		{http.MethodPost, base + token, http.StatusOK},                                              // matched
		{http.MethodGet, base + token, http.StatusNotFound},                                         // a browser's GET
		{http.MethodPost, base + token + "/", http.StatusNotFound},                                  // trailing slash
		{http.MethodPost, strings.Replace(base, "/trigger/", "//trigger//", 1) + token, 0},          // doubled slashes
		{http.MethodPost, strings.Replace(base, "/trigger/", "/TRIGGER/", 1) + token, 0},            // another case
		{http.MethodPost, r.rootURL + "/api/hooks/v1/hooks/" + group + "/trigger/" + token, 0},      // hookId missing
		{http.MethodPost, base + token + "/extra?bewit=" + url.QueryEscape(token), 0},               // and in the query
		{http.MethodGet, r.rootURL + "/api/queue/v1/ping?bewit=" + url.QueryEscape(token), 0},       // a bewit on a route
		{http.MethodGet, r.rootURL + "/no/such/path?bewit=" + url.QueryEscape(token) + "&sig=x", 0}, // and on none
		{http.MethodGet, r.rootURL + "/api/hooks/v1/hooks/" + group + "/" + id + "/trigger/" + token[:10] + "/" + token[10:], 0},
	}
	for _, tr := range triggers {
		got := send(tr.method, tr.url, nil, "{}")
		if tr.want != 0 {
			require.Equal(t, tr.want, got, "%s %s", tr.method, tr.url)
		}
	}
	secrets = append(secrets, token[10:])

	// A blob URL's signature, matched and tampered with.
	taskID := tcclient.NewTaskID()
	_, err = r.client.CreateTask(ctx, taskID, newTask("redact/blobs"))
	require.NoError(t, err)
	claims, err := r.client.ClaimWork(ctx, "redact/blobs", &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w", Tasks: 1})
	require.NoError(t, err)
	require.Len(t, claims.Tasks, 1)
	created, err := r.client.CreateArtifact(ctx, taskID, 0, "public/log.txt", &tcclient.CreateArtifactRequest{
		StorageType: "s3", Expires: tcclient.NewTime(time.Now().Add(time.Hour)), ContentType: "text/plain"})
	require.NoError(t, err)
	put, err := url.Parse(created.PutURL)
	require.NoError(t, err)
	putSig := put.Query().Get("signature")
	require.NotEmpty(t, putSig, "a put URL is signed in its query: %s", created.PutURL)
	require.Equal(t, http.StatusOK, send(http.MethodPut, created.PutURL, http.Header{"Content-Type": {"text/plain"}}, "hello"))
	redirect, err := r.client.GetArtifact(ctx, taskID, 0, "public/log.txt")
	require.NoError(t, err)
	get, err := url.Parse(redirect.URL)
	require.NoError(t, err)
	getSig := get.Query().Get("signature")
	require.NotEmpty(t, getSig)
	require.Equal(t, http.StatusOK, send(http.MethodGet, redirect.URL, nil, ""))
	tampered := strings.Replace(redirect.URL, "signature=", "signature=A", 1)
	require.Equal(t, http.StatusForbidden, send(http.MethodGet, tampered, nil, ""))
	send(http.MethodGet, strings.Replace(redirect.URL, "?", "/?", 1), nil, "")
	secrets = append(secrets, putSig, getSig)

	// A forge webhook carries its signature in a header.
	const hubSig = "sha256=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	send(http.MethodPost, r.rootURL+"/api/github/v1/github", http.Header{"X-Hub-Signature-256": {hubSig}, "X-Github-Event": {"push"}}, `{"zen":"x"}`)
	secrets = append(secrets, hubSig, strings.TrimPrefix(hubSig, "sha256="))

	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "/api/github/v1/github") },
		10*time.Second, 10*time.Millisecond, "the last request was logged")
	out := logs.String()
	require.Contains(t, out, "<redacted>")
	for _, s := range secrets {
		require.NotContains(t, out, s, "a secret reached the log:\n%s", out)
	}
	// The redaction keeps what an operator needs: which hook, which route.
	require.Contains(t, out, "path=/api/hooks/v1/hooks/redact/hook/trigger/<redacted>")
	require.Contains(t, out, "method=triggerHookWithToken")
}
