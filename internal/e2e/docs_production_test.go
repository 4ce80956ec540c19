package e2e_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// envFile reads an environment file as docker --env-file does (and, for
// unquoted values, systemd's EnvironmentFile): blank lines and lines
// starting with # are skipped; the value is everything after the first
// "=", a trailing "# comment" included.
func envFile(t *testing.T, text string) []string {
	t.Helper()
	var env []string
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		name, value, ok := strings.Cut(strings.TrimLeft(line, " \t"), "=")
		require.True(t, ok, "an environment file line without '=': %q", line)
		env = append(env, name+"="+strings.TrimRight(value, " \t"))
	}
	return env
}

// TestProductionEnvFile starts `hopper serve` with nothing but the
// production guide's environment file, read as systemd and docker read
// it, its placeholders filled in: the server starts, listens where the
// file says, on the database it names (a fresh PostgreSQL database when
// HOPPER_TEST_POSTGRES is set, else the file's line is swapped for SQLite).
func TestProductionEnvFile(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	addr := e2e.FreePort(t)
	db := "sqlite:" + filepath.Join(t.TempDir(), "hopper.db")
	if os.Getenv("HOPPER_TEST_POSTGRES") != "" {
		db = e2e.FreshPostgres(t)
	}
	text := e2e.DocExample(t, "production-env-file").Replace(t,
		"HOPPER_ROOT_ACCESS_TOKEN=…", "HOPPER_ROOT_ACCESS_TOKEN="+e2e.RootAccessToken,
		"HOPPER_SECRET_KEY=…", "HOPPER_SECRET_KEY=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
		"127.0.0.1:8080", addr,
		"postgres://hopper@db.example.com/hopper", db)
	env := append(envFile(t, text), "PATH="+os.Getenv("PATH"), "HOME="+t.TempDir())
	cmd := exec.Command(e2e.Binary(t), "serve", "--data-dir", t.TempDir())
	cmd.Env = env
	logs := &e2e.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("hopper serve logs:\n%s", logs.String())
		}
	})
	err := testclock.Poll(context.Background(), 2*time.Minute, func() bool {
		select {
		case <-done:
			t.Fatalf("hopper serve exited with the guide's environment file:\n%s", logs.String())
		default:
		}
		resp, err := http.Get("http://" + addr + "/api/queue/v1/ping")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	require.NoError(t, err)
}
