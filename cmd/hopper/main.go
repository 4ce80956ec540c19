// Command hopper is a self-hosted task queue compatible with Taskcluster's
// Queue API, with a worker, in one binary.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hopper-ci/hopper/internal/buildinfo"
	"github.com/hopper-ci/hopper/internal/cli"
	"github.com/hopper-ci/hopper/internal/gctune"
	"github.com/hopper-ci/hopper/internal/worker/sandbox"
)

// version, when set at build time with -ldflags "-X main.version=...",
// overrides the version the build recorded (internal/buildinfo).
var version string

// build is what this binary knows of its own build.
func build() buildinfo.Info { return buildinfo.Read(version) }

func main() {
	// The collector's target follows the live heap (internal/gctune) for
	// the rest of the process, unless GOGC is set or this is a task
	// sandbox's init: that runs inside the task's memory limit, where
	// Go's default keeps it smallest.
	if _, set := os.LookupEnv("GOGC"); !set && !sandbox.IsInitInvocation() {
		gctune.Start()
	}
	if err := execute(rootCommand()); err != nil {
		// Errors that carry only an exit code (a drained worker's 71) are
		// outcomes the command already reported, not failures to print.
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(os.Stderr, "hopper:", msg)
		}
		var coded interface{ ExitCode() int }
		if ok := asExitCode(err, &coded); ok {
			os.Exit(coded.ExitCode())
		}
		os.Exit(1)
	}
}

// rootCommand is `hopper`. Usage mistakes at any level (an unknown
// command, a bad flag) exit 64 (EX_USAGE), as `hopper task --help` says.
func rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "hopper",
		Short:         "A self-hosted task queue for CI and batch work, compatible with Taskcluster's Queue API",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       build().String(),
		// Arbitrary arguments reach RunE, which refuses them with exit
		// 64; cobra's own "unknown command" error would exit 1.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			msg := fmt.Sprintf("unknown command %q (see hopper --help)", args[0])
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg = fmt.Sprintf("unknown command %q; did you mean %q? (see hopper --help)", args[0], s[0])
			}
			return &cli.ExitError{Code: cli.ExitUsage, Msg: msg}
		},
	}
	root.SetVersionTemplate("hopper version {{.Version}}\n")
	root.SuggestionsMinimumDistance = 2
	root.AddCommand(subcommands()...)
	argsAreUsage(root)
	return root
}

// flagError makes a flag mistake a usage mistake (exit 64), with the
// closest flag for a mistyped one.
func flagError(c *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		if s := suggestFlag(c, name); s != "" {
			msg += fmt.Sprintf("; did you mean --%s?", s)
		}
	}
	return &cli.ExitError{Code: cli.ExitUsage, Msg: fmt.Sprintf("%s (see %s --help)", msg, c.CommandPath()), Err: err}
}

// argsAreUsage makes every command's argument check a usage mistake (exit
// 64): cobra's own checks (cobra.NoArgs, …) return plain errors, which
// would exit 1.
func argsAreUsage(c *cobra.Command) {
	c.SetFlagErrorFunc(flagError)
	if c.HasSubCommands() && c.HasParent() {
		// A command that only groups others: an unknown word is a
		// mistyped subcommand (cobra would print the help and exit 0).
		c.SuggestionsMinimumDistance = 2
		check := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				if check != nil {
					return check(cmd, args)
				}
				return nil
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += fmt.Sprintf("; did you mean %q?", s[0])
			}
			return &cli.ExitError{Code: cli.ExitUsage, Msg: fmt.Sprintf("%s (see %s --help)", msg, cmd.CommandPath())}
		}
		if !c.Runnable() {
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
	}
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			err := check(cmd, args)
			var exit *cli.ExitError
			if err == nil || errors.As(err, &exit) {
				return err
			}
			return &cli.ExitError{Code: cli.ExitUsage, Msg: fmt.Sprintf("%v (see %s --help)", err, cmd.CommandPath()), Err: err}
		}
	}
	for _, sub := range c.Commands() {
		argsAreUsage(sub)
	}
}

