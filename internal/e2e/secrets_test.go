package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// headerRecorder is a RoundTripper that remembers every Authorization
// header the clients send, so the test can look for them in the logs.
type headerRecorder struct {
	mu      sync.Mutex
	headers []string
}

func (r *headerRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if h := req.Header.Get("Authorization"); h != "" {
		r.mu.Lock()
		r.headers = append(r.headers, h)
		r.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(req)
}

func (r *headerRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.headers...)
}

// secretSet collects values that must never reach the server's logs.
type secretSet struct {
	what   []string
	values []string
}

func (s *secretSet) add(what, value string) {
	if value != "" {
		s.what = append(s.what, what)
		s.values = append(s.values, value)
	}
}

// addCredentials records a credential's token and, for temporary ones,
// the certificate's signature.
func (s *secretSet) addCredentials(t *testing.T, what string, c tcclient.Credentials) {
	t.Helper()
	s.add(what+" accessToken", c.AccessToken)
	if c.Certificate != "" {
		var cert struct {
			Signature string `json:"signature"`
		}
		require.NoError(t, json.Unmarshal([]byte(c.Certificate), &cert))
		require.NotEmpty(t, cert.Signature)
		s.add(what+" certificate signature", cert.Signature)
	}
}

// TestAuthSecretsStayOutOfLogs runs a full flow against `hopper serve
// --log-level debug` (create and reset clients, claim with temporary
// credentials, reclaim, upload, report, fetch by signed URL, and a set of
// failed authentications), then checks that the server's log holds no
// access token, certificate signature, Authorization header or bewit.
func TestAuthSecretsStayOutOfLogs(t *testing.T) {
	t.Parallel()
	srv := e2e.StartServer(t, e2e.ServerOptions{Args: []string{"--log-level", "debug"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rec := &headerRecorder{}
	httpClient := &http.Client{Transport: rec}
	client := func(creds *tcclient.Credentials) *tcclient.Client {
		return &tcclient.Client{RootURL: srv.RootURL, Credentials: creds, HTTPClient: httpClient, MaxRetries: -1}
	}
	secrets := &secretSet{}
	secrets.add("root accessToken", srv.Token)
	root := client(&tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token})

	const tq = "secrets/q"
	workerReq := &tcclient.ClientRequest{
		Expires: tcclient.NewTime(time.Now().Add(time.Hour)), Description: "secrets worker",
		Scopes: []string{"queue:claim-work:" + tq, "queue:worker-id:g/w", "queue:get-artifact:private/*"},
	}
	created, err := root.CreateClient(ctx, "secrets/worker", workerReq)
	require.NoError(t, err)
	secrets.add("created accessToken", created.AccessToken)
	retried, err := root.CreateClient(ctx, "secrets/worker", workerReq)
	require.NoError(t, err)
	require.Equal(t, created.AccessToken, retried.AccessToken)
	reset, err := root.ResetAccessToken(ctx, "secrets/worker")
	require.NoError(t, err)
	secrets.add("reset accessToken", reset.AccessToken)
	workerCreds := &tcclient.Credentials{ClientID: "secrets/worker", AccessToken: reset.AccessToken}
	worker := client(workerCreds)

	// A task, claimed, reclaimed, given an artifact and completed with the
	// claim's temporary credentials.
	taskID := tcclient.NewTaskID()
	_, err = root.CreateTask(ctx, taskID, &tcclient.TaskDefinition{
		TaskQueueID: tq, Created: tcclient.NewTime(time.Now()), Deadline: tcclient.NewTime(time.Now().Add(time.Hour)),
		Payload:  json.RawMessage(`{}`),
		Metadata: tcclient.TaskMetadata{Name: "secrets", Description: "log secrecy", Owner: "e2e@example.com", Source: "https://example.com/e2e"},
	})
	require.NoError(t, err)
	claims, err := worker.ClaimWork(ctx, tq, &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w", Tasks: 1})
	require.NoError(t, err)
	require.Len(t, claims.Tasks, 1)
	claim := claims.Tasks[0]
	secrets.addCredentials(t, "claim", claim.Credentials)
	reclaim, err := client(&claim.Credentials).ReclaimTask(ctx, taskID, 0)
	require.NoError(t, err)
	secrets.addCredentials(t, "reclaim", reclaim.Credentials)
	run := client(&reclaim.Credentials)

	data := []byte("secret artifact body")
	size := int64(len(data))
	art, err := run.CreateArtifact(ctx, taskID, 0, "private/out.txt", &tcclient.CreateArtifactRequest{
		StorageType: "s3", Expires: tcclient.NewTime(time.Now().Add(time.Hour)), ContentType: "text/plain", ContentLength: &size,
	})
	require.NoError(t, err)
	require.NotEmpty(t, art.PutURL)
	putURL, err := url.Parse(art.PutURL)
	require.NoError(t, err)
	if putURL.RawQuery != "" {
		secrets.add("putUrl query", putURL.RawQuery)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, art.PutURL, bytes.NewReader(data))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Less(t, resp.StatusCode, 300)
	_, err = run.ReportCompleted(ctx, taskID, 0)
	require.NoError(t, err)

	// Fetch through a signed URL, and through an expired one.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	signed, err := worker.SignedURL(worker.BaseURL()+"/task/"+taskID+"/artifacts/"+tcclient.EscapePathParam("private/out.txt"), 10*time.Minute)
	require.NoError(t, err)
	secrets.add("bewit", bewitOf(t, signed))
	resp, err = noRedirect.Get(signed)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	location := resp.Header.Get("Location")
	if u, err := url.Parse(location); err == nil && u.RawQuery != "" {
		secrets.add("download URL query", u.RawQuery)
	}
	resp, err = http.Get(location)
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, data, got)
	expired, err := worker.SignedURL(worker.BaseURL()+"/task/"+taskID+"/artifacts/"+tcclient.EscapePathParam("private/out.txt"), -time.Minute)
	require.NoError(t, err)
	secrets.add("expired bewit", bewitOf(t, expired))
	resp, err = http.Get(expired)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// Failed authentications of every kind.
	failures := []struct {
		name  string
		creds *tcclient.Credentials
	}{
		{"replaced token", &tcclient.Credentials{ClientID: "secrets/worker", AccessToken: created.AccessToken}},
		{"wrong root token", &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: "wrong-root-token-0123456789abcdef"}},
		{"forged certificate", &tcclient.Credentials{ClientID: reclaim.Credentials.ClientID, AccessToken: reclaim.Credentials.AccessToken,
			Certificate: strings.Replace(reclaim.Credentials.Certificate, `"signature":"`, `"signature":"AAAA`, 1)}},
		{"certificate with the permanent token", &tcclient.Credentials{ClientID: reclaim.Credentials.ClientID, AccessToken: reset.AccessToken,
			Certificate: reclaim.Credentials.Certificate}},
	}
	for _, f := range failures {
		_, err := client(f.creds).CurrentScopes(ctx)
		require.Equal(t, http.StatusUnauthorized, tcclient.StatusCode(err), "%s: %v", f.name, err)
	}
	_, err = root.DisableClient(ctx, "secrets/worker")
	require.NoError(t, err)
	_, err = worker.ClaimWork(ctx, tq, &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w", Tasks: 1})
	require.Equal(t, http.StatusUnauthorized, tcclient.StatusCode(err))

	// Stop the server so its log is complete, then search it.
	srv.Stop()
	logs := srv.Logs()
	require.Contains(t, logs, "client created", "the log has the flow's audit lines")
	require.Contains(t, logs, "client access token reset")
	for i, v := range secrets.values {
		require.NotContains(t, logs, v, "the log contains the %s", secrets.what[i])
	}
	headers := rec.all()
	require.Greater(t, len(headers), 10)
	for _, h := range headers {
		require.NotContains(t, logs, h, "the log contains an Authorization header")
		_, mac, ok := strings.Cut(h, `mac="`)
		require.True(t, ok, "%s", h)
		require.NotContains(t, logs, strings.TrimSuffix(mac, `"`), "the log contains a Hawk MAC")
		if _, ext, ok := strings.Cut(h, `ext="`); ok {
			ext, _, _ = strings.Cut(ext, `"`)
			require.NotContains(t, logs, ext, "the log contains a Hawk ext")
		}
	}
}

// bewitOf returns the bewit parameter of a signed URL.
func bewitOf(t *testing.T, signed string) string {
	t.Helper()
	u, err := url.Parse(signed)
	require.NoError(t, err)
	b := u.Query().Get("bewit")
	require.NotEmpty(t, b)
	return b
}
