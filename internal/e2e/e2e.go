// Package e2e starts real hopper processes for end-to-end tests: it builds
// the binary once per test binary and runs `hopper serve` (and workers) as
// child processes on loopback ports.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hopper-ci/hopper/internal/testclock"
)

var (
	buildOnce sync.Once
	buildMu   sync.Mutex
	buildDir  string
	buildPath string
	buildErr  error
)

// Main runs a package's tests (call it from TestMain) and then removes the
// binary Binary built, so `go test` leaves nothing in the temporary
// directory; it exits with the tests' code.
func Main(m *testing.M) {
	code := m.Run()
	buildMu.Lock()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	buildMu.Unlock()
	os.Exit(code)
}

// RepoRoot returns the repository root (where go.mod is).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Binary builds ./cmd/hopper once and returns its path; a package whose
// tests call it removes it with Main.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hopper-e2e-bin")
		if err != nil {
			buildErr = err
			return
		}
		buildMu.Lock()
		buildDir = dir
		buildMu.Unlock()
		buildPath = filepath.Join(dir, "hopper")
		cmd := exec.Command("go", "build", "-o", buildPath, "./cmd/hopper")
		cmd.Dir = RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building hopper: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// FreePort returns a free loopback address.
func FreePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// RootAccessToken is the root client's token in e2e servers.
const RootAccessToken = "e2e-root-access-token-0123456789abcdefghij"

// Server is a running `hopper serve`.
type Server struct {
	RootURL  string
	DataDir  string
	ClientID string
	Token    string
	cmd      *exec.Cmd
	logs     *SyncBuffer
	done     chan struct{}
}

// ServerOptions tune StartServer.
type ServerOptions struct {
	// Args are extra flags, e.g. --claim-timeout=3s.
	Args []string
	// Env are extra KEY=VALUE pairs.
	Env []string
	// DataDir reuses a directory (a second replica, a restart).
	DataDir string
	// Binary runs another hopper binary (an earlier release) instead of
	// this tree's.
	Binary string
	// Listen is the address to serve on (FreePort), when the test must
	// know the root URL before the server starts (a provider's redirect
	// URI); empty picks one.
	Listen string
}

// StartServer runs `hopper serve` and waits until it answers ping.
func StartServer(t testing.TB, opts ServerOptions) *Server {
	t.Helper()
	bin := opts.Binary
	if bin == "" {
		bin = Binary(t)
	}
	dataDir := opts.DataDir
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	addr := opts.Listen
	if addr == "" {
		addr = FreePort(t)
	}
	args := append([]string{"serve", "--listen", addr, "--data-dir", dataDir, "--log-level", "debug"}, opts.Args...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HOPPER_ROOT_ACCESS_TOKEN="+RootAccessToken)
	cmd.Env = append(cmd.Env, opts.Env...)
	logs := &SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting hopper serve: %v", err)
	}
	s := &Server{RootURL: "http://" + addr, DataDir: dataDir, ClientID: "static/taskcluster/root", Token: RootAccessToken,
		cmd: cmd, logs: logs, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("hopper serve logs:\n%s", s.Logs())
		}
	})
	err := testclock.Poll(context.Background(), 2*time.Minute, func() bool {
		select {
		case <-s.done:
			t.Fatalf("hopper serve exited early:\n%s", s.Logs())
		default:
		}
		resp, err := http.Get(s.RootURL + "/api/queue/v1/ping")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if err != nil {
		t.Fatalf("hopper serve does not answer: %v\n%s", err, s.Logs())
	}
	return s
}

// Logs returns what the server wrote so far.
func (s *Server) Logs() string { return s.logs.String() }

// Signal sends a signal to the server process.
func (s *Server) Signal(sig os.Signal) error { return s.cmd.Process.Signal(sig) }

// Done is closed when the process has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

// Stop terminates the server (SIGTERM, then SIGKILL after 10 s).
func (s *Server) Stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Env returns the TASKCLUSTER_* variables for the root client.
func (s *Server) Env() []string {
	return []string{"TASKCLUSTER_ROOT_URL=" + s.RootURL, "TASKCLUSTER_CLIENT_ID=" + s.ClientID, "TASKCLUSTER_ACCESS_TOKEN=" + s.Token}
}

// NodeDir is the directory of the Node scripts that use taskcluster-client.
func NodeDir() string { return filepath.Join(RepoRoot(), "e2e", "node") }

// RequireNode skips the test unless node and the installed npm packages are
// available (CI installs them with `npm ci` in e2e/node).
func RequireNode(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not installed: cannot run the official taskcluster-client")
	}
	if _, err := os.Stat(filepath.Join(NodeDir(), "node_modules", "taskcluster-client")); err != nil {
		t.Skip("taskcluster-client not installed: run `npm ci --prefix e2e/node`")
	}
}

// RunNode runs a Node script from e2e/node with env; it fails the test with
// the script's output if it exits non-zero.
func RunNode(ctx context.Context, t testing.TB, script string, env ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = NodeDir()
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s failed: %v\n%s", script, err, out)
	}
	return string(out)
}

// SyncBuffer is a goroutine-safe buffer: a server, command or worker
// writes its log or output from its goroutines while a test reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Reset forgets what was written so far.
func (b *SyncBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

// Lines returns the log lines containing substr.
func (b *SyncBuffer) Lines(substr string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	for sc.Scan() {
		if strings.Contains(sc.Text(), substr) {
			out = append(out, sc.Text())
		}
	}
	return out
}
