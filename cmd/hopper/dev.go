package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hopper-ci/hopper/internal/cli"
	"github.com/hopper-ci/hopper/internal/devmode"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/worker/sandbox"
)

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
			if err := checkEnvComments(os.LookupEnv); err != nil {
				return err
			}
			cfg.SecretKey = env("HOPPER_SECRET_KEY", "")
			cfg.Logger = newLogger(logLevel)
			cfg.Version = build().Short()
			ctx, cancel := signalContext()
			defer cancel()
			return devmode.Run(ctx, devmode.Options{Server: cfg, TaskQueueID: taskQueueID, Capacity: capacity, Out: cmd.OutOrStdout(),
				SandboxInit: sandbox.SelfInit(), Command: cliCommand(os.Args[0], exec.LookPath, os.Executable)})
		},
	}
	addServerFlags(cmd, &cfg, &logLevel)
	cmd.Flags().Lookup("log-level").DefValue = "warn"
	_ = cmd.Flags().Set("log-level", env("HOPPER_LOG_LEVEL", "warn"))
	cmd.Flags().StringVar(&taskQueueID, "task-queue-id", cli.DefaultTaskQueue, "task queue the built-in worker serves")
	cmd.Flags().IntVar(&capacity, "capacity", 2, "concurrent tasks of the built-in worker")
	return cmd
}

// cliCommand is how to run this binary's CLI from another terminal in the
// same directory: "hopper" when that name on the PATH is this binary;
// the path as typed (./hopper, bin/hopper); for `go run`, whose binary is
// gone once it exits, the build to do first.
func cliCommand(arg0 string, lookPath func(string) (string, error), executable func() (string, error)) string {
	self, err := executable()
	if err != nil {
		return "hopper"
	}
	if onPath, err := lookPath("hopper"); err == nil && sameFile(onPath, self) {
		return "hopper"
	}
	if strings.Contains(self, string(filepath.Separator)+"go-build") {
		return "go build -o hopper ./cmd/hopper && ./hopper"
	}
	if strings.ContainsRune(arg0, filepath.Separator) {
		return arg0
	}
	return self
}

func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}
