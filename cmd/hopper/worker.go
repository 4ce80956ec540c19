package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hopper-ci/hopper/internal/cli"
	"github.com/hopper-ci/hopper/internal/dockerapi"
	"github.com/hopper-ci/hopper/internal/worker"
	"github.com/hopper-ci/hopper/internal/worker/poolmember"
	"github.com/hopper-ci/hopper/internal/worker/sandbox"
	"github.com/hopper-ci/hopper/internal/worker/superseding"
)

// exitError carries a process exit code out of a command. Without err it
// is an outcome already logged (a drain), and main prints nothing for it.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }
func (e *exitError) ExitCode() int { return e.code }

func workerCommand() *cobra.Command {
	var (
		configFile string
		flags      worker.Config
		logLevel   string
		pool       poolFlags
	)
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a worker that claims and executes tasks (generic-worker or docker-worker payloads)",
		Long: `Run a worker: it claims tasks of one task queue, runs their payloads —
generic-worker style as child processes (--engine process, the default) or
docker-worker style in containers of a Docker daemon (--engine docker) —
uploads logs and artifacts, and reports the result. SIGTERM stops at once
(running tasks are resolved exception/worker-shutdown, exit 72); SIGINT
drains (no new claims, running tasks finish, exit 71).

Credentials come from --client-id/--access-token or TASKCLUSTER_CLIENT_ID,
TASKCLUSTER_ACCESS_TOKEN and TASKCLUSTER_CERTIFICATE; the root URL from
--root-url or TASKCLUSTER_ROOT_URL. A machine of a worker pool needs none:
with --worker-pool and --static-secret-file it registers with the Worker
Manager, which hands it credentials (renewed before they expire) and its
config (the pool's workerConfig.hopperWorker, then the secret
worker-pool:<pool>'s config.hopperWorker), and it stops when it is removed
from the pool (docs/worker-pools.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, member, err := resolveWorkerConfig(cmd, configFile, flags, pool, logLevel)
			if err != nil {
				return err
			}
			return runWorker(cfg, newLogger(logLevel), member)
		},
	}
	f := cmd.Flags()
	f.StringVar(&pool.workerPool, "worker-pool", "", "join this worker pool (<provisionerId>/<workerType>): register with the Worker Manager instead of using client credentials")
	f.StringVar(&pool.secretFile, "static-secret-file", "", "file holding this machine's static secret (with --worker-pool)")
	f.StringVar(&pool.providerID, "provider-id", poolmember.DefaultProviderID, "the pool's provider (with --worker-pool)")
	f.DurationVar(&pool.checkEvery, "pool-check-interval", poolmember.DefaultCheckEvery, "how often a pool worker asks whether it was removed (with --worker-pool)")
	f.StringVar(&configFile, "config", "", "YAML or JSON worker configuration file (flags override it)")
	f.StringVar(&flags.RootURL, "root-url", "", "Taskcluster root URL (TASKCLUSTER_ROOT_URL)")
	f.StringVar(&flags.Credentials.ClientID, "client-id", "", "client id (TASKCLUSTER_CLIENT_ID)")
	f.StringVar(&flags.Credentials.AccessToken, "access-token", "", "access token (TASKCLUSTER_ACCESS_TOKEN)")
	f.StringVar(&flags.Credentials.Certificate, "certificate", "", "temporary-credentials certificate (TASKCLUSTER_CERTIFICATE)")
	f.StringVar(&flags.TaskQueueID, "task-queue-id", "", "task queue to serve, <provisionerId>/<workerType>")
	f.StringVar(&flags.ProvisionerID, "provisioner-id", "", "provisioner id (with --worker-type, instead of --task-queue-id)")
	f.StringVar(&flags.WorkerType, "worker-type", "", "worker type (with --provisioner-id)")
	f.StringVar(&flags.WorkerGroup, "worker-group", "", "worker group (default: "+worker.DefaultWorkerGroup+")")
	f.StringVar(&flags.WorkerID, "worker-id", "", "worker id (default: this host's name)")
	f.IntVar(&flags.Capacity, "capacity", 0, fmt.Sprintf("concurrent task runs (default %d)", worker.DefaultCapacity))
	f.StringVar(&flags.WorkDir, "work-dir", "", "directory for task dirs, caches and downloads (default ./"+worker.DefaultWorkDir+")")
	f.StringVar(&flags.Isolation, "isolation", "", fmt.Sprintf("task sandbox: %s (refuse to start without every protection), %s (use what the machine offers) or %s (default %s)",
		sandbox.Strict, sandbox.Auto, sandbox.None, sandbox.DefaultIsolation))
	f.StringVar(&flags.TaskNetwork, "task-network", "", fmt.Sprintf("what a sandboxed task in its own network namespace reaches: %s (the network through slirp4netns, not the machine's loopback) or %s (default %s)",
		sandbox.NetworkOutbound, sandbox.NetworkNone, sandbox.DefaultNetwork))
	f.StringVar(&flags.Engine, "engine", "", fmt.Sprintf("how tasks run: %s (generic-worker payloads) or %s (docker-worker payloads) (default %s)",
		worker.EngineProcess, worker.EngineDocker, worker.DefaultEngine))
	f.StringVar(&flags.Docker.Host, "docker-host", "", "Docker daemon socket for --engine docker (DOCKER_HOST; default "+dockerapi.DefaultHost+")")
	f.StringVar(&flags.Docker.Network, "docker-network", "", "network mode of task containers: bridge, host or none (default: bridge if the daemon has one, else none)")
	f.StringVar(&flags.Superseding.Order, "superseding-order", "", "order of a superseder's list: ascending (each task supersedes those before it) or descending (docker-worker's order) (default "+worker.DefaultSupersedingOrder+")")
	f.StringSliceVar(&flags.Superseding.AllowedURLPrefixes, "superseder-allow", nil, "URL prefix a task's supersederUrl must start with (repeatable; default: any superseder)")
	f.StringVar(&logLevel, "log-level", env("HOPPER_LOG_LEVEL", defaultLogLevel), "debug, info, warn or error (HOPPER_LOG_LEVEL)")
	// `hopper worker list` looks at workers rather than being one.
	cmd.AddCommand(cli.NewWorkerListCommand())
	return cmd
}

// resolveWorkerConfig is the worker's configuration: the file's, joined
// to its pool (which hands out credentials and config) with --worker-pool,
// the flags set over it, the environment filling what is still missing.
func resolveWorkerConfig(cmd *cobra.Command, configFile string, flags worker.Config, pool poolFlags, logLevel string) (worker.Config, *poolmember.Member, error) {
	cfg := worker.Config{}
	if configFile != "" {
		var err error
		if cfg, err = worker.LoadConfigFile(configFile); err != nil {
			return worker.Config{}, nil, &cli.ExitError{Code: cli.ExitUsage, Msg: err.Error(), Err: err}
		}
	}
	var member *poolmember.Member
	if pool.workerPool != "" {
		if cfg.RootURL == "" {
			cfg.RootURL = os.Getenv("TASKCLUSTER_ROOT_URL")
		}
		if cmd.Flags().Changed("root-url") {
			cfg.RootURL = flags.RootURL
		}
		var err error
		member, cfg, err = joinPool(commandContext(cmd), pool, cfg, configFile != "", flags, cmd, newLogger(logLevel))
		if err != nil {
			return worker.Config{}, nil, err
		}
	}
	overlayWorkerFlags(cmd, &cfg, flags)
	if member != nil {
		creds := member.Credentials()
		cfg.Credentials = worker.CredentialsConfig{ClientID: creds.ClientID, AccessToken: creds.AccessToken, Certificate: creds.Certificate}
		cfg.TaskQueueID, cfg.ProvisionerID, cfg.WorkerType = pool.workerPool, "", ""
	}
	if cfg.RootURL == "" {
		cfg.RootURL = os.Getenv("TASKCLUSTER_ROOT_URL")
	}
	if cfg.Docker.Host == "" {
		cfg.Docker.Host = os.Getenv("DOCKER_HOST")
	}
	if cfg.Credentials.ClientID == "" {
		cfg.Credentials.ClientID = os.Getenv("TASKCLUSTER_CLIENT_ID")
		cfg.Credentials.AccessToken = os.Getenv("TASKCLUSTER_ACCESS_TOKEN")
		cfg.Credentials.Certificate = os.Getenv("TASKCLUSTER_CERTIFICATE")
	}
	// A configuration that cannot work is a usage mistake (exit
	// 64), told before anything starts.
	if _, err := cfg.Normalize(); err != nil {
		return worker.Config{}, nil, &cli.ExitError{Code: cli.ExitUsage, Msg: err.Error() + " (see hopper worker --help)", Err: err}
	}
	return cfg, member, nil
}

// overlayWorkerFlags copies the flags the user set over the file's values.
func overlayWorkerFlags(cmd *cobra.Command, cfg *worker.Config, flags worker.Config) {
	set := func(name string, apply func()) {
		if cmd.Flags().Changed(name) {
			apply()
		}
	}
	set("root-url", func() { cfg.RootURL = flags.RootURL })
	set("client-id", func() { cfg.Credentials.ClientID = flags.Credentials.ClientID })
	set("access-token", func() { cfg.Credentials.AccessToken = flags.Credentials.AccessToken })
	set("certificate", func() { cfg.Credentials.Certificate = flags.Credentials.Certificate })
	set("task-queue-id", func() { cfg.TaskQueueID = flags.TaskQueueID })
	set("provisioner-id", func() { cfg.ProvisionerID = flags.ProvisionerID })
	set("worker-type", func() { cfg.WorkerType = flags.WorkerType })
	set("worker-group", func() { cfg.WorkerGroup = flags.WorkerGroup })
	set("worker-id", func() { cfg.WorkerID = flags.WorkerID })
	set("capacity", func() { cfg.Capacity = flags.Capacity })
	set("work-dir", func() { cfg.WorkDir = flags.WorkDir })
	set("isolation", func() { cfg.Isolation = flags.Isolation })
	set("task-network", func() { cfg.TaskNetwork = flags.TaskNetwork })
	set("superseding-order", func() { cfg.Superseding.Order = flags.Superseding.Order })
	set("superseder-allow", func() { cfg.Superseding.AllowedURLPrefixes = flags.Superseding.AllowedURLPrefixes })
	set("engine", func() { cfg.Engine = flags.Engine })
	set("docker-host", func() { cfg.Docker.Host = flags.Docker.Host })
	set("docker-network", func() { cfg.Docker.Network = flags.Docker.Network })
}

// runWorker runs a worker until it exits, mapping SIGTERM to an immediate
// shutdown and SIGINT to a drain.
func runWorker(cfg worker.Config, log *slog.Logger, member *poolmember.Member) error {
	// This binary is the sandbox init too (sandboxInitCommand).
	cfg.SandboxInit = sandbox.SelfInit()
	w, err := worker.New(cfg, log)
	if err != nil {
		return err
	}
	if member != nil {
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		go member.Run(ctx, w.SetCredentials, func(reason string) {
			log.Warn("removed from the worker pool: stopping", "reason", reason)
			w.Shutdown(true)
		})
	}
	wc := w.Config()
	superseding.AnnounceAllowList(log, wc.SupersedingEnabled(), wc.Superseding.AllowedURLPrefixes)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sigs)
	go func() {
		// SIGINT drains (running tasks finish); SIGTERM, or a second
		// signal of either kind, stops running tasks now.
		for n := 1; ; n++ {
			sig, ok := <-sigs
			if !ok {
				return
			}
			immediate := sig == syscall.SIGTERM || n > 1
			log.Info("signal received", "signal", sig.String(), "immediate", immediate)
			if !immediate {
				log.Warn("draining: running tasks finish first; interrupt again to stop them now")
			}
			w.Shutdown(immediate)
		}
	}()
	code, err := w.Run(context.Background())
	switch {
	case err == nil && code == worker.ExitDrained:
		log.Info("worker drained: running tasks finished", "exitCode", code)
		return &exitError{code: code}
	case err == nil && code == worker.ExitShutdown:
		log.Info("worker shut down: running tasks were aborted", "exitCode", code)
		return &exitError{code: code}
	}
	if err == nil && code != 0 {
		err = fmt.Errorf("worker stopped with exit status %d", code)
	}
	if err != nil {
		return &exitError{code: max(code, 1), err: err}
	}
	return nil
}
