// Package devmode runs `hopper dev`: a queue on the embedded store and a
// worker beside it, in one process, with root credentials kept in the data
// directory.
package devmode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/worker"
)

// Options configure Run.
type Options struct {
	// Server is the queue's configuration; RootAccessToken is filled in.
	Server server.Config
	// TaskQueueID is the queue the built-in worker serves.
	TaskQueueID string
	// Capacity is the worker's number of concurrent tasks.
	Capacity int
	// Out receives the banner.
	Out io.Writer
	// SandboxInit starts the worker's sandbox init (worker.Config).
	SandboxInit []string
	// Command is how the banner tells the reader to run hopper's CLI
	// ("hopper" when it is on the PATH, "./hopper", a path…); default
	// "hopper".
	Command string
}

// RootToken returns the root access token: HOPPER_ROOT_ACCESS_TOKEN if set,
// else the one kept in dataDir, generated on first use.
func RootToken(dataDir string) (string, error) {
	if v := os.Getenv("HOPPER_ROOT_ACCESS_TOKEN"); v != "" {
		return v, nil
	}
	path := filepath.Join(dataDir, "root-access-token")
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("creating %s: %w", dataDir, err)
	}
	token, err := auth.NewAccessToken()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return token, nil
}

// Run serves the queue and runs the worker until ctx ends; then running
// tasks are resolved worker-shutdown (so the queue retries them) before
// the queue stops.
func Run(ctx context.Context, opts Options) error {
	cfg := opts.Server
	if cfg.RootAccessToken == "" {
		token, err := RootToken(cfg.DataDir)
		if err != nil {
			return err
		}
		cfg.RootAccessToken = token
	}
	ready := make(chan string, 1)
	cfg.Ready = func(rootURL string) { ready <- rootURL }
	serverCtx, stopServer := context.WithCancel(context.Background())
	defer stopServer()
	serverErr := make(chan error, 1)
	go func() { serverErr <- server.Run(serverCtx, cfg) }()

	var rootURL string
	select {
	case rootURL = <-ready:
	case err := <-serverErr:
		return err
	case <-ctx.Done():
		return nil
	}
	workDir, err := workerDir(cfg.DataDir)
	if err != nil {
		stopServer()
		<-serverErr
		return err
	}
	out := opts.Out
	fmt.Fprintf(out, "hopper dev is running (data in %s)\n\n", cfg.DataDir)
	fmt.Fprintf(out, "  queue API:  %s/api/queue/v1\n", rootURL)
	fmt.Fprintf(out, "  web UI:     %s/ui/\n", rootURL)
	fmt.Fprintf(out, "  worker:     %s (capacity %d, work dir %s)\n\n", opts.TaskQueueID, opts.Capacity, workDir)
	fmt.Fprintf(out, "export TASKCLUSTER_ROOT_URL=%s TASKCLUSTER_CLIENT_ID=%s TASKCLUSTER_ACCESS_TOKEN=%s\n\n",
		rootURL, server.RootClientID, cfg.RootAccessToken)
	command := opts.Command
	if command == "" {
		command = "hopper"
	}
	fmt.Fprintf(out, "Then try:   %s task run -- echo hello\n\nPress Ctrl-C to stop.\n", command)

	w, err := worker.New(worker.Config{
		RootURL:     rootURL,
		Credentials: worker.CredentialsConfig{ClientID: server.RootClientID, AccessToken: cfg.RootAccessToken},
		TaskQueueID: opts.TaskQueueID,
		WorkerGroup: "dev",
		WorkerID:    "dev-worker",
		Capacity:    opts.Capacity,
		WorkDir:     workDir,
		// A snappy first run matters more here than polling politely.
		ClaimInterval: worker.Duration{Duration: 500 * time.Millisecond},
		SandboxInit:   opts.SandboxInit,
	}, cfg.Logger)
	if err != nil {
		return fmt.Errorf("starting the worker: %w", err)
	}
	workerDone := make(chan error, 1)
	go func() {
		_, err := w.Run(context.Background())
		workerDone <- err
	}()
	select {
	case <-ctx.Done():
	case err := <-serverErr:
		w.Shutdown(true)
		<-workerDone
		return err
	case err := <-workerDone:
		if err != nil {
			return fmt.Errorf("worker stopped: %w", err)
		}
	}
	fmt.Fprintln(out, "\nstopping…")
	w.Shutdown(true)
	<-workerDone
	stopServer()
	return <-serverErr
}
