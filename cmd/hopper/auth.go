package main

import "github.com/hopper-ci/hopper/internal/cli"

func init() {
	extraCommands = append(extraCommands, cli.NewClientCommand, cli.NewRoleCommand)
}
