package main

import (
	"github.com/spf13/cobra"

	"github.com/hopper-ci/hopper/internal/cli"
)

// taskCommand is `hopper task`, the queue's command-line client; its
// logic and flags live in internal/cli so they are tested there.
func taskCommand() *cobra.Command { return cli.NewTaskCommand(cli.StdEnv()) }
