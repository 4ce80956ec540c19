package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

const testRootToken = "server-test-root-token-0123456789abcdef"

// running is a server.Run in a goroutine.
type running struct {
	rootURL string
	client  *tcclient.Client
	cancel  context.CancelFunc
	done    chan error
}

// start runs a queue server on a loopback port until the test ends.
func start(t *testing.T, cfg server.Config) *running {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.RootAccessToken = testRootToken
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ready := make(chan string, 1)
	cfg.Ready = func(rootURL string) { ready <- rootURL }
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- server.Run(ctx, cfg) }()
	select {
	case r.rootURL = <-ready:
	case err := <-r.done:
		cancel()
		t.Fatalf("server.Run ended before serving: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("server.Run did not start within 30s")
	}
	t.Cleanup(func() { r.stop(t) })
	r.client = &tcclient.Client{RootURL: r.rootURL, Credentials: &tcclient.Credentials{ClientID: server.RootClientID, AccessToken: testRootToken}}
	return r
}

// stop cancels Run and requires it to drain and return nil; safe twice.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			require.NoError(t, err, "server.Run after cancellation")
			close(r.done)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("server.Run did not return within 30s of cancellation")
	}
}

func newTask(queueID string) *tcclient.TaskDefinition {
	now := time.Now()
	return &tcclient.TaskDefinition{
		TaskQueueID: queueID, Created: tcclient.NewTime(now), Deadline: tcclient.NewTime(now.Add(time.Hour)),
		Payload:  json.RawMessage(`{}`),
		Metadata: tcclient.TaskMetadata{Name: "server test", Description: "d", Owner: "server@example.com", Source: "https://example.com/server"},
	}
}

// TestRunServesTheServices: one Run answers the queue, auth and
// superseder APIs and the UI under its root URL.
func TestRunServesTheServices(t *testing.T) {
	t.Parallel()
	r := start(t, server.Config{})
	tests := []struct {
		path string
		want int
	}{
		{"/api/queue/v1/ping", http.StatusOK},
		{"/api/auth/v1/ping", http.StatusOK},
		{"/api/superseder/v1/ping", http.StatusOK},
		{"/api/queue/v1/__heartbeat__", http.StatusOK},
		{"/ui/", http.StatusOK},
		{"/api/queue/v1/no-such-method", http.StatusNotFound},
	}
	for _, tt := range tests {
		res, err := http.Get(r.rootURL + tt.path)
		require.NoError(t, err, tt.path)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		require.Equal(t, tt.want, res.StatusCode, tt.path)
	}
	scopes, err := r.client.CurrentScopes(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"*"}, scopes, "the root client from RootAccessToken")
}

// TestRunExpiresClaims: the maintenance duties run inside Run: a claim
// that is not reclaimed expires and the task is retried.
func TestRunExpiresClaims(t *testing.T) {
	t.Parallel()
	r := start(t, server.Config{ClaimTimeout: time.Second})
	ctx := context.Background()
	const queueID = "server-test/expiry"
	taskID := tcclient.NewTaskID()
	_, err := r.client.CreateTask(ctx, taskID, newTask(queueID))
	require.NoError(t, err)
	claims, err := r.client.ClaimWork(ctx, queueID, &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w", Tasks: 1})
	require.NoError(t, err)
	require.Len(t, claims.Tasks, 1)
	require.Eventually(t, func() bool {
		st, err := r.client.Status(ctx, taskID)
		return err == nil && len(st.Runs) == 2 && st.Runs[0].ReasonResolved == "claim-expired" && st.Runs[1].State == tcclient.StatePending
	}, 20*time.Second, 50*time.Millisecond)
}

// TestRunKeepsItsSecretKey: the generated key is kept in the data dir,
// so tokens sealed by one run are read by the next.
func TestRunKeepsItsSecretKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := start(t, server.Config{DataDir: dir})
	ctx := context.Background()
	created, err := r.client.CreateClient(ctx, "server-test/kept", &tcclient.ClientRequest{
		Description: "kept across restarts", Expires: tcclient.NewTime(time.Now().Add(time.Hour)), Scopes: []string{"queue:ping"},
	})
	require.NoError(t, err)
	key, err := os.ReadFile(filepath.Join(dir, "secret.key"))
	require.NoError(t, err)
	r.stop(t)

	again := start(t, server.Config{DataDir: dir})
	same, err := os.ReadFile(filepath.Join(dir, "secret.key"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(key, same), "the key was regenerated")
	c := &tcclient.Client{RootURL: again.rootURL, Credentials: &tcclient.Credentials{ClientID: "server-test/kept", AccessToken: created.AccessToken}}
	scopes, err := c.CurrentScopes(ctx)
	require.NoError(t, err, "the client's token, sealed by the first run, still authenticates")
	require.Contains(t, scopes, "queue:ping")
}

// TestRunRefuses: configuration errors end Run before it serves.
func TestRunRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  server.Config
		want string
	}{
		{"unknown store", server.Config{DB: "mysql://db"}, "unknown --db"},
		{"sqlite without a path", server.Config{DB: "sqlite:"}, "needs a path"},
		{"unknown artifact storage", server.Config{Artifacts: "ftp://blobs"}, "blob storage"},
		{"unusable listen address", server.Config{Listen: "256.0.0.1:1"}, "listening on"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tt.cfg
			cfg.DataDir = t.TempDir()
			if cfg.Listen == "" {
				cfg.Listen = "127.0.0.1:0"
			}
			cfg.RootAccessToken = testRootToken
			cfg.Logger = slog.New(slog.DiscardHandler)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := server.Run(ctx, cfg)
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}
