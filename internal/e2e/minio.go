package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7/pkg/signer"

	"github.com/hopper-ci/hopper/internal/testclock"
)

// MinIO is a MinIO server a test started as a child process, with the
// well-known root credentials, on loopback.
type MinIO struct {
	// URL is its S3 (and STS) endpoint, http://127.0.0.1:<port>.
	URL                  string
	AccessKey, SecretKey string
	logs                 *SyncBuffer
}

// MinIOBinary is the minio server `.ci/minio.sh` builds
// ($HOPPER_CACHE/bin/minio, by default under ~/.cache/hopper), or "" when
// it is not there.
func MinIOBinary() string {
	cache := os.Getenv("HOPPER_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		cache = filepath.Join(home, ".cache", "hopper")
	}
	bin := filepath.Join(cache, "bin", "minio")
	if _, err := os.Stat(bin); err != nil {
		return ""
	}
	return bin
}

// StartMinIO runs a MinIO server of its own for the test, with env added
// to its environment (MINIO_IDENTITY_OPENID_* to trust an issuer, which
// must answer before MinIO starts: MinIO turns a provider it cannot reach
// off without a word). It skips the test, saying so, when `.ci/minio.sh`
// has not built MinIO.
func StartMinIO(t testing.TB, env ...string) *MinIO {
	t.Helper()
	bin := MinIOBinary()
	if bin == "" {
		t.Skip("MinIO is not built: run .ci/minio.sh (it builds ~/.cache/hopper/bin/minio)")
	}
	addr, console := FreePort(t), FreePort(t)
	m := &MinIO{URL: "http://" + addr, AccessKey: "minioadmin", SecretKey: "minioadmin", logs: &SyncBuffer{}}
	cmd := exec.Command(bin, "server", t.TempDir(), "--address", addr, "--console-address", console, "--quiet")
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+m.AccessKey, "MINIO_ROOT_PASSWORD="+m.SecretKey, "MINIO_BROWSER=off")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = m.logs, m.logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting minio: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("minio logs:\n%s", m.logs.String())
		}
	})
	err := testclock.Poll(context.Background(), 2*time.Minute, func() bool {
		select {
		case <-done:
			t.Fatalf("minio exited early:\n%s", m.logs.String())
		default:
		}
		resp, err := http.Get(m.URL + "/minio/health/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if err != nil {
		t.Fatalf("minio does not answer: %v\n%s", err, m.logs.String())
	}
	return m
}

// Logs returns what MinIO wrote so far.
func (m *MinIO) Logs() string { return m.logs.String() }

// AddPolicy creates (or replaces) a named policy through MinIO's admin
// API, as `mc admin policy create` does.
func (m *MinIO) AddPolicy(ctx context.Context, name, policy string) error {
	// MinIO answers 503 until its IAM subsystem is initialized, a moment
	// after it reports ready.
	var err error
	if pollErr := testclock.Poll(ctx, time.Minute, func() bool {
		err = m.addPolicy(ctx, name, policy)
		return err == nil || !strings.Contains(err.Error(), "XMinioServerNotInitialized")
	}); pollErr != nil {
		return fmt.Errorf("%w (%w)", err, pollErr)
	}
	return err
}

func (m *MinIO) addPolicy(ctx context.Context, name, policy string) error {
	u := m.URL + "/minio/admin/v3/add-canned-policy?name=" + url.QueryEscape(name)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, bytes.NewReader([]byte(policy)))
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(policy))
	req.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	req = signer.SignV4(*req, m.AccessKey, m.SecretKey, "", "us-east-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("adding MinIO policy %s: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("adding MinIO policy %s: %s: %s", name, resp.Status, body)
	}
	return nil
}
