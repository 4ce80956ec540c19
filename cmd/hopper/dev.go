package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/superseder"
	"github.com/hopper-ci/hopper/internal/worker"
)

func init() { extraCommands = append(extraCommands, devCommand) }

func devCommand() *cobra.Command {
	var (
		cfg         server.Config
		logLevel    string
		taskQueueID string
		capacity    int
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a queue and a worker on the embedded SQLite store, for trying hopper out",
		Long: `Run everything on one machine with no setup: the queue on SQLite in
--data-dir, and a worker serving --task-queue-id. Root credentials are
generated once and kept in the data directory; the export lines to use them
are printed at start. Ctrl-C stops everything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token, err := devRootToken(cfg.DataDir)
			if err != nil {
				return err
			}
			cfg.RootAccessToken = token
			cfg.SecretKey = env("HOPPER_SECRET_KEY", "")
			cfg.Logger = newLogger(logLevel)
			cfg.Version = version
			ctx, cancel := signalContext()
			defer cancel()
			return runDev(ctx, cmd, cfg, taskQueueID, capacity)
		},
	}
	addServerFlags(cmd, &cfg, &logLevel)
	cmd.Flags().Lookup("log-level").DefValue = "warn"
	_ = cmd.Flags().Set("log-level", env("HOPPER_LOG_LEVEL", "warn"))
	cmd.Flags().StringVar(&taskQueueID, "task-queue-id", "hopper/default", "task queue the built-in worker serves")
	cmd.Flags().IntVar(&capacity, "capacity", 2, "concurrent tasks of the built-in worker")
	return cmd
}

// devRootToken returns the root access token kept in the data directory,
// generating it on first use.
func devRootToken(dataDir string) (string, error) {
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

func runDev(ctx context.Context, cmd *cobra.Command, cfg server.Config, taskQueueID string, capacity int) error {
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
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "hopper dev is running (data in %s)\n\n", cfg.DataDir)
	fmt.Fprintf(out, "  queue API:  %s/api/queue/v1\n", rootURL)
	fmt.Fprintf(out, "  web UI:     %s/ui/\n", rootURL)
	fmt.Fprintf(out, "  worker:     %s (capacity %d)\n\n", taskQueueID, capacity)
	fmt.Fprintf(out, "export TASKCLUSTER_ROOT_URL=%s TASKCLUSTER_CLIENT_ID=%s TASKCLUSTER_ACCESS_TOKEN=%s\n\n",
		rootURL, server.RootClientID, cfg.RootAccessToken)
	fmt.Fprintf(out, "Then try:   hopper task run -- echo hello\n\nPress Ctrl-C to stop.\n")

	w, err := worker.New(worker.Config{
		RootURL:       rootURL,
		Credentials:   worker.CredentialsConfig{ClientID: server.RootClientID, AccessToken: cfg.RootAccessToken},
		TaskQueueID:   taskQueueID,
		WorkerGroup:   "dev",
		WorkerID:      "dev-worker",
		Capacity:      capacity,
		WorkDir:       filepath.Join(cfg.DataDir, "worker"),
		ClaimInterval: worker.Duration{Duration: 500 * time.Millisecond},
	}, cfg.Logger)
	if err != nil {
		return fmt.Errorf("starting the worker: %w", err)
	}
	w.SupersedeFunc = superseder.NewSupersedeFunc(superseder.WorkerOptions{Logger: cfg.Logger})
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
	// Running tasks are resolved worker-shutdown (and so retried) before
	// the queue goes away.
	w.Shutdown(true)
	<-workerDone
	stopServer()
	return <-serverErr
}