// execute runs the command line. cobra checks required flags and flag
// groups before a command runs and says so in a plain error; those are
// usage mistakes too (exit 64), told with the command's help to read.
func execute(root *cobra.Command) error {
	cmd, err := root.ExecuteC()
	var exit *cli.ExitError
	if err == nil || errors.As(err, &exit) || cmd == nil {
		return err
	}
	msg := err.Error()
	for _, prefix := range []string{"required flag(s) ", "if any flags in the group ", "at least one of the flags in the group "} {
		if strings.HasPrefix(msg, prefix) {
			return &cli.ExitError{Code: cli.ExitUsage, Msg: fmt.Sprintf("%s (see %s --help)", msg, cmd.CommandPath()), Err: err}
		}
	}
	return err
}

// subcommands lists every `hopper` subcommand, in the order `hopper help`
// shows them. Each is built by its own file of this package.
func subcommands() []*cobra.Command {
	return []*cobra.Command{
		devCommand(),
		serveCommand(),
		migrateCommand(),
		workerCommand(),
		sandboxInitCommand(),
		taskCommand(),
		cli.NewLoginCommand(cli.StdEnv()),
		cli.NewClientCommand(),
		cli.NewRoleCommand(),
		cli.NewAuditCommand(),
		cli.NewSecretCommand(),
		cli.NewIndexCommand(),
		cli.NewHookCommand(),
		cli.NewPoolCommand(),
		cli.NewNotifyCommand(),
		cli.NewCacheCommand(),
		cli.NewJSONECommand(),
		cli.NewGithubCommand(),
		benchCommand(),
	}
}

func asExitCode(err error, target *interface{ ExitCode() int }) bool {
	for err != nil {
		if c, ok := err.(interface{ ExitCode() int }); ok {
			*target = c
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

// signalContext is cancelled by SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// env returns the environment variable or def.
// commentFreeSettings are the HOPPER_* settings whose values can never
// hold whitespace (addresses, URLs, keys, levels, durations). Paths and
// tokens may, so they are not checked.
var commentFreeSettings = []string{
	"HOPPER_LISTEN", "HOPPER_ROOT_URL", "HOPPER_DB", "HOPPER_ARTIFACTS", "HOPPER_AMQP", "HOPPER_LOG_LEVEL",
	"HOPPER_SECRET_KEY", "HOPPER_PPROF", "HOPPER_CLAIM_TIMEOUT", "HOPPER_DEADLINE_DELAY", "HOPPER_DB_BATCHES",
}

// checkEnvComments refuses (exit 64) a setting whose value carries a
// trailing "# comment": systemd's EnvironmentFile and docker --env-file
// keep everything after the "=" in the value, and a value cut at the "#"
// by hopper could silently be another one (a shorter secret key). The
// message never shows the value.
func checkEnvComments(lookup func(string) (string, bool)) error {
	for _, name := range commentFreeSettings {
		v, ok := lookup(name)
		if !ok {
			continue
		}
		before, _, found := strings.Cut(v, "#")
		if found && strings.TrimRight(before, " \t") != before {
			return &cli.ExitError{Code: cli.ExitUsage, Msg: name + " has a comment after its value (\" #…\"): an environment file " +
				"(systemd's EnvironmentFile, docker --env-file) keeps everything after the \"=\" in the value; put the comment on a line of its own"}
		}
	}
	return nil
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, ok := os.LookupEnv(name); ok {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
		fmt.Fprintf(os.Stderr, "hopper: ignoring %s=%q: not a duration\n", name, v)
	}
	return def
}

func envInt(name string, def int) int {
	if v, ok := os.LookupEnv(name); ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
		fmt.Fprintf(os.Stderr, "hopper: ignoring %s=%q: not an integer\n", name, v)
	}
	return def
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	switch strings.ToLower(level) {
	case "debug":
		l = slog.LevelDebug
	case "warn":
		l = slog.LevelWarn
	case "error":
		l = slog.LevelError
	default:
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// suggestFlag returns the flag of c (its own or inherited) closest to the
// mistyped name (within two edits, or the typed name cut short), or "".
func suggestFlag(c *cobra.Command, name string) string {
	name, _, _ = strings.Cut(name, "=")
	best, bestDist := "", 3
	c.Flags().VisitAll(func(f *pflag.Flag) {
		d := editDistance(name, f.Name)
		if len(name) >= 3 && strings.HasPrefix(f.Name, name) {
			d = 1 // a name cut short
		}
		if d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
