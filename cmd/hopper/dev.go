package main

import (
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
			cfg.SecretKey = env("HOPPER_SECRET_KEY", "")
			cfg.Logger = newLogger(logLevel)
			cfg.Version = build().Short()
			ctx, cancel := signalContext()
			defer cancel()
			return devmode.Run(ctx, devmode.Options{Server: cfg, TaskQueueID: taskQueueID, Capacity: capacity, Out: cmd.OutOrStdout(),
				SandboxInit: sandbox.SelfInit()})
		},
	}
	addServerFlags(cmd, &cfg, &logLevel)
	cmd.Flags().Lookup("log-level").DefValue = "warn"
	_ = cmd.Flags().Set("log-level", env("HOPPER_LOG_LEVEL", "warn"))
	cmd.Flags().StringVar(&taskQueueID, "task-queue-id", cli.DefaultTaskQueue, "task queue the built-in worker serves")
	cmd.Flags().IntVar(&capacity, "capacity", 2, "concurrent tasks of the built-in worker")
	return cmd
}
