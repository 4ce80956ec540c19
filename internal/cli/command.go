package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// app is one invocation of a `hopper task` command: the environment, a
// client built from it and the output mode.
type app struct {
	env    *Env
	client *tcclient.Client
	json   bool
}

func newApp(env *Env, jsonOut bool) (*app, error) {
	c, err := env.Client()
	if err != nil {
		return nil, err
	}
	return &app{env: env, client: c, json: jsonOut}, nil
}

// NewTaskCommand builds the `task` command tree on env.
func NewTaskCommand(env *Env) *cobra.Command {
	var jsonOut bool
	root := &cobra.Command{
		Use:   "task",
		Short: "Create, run and inspect tasks on a queue (TASKCLUSTER_* environment)",
		Long: `Work with tasks on a Taskcluster-compatible queue (hopper or Taskcluster).

The queue and credentials come from the environment, like the official tools:
  TASKCLUSTER_ROOT_URL      the deployment, e.g. http://127.0.0.1:8080 (required)
  TASKCLUSTER_CLIENT_ID     client id (omit both for anonymous access)
  TASKCLUSTER_ACCESS_TOKEN  its access token
  TASKCLUSTER_CERTIFICATE   certificate of temporary credentials (optional)

Output is meant for people; pass --json for output meant for scripts.
Exit codes: 0 success, 1 task failed or an error, 2 task exception,
64 bad usage, 130 interrupted.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q for %q (see %s --help)", args[0], cmd.CommandPath(), cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(env.Stderr)
			_ = cmd.Help()
			return usagef("%s needs a subcommand", cmd.CommandPath())
		},
	}
	root.PersistentFlags().BoolVar(&jsonOut, "json", false, "print machine-readable JSON on stdout")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%v (see %s --help)", err, c.CommandPath())
	})

	// run wraps a command body: it builds the app and a context that
	// SIGINT/SIGTERM cancel.
	run := func(body func(ctx context.Context, a *app, args []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			a, err := newApp(env, jsonOut)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if env.Signals {
				var stop context.CancelFunc
				ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
			}
			err = body(ctx, a, args)
			if a.client.Credentials == nil {
				err = withoutCredentials(err)
			}
			return err
		}
	}

	root.AddCommand(
		createCommand(run),
		runCommand(run),
		statusCommand(run),
		logCommand(run),
		artifactsCommand(run),
		artifactCommand(run),
		simpleCommand(run, "cancel", "Cancel a task (its current run resolves exception/canceled)", (*app).cancel),
		simpleCommand(run, "rerun", "Add a new run to a resolved task", (*app).rerun),
		groupCommand(run),
		listCommand(run),
		shellCommand(run),
		interactiveCommand(run),
	)
	return root
}

type runFunc func(body func(ctx context.Context, a *app, args []string) error) func(*cobra.Command, []string) error

// args returns a validator that requires exactly the named positional
// arguments and reports a usage error naming what is missing.
func args(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, got []string) error {
		switch {
		case len(got) < len(names):
			return usagef("%s needs %s (see %s --help)", cmd.CommandPath(), strings.Join(names[len(got):], " and "), cmd.CommandPath())
		case len(got) > len(names):
			return usagef("%s takes %s, got %d: %s", cmd.CommandPath(), count(len(names), "argument"), len(got), strings.Join(got, " "))
		}
		// Check identifiers before anything else (even the environment),
		// so a mistyped id is reported as such.
		for i, name := range names {
			switch name {
			case "TASKID":
				if err := checkTaskID("taskId", got[i]); err != nil {
					return err
				}
			case "TASKGROUPID":
				if err := checkTaskID("taskGroupId", got[i]); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

func createCommand(run runFunc) *cobra.Command {
	var opts CreateOptions
	cmd := &cobra.Command{
		Use:   "create -f FILE",
		Short: "Create a task from a YAML or JSON definition",
		Long: `Create a task from a YAML or JSON file ("-" reads stdin).

Missing fields are filled in before createTask: taskId (a top-level taskId key
or --task-id, else a new slugid), created (now), deadline (now + 24h),
taskQueueId (--task-queue-id, else the file's, else ` + DefaultTaskQueue + `) and
metadata (name, description, owner, source). created, deadline and expires
may be written relative to now, e.g. "2 hours" or "-5m".

A pipeline file holds several tasks under "tasks", keyed by a label; a
task's "needs" lists the labels it waits for. They are created as one task
group, each after the tasks it needs, with those as its dependencies; every
other top-level key is a default for each task:

  taskQueueId: hopper/default
  tasks:
    build: {payload: {command: [[make]], maxRunTime: 600}}
    test:  {needs: [build], payload: {command: [[make, test]], maxRunTime: 600}}`,
		Args: args(),
		RunE: run(func(ctx context.Context, a *app, _ []string) error { return a.create(ctx, opts) }),
	}
	f := cmd.Flags()
	f.StringVarP(&opts.File, "file", "f", "", "task definition file (YAML or JSON; - for stdin)")
	f.StringVar(&opts.TaskID, "task-id", "", "taskId to create the task under (default: the file's taskId or a new one)")
	f.StringVar(&opts.TaskQueueID, "task-queue-id", "", "task queue, overriding the file's")
	return cmd
}

func runCommand(run runFunc) *cobra.Command {
	opts := RunOptions{MaxRunTime: 600 * time.Second}
	cmd := &cobra.Command{
		Use:   "run [flags] [--] COMMAND [ARGS...]",
		Short: "Run a command as a task, stream its log and exit with its result",
		Long: `Create a task whose generic-worker payload runs COMMAND ARGS..., wait for a
worker to run it while streaming its live log, and exit with a code that
mirrors the result: 0 completed, 1 failed, 2 exception.

Flags must come before COMMAND (or use -- to separate them).`,
		Args: func(cmd *cobra.Command, got []string) error {
			if len(got) == 0 {
				return usagef("%s needs a command to run, e.g. %s -- echo hello", cmd.CommandPath(), cmd.CommandPath())
			}
			return nil
		},
		RunE: run(func(ctx context.Context, a *app, got []string) error {
			opts.Command = got
			return a.run(ctx, opts)
		}),
	}
	f := cmd.Flags()
	f.SetInterspersed(false)
	f.StringVar(&opts.TaskQueueID, "task-queue-id", DefaultTaskQueue, "task queue the task is created on")
	f.Var((*secondsValue)(&opts.MaxRunTime), "max-run-time", "payload maxRunTime: seconds or a duration such as 10m")
	f.StringArrayVar(&opts.Env, "env", nil, "environment variable K=V for the command (repeatable)")
	f.StringArrayVar(&opts.Artifacts, "artifact", nil, "file the task publishes as artifact public/<PATH> (repeatable)")
	f.StringVar(&opts.Name, "name", "", "metadata.name of the task (default: the command line)")
	return cmd
}

func statusCommand(run runFunc) *cobra.Command {
	return &cobra.Command{
		Use:   "status TASKID",
		Short: "Show a task's state and runs",
		Args:  args("TASKID"),
		RunE:  run(func(ctx context.Context, a *app, got []string) error { return a.status(ctx, got[0]) }),
	}
}

func logCommand(run runFunc) *cobra.Command {
	var opts LogOptions
	cmd := &cobra.Command{
		Use:   "log TASKID",
		Short: "Print a task's log (--follow streams it until the task resolves)",
		Long: `Print the log of a task's latest run: the backing log once the run is
resolved, or what the live log holds so far while it runs. With --follow,
wait for the task to start, stream its live log and finish with the rest of
the backing log once it resolves (following retries and reruns).`,
		Args: args("TASKID"),
		RunE: run(func(ctx context.Context, a *app, got []string) error {
			opts.TaskID = got[0]
			return a.log(ctx, opts)
		}),
	}
	cmd.Flags().BoolVarP(&opts.Follow, "follow", "F", false, "stream the live log until the task resolves")
	cmd.Flags().IntVar(&opts.Run, "run", -1, "run to show, -1 for the latest (not with --follow)")
	return cmd
}

func artifactsCommand(run runFunc) *cobra.Command {
	runID := -1
	cmd := &cobra.Command{
		Use:   "artifacts TASKID",
		Short: "List the artifacts of a task's latest run (or --run N)",
		Args:  args("TASKID"),
		RunE: run(func(ctx context.Context, a *app, got []string) error {
			return a.artifacts(ctx, got[0], runID)
		}),
	}
	cmd.Flags().IntVar(&runID, "run", -1, "run whose artifacts to list, -1 for the latest")
	return cmd
}

func artifactCommand(run runFunc) *cobra.Command {
	parent := &cobra.Command{
		Use:   "artifact",
		Short: "Work with one artifact",
		Args: func(cmd *cobra.Command, got []string) error {
			if len(got) > 0 {
				return usagef("unknown command %q for %q", got[0], cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("%s needs a subcommand: get", cmd.CommandPath())
		},
	}
	opts := GetArtifactOptions{Run: -1}
	get := &cobra.Command{
		Use:   "get TASKID NAME",
		Short: "Download an artifact to stdout or a file",
		Long: `Download an artifact of a task's latest run (or --run N) to stdout, or to
the file named by -o. With --json, print where the artifact lives (and, with
-o, what was written) instead of its content.`,
		Args: args("TASKID", "NAME"),
		RunE: run(func(ctx context.Context, a *app, got []string) error {
			opts.TaskID, opts.Name = got[0], got[1]
			return a.getArtifact(ctx, opts)
		}),
	}
	get.Flags().IntVar(&opts.Run, "run", -1, "run to take the artifact from, -1 for the latest")
	get.Flags().StringVarP(&opts.Output, "output", "o", "", "write to this file instead of stdout")
	parent.AddCommand(get)
	return parent
}

func simpleCommand(run runFunc, name, short string, f func(*app, context.Context, string) error) *cobra.Command {
	return &cobra.Command{
		Use:   name + " TASKID",
		Short: short,
		Args:  args("TASKID"),
		RunE:  run(func(ctx context.Context, a *app, got []string) error { return f(a, ctx, got[0]) }),
	}
}

func groupCommand(run runFunc) *cobra.Command {
	var watch bool
	cmd := &cobra.Command{
		Use:   "group TASKGROUPID",
		Short: "List a task group's tasks (--watch follows it until every task resolves)",
		Long: `List the tasks of a group with their states, once. Exits 1 if a task failed
or ended in exception, 0 otherwise.

With --watch, show the group by state with a progress bar, refreshed every
second, until every task is resolved; then exit 0 if all completed, 1
otherwise.`,
		Args: args("TASKGROUPID"),
		RunE: run(func(ctx context.Context, a *app, got []string) error { return a.group(ctx, got[0], watch) }),
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "follow the group until every task resolves")
	return cmd
}

// secondsValue is a pflag.Value for maxRunTime: plain seconds ("600") or a
// Go duration ("10m"), rounded up to whole seconds.
type secondsValue time.Duration

func (s *secondsValue) String() string {
	return strconv.FormatInt(int64(time.Duration(*s)/time.Second), 10) + "s"
}

func (s *secondsValue) Set(v string) error {
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n > int64(365*24*time.Hour/time.Second) {
			return fmt.Errorf("%s seconds is too long", v)
		}
		d = time.Duration(n) * time.Second
	} else if d, err = time.ParseDuration(v); err != nil {
		return fmt.Errorf("%q is neither seconds nor a duration", v)
	}
	if d < time.Second {
		return fmt.Errorf("must be at least 1s, got %s", v)
	}
	*s = secondsValue((d + time.Second - 1).Truncate(time.Second))
	return nil
}

func (s *secondsValue) Type() string { return "duration" }
