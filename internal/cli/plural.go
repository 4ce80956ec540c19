package cli

import (
	"strconv"

	"github.com/spf13/cobra"
)

// count says "1 task", "2 tasks", "0 tasks": n with its noun, in the
// plural (the noun and "s", or plural[0] when given) unless n is one.
func count(n int, noun string, plural ...string) string {
	if n != 1 {
		noun += "s"
		if len(plural) > 0 {
			noun = plural[0]
		}
	}
	return strconv.Itoa(n) + " " + noun
}

// exactArgs and atMostArgs replace cobra's ExactArgs and MaximumNArgs,
// whose messages read "accepts 1 arg(s), received 0": a usage error (exit
// 64) that counts in words and points at the command's help.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, got []string) error {
		if len(got) != n {
			return usagef("%s takes %s, got %d (see %s --help)", cmd.CommandPath(), count(n, "argument"), len(got), cmd.CommandPath())
		}
		return nil
	}
}

func atMostArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, got []string) error {
		if len(got) > n {
			return usagef("%s takes at most %s, got %d (see %s --help)", cmd.CommandPath(), count(n, "argument"), len(got), cmd.CommandPath())
		}
		return nil
	}
}
