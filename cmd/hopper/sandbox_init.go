package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/hopper-ci/hopper/internal/worker/sandbox"
)

// sandboxInitCommand is the worker's sandbox init: the worker re-executes
// its own binary with this subcommand as PID 1 of each task command's PID
// namespace. It is not meant to be run by hand.
func sandboxInitCommand() *cobra.Command {
	return &cobra.Command{
		Use:                sandbox.InitArg,
		Short:              "Internal: the init of a task command's sandbox (started by the worker)",
		Hidden:             true,
		DisableFlagParsing: true,
		Run: func(*cobra.Command, []string) {
			os.Exit(sandbox.InitMain())
		},
	}
}
