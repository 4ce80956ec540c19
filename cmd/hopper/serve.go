package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/hopper-ci/hopper/internal/cli"
	"github.com/hopper-ci/hopper/internal/server"
)

// The defaults shared by every subcommand that opens the data directory or
// logs like the server, so each setting has one default.
const (
	defaultDataDir  = server.DefaultDataDir
	defaultLogLevel = "info"
)

// addServerFlags binds the queue server's flags, defaulting from HOPPER_*
// environment variables.
func addServerFlags(cmd *cobra.Command, cfg *server.Config, logLevel *string) {
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", env("HOPPER_LISTEN", "127.0.0.1:8080"), "address to serve on (HOPPER_LISTEN)")
	f.StringVar(&cfg.RootURL, "root-url", env("HOPPER_ROOT_URL", ""), "public root URL (default http://<listen>) (HOPPER_ROOT_URL)")
	f.StringVar(&cfg.ReplicaURL, "replica-url", env("HOPPER_REPLICA_URL", ""), "where the other replicas reach this one directly, for the shells and tunnelled live logs of workers connected here (default http://<listen>, the host name for 0.0.0.0) (HOPPER_REPLICA_URL)")
	f.StringVar(&cfg.DB, "db", env("HOPPER_DB", ""), "store: sqlite:PATH or a postgres:// URL (default sqlite in --data-dir) (HOPPER_DB)")
	f.IntVar(&cfg.Store.Batches, "db-batches", envInt("HOPPER_DB_BATCHES", 0), "PostgreSQL: concurrent transactions of combined task updates and creates (0: the default, 1; -1: every call alone) (HOPPER_DB_BATCHES)")
	f.StringVar(&cfg.DataDir, "data-dir", env("HOPPER_DATA_DIR", defaultDataDir), "directory for the SQLite file, blobs and keys (HOPPER_DATA_DIR)")
	f.DurationVar(&cfg.ClaimTimeout, "claim-timeout", envDuration("HOPPER_CLAIM_TIMEOUT", server.DefaultClaimTimeout), "how long a claim lasts before it must be reclaimed (HOPPER_CLAIM_TIMEOUT)")
	f.DurationVar(&cfg.DeadlineDelay, "deadline-delay", envDuration("HOPPER_DEADLINE_DELAY", server.DefaultDeadlineDelay), "delay after a deadline before unresolved tasks are resolved (HOPPER_DEADLINE_DELAY)")
	f.StringVar(&cfg.Artifacts, "artifacts", env("HOPPER_ARTIFACTS", ""), "artifact storage: local (default, under --data-dir), local:DIR or s3://BUCKET?endpoint=HOST:PORT&region=R (HOPPER_ARTIFACTS)")
	f.StringVar(&cfg.ForgeConfig, "forge-config", env("HOPPER_FORGE_CONFIG", ""), "YAML file of the forges (GitHub, Gitea, Forgejo) whose webhooks /api/github/v1/github takes; secrets are named there by file or environment variable, see docs/github.md (HOPPER_FORGE_CONFIG)")
	f.StringVar(&cfg.AMQP, "amqp", env("HOPPER_AMQP", ""), "publish task events to this AMQP broker, e.g. amqp://guest:guest@127.0.0.1:5672/ (HOPPER_AMQP)")
	f.StringVar(&cfg.NotifyConfigFile, "notify-config", env("HOPPER_NOTIFY_CONFIG", ""), "YAML file configuring the notification channels (SMTP, Slack, Matrix, webhooks); secrets may come from HOPPER_NOTIFY_* instead, never from flags (docs/notify.md) (HOPPER_NOTIFY_CONFIG)")
	f.DurationVar(&cfg.ExpireEvery, "expire-interval", envDuration("HOPPER_EXPIRE_INTERVAL", server.DefaultExpireEvery), "how often expired data (tasks, artifacts and their blobs) is deleted (HOPPER_EXPIRE_INTERVAL)")
	// Only tests need a different cadence; keep it out of --help.
	_ = f.MarkHidden("expire-interval")
	f.StringVar(&cfg.Kubeconfig, "kubeconfig", env("HOPPER_KUBECONFIG", ""), "kubeconfig of the cluster the kubernetes provider runs worker Pods in (default: the cluster hopper runs in, through its service account) (HOPPER_KUBECONFIG)")
	f.DurationVar(&cfg.ProvisionInterval, "provision-interval", envDuration("HOPPER_PROVISION_INTERVAL", server.DefaultProvisionInterval), "how often dynamic worker pools are provisioned (also at once when a task becomes pending) (HOPPER_PROVISION_INTERVAL)")
	f.DurationVar(&cfg.ScanInterval, "worker-scan-interval", envDuration("HOPPER_WORKER_SCAN_INTERVAL", server.DefaultScanInterval), "how often every pool worker is checked against what runs it (HOPPER_WORKER_SCAN_INTERVAL)")
	f.StringVar(logLevel, "log-level", env("HOPPER_LOG_LEVEL", defaultLogLevel), "debug, info, warn or error; debug adds one line per API request (HOPPER_LOG_LEVEL)")
	f.StringVar(&cfg.TLSCert, "tls-cert", env("HOPPER_TLS_CERT", ""), "serve HTTPS with this PEM certificate chain (with --tls-key; default: plain HTTP, for a TLS proxy in front) (HOPPER_TLS_CERT)")
	f.StringVar(&cfg.TLSKey, "tls-key", env("HOPPER_TLS_KEY", ""), "the PEM private key of --tls-cert (HOPPER_TLS_KEY)")
	f.StringVar(&cfg.Pprof, "pprof", env("HOPPER_PPROF", ""), "serve Go's profiling endpoints (/debug/pprof/) on this extra address, e.g. 127.0.0.1:6060; off by default (HOPPER_PPROF)")
}

func serveCommand() *cobra.Command {
	var (
		cfg      server.Config
		logLevel string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the queue server",
		Long: `Run the queue: Taskcluster's Queue REST API v1 (and the auth subset) at
<root-url>/api/queue/v1, on SQLite by default or PostgreSQL.

The root client's access token comes from HOPPER_ROOT_ACCESS_TOKEN; the key
that encrypts stored tokens from HOPPER_SECRET_KEY (or one generated into
--data-dir).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkEnvComments(os.LookupEnv); err != nil {
				return err
			}
			cfg.RootAccessToken = env("HOPPER_ROOT_ACCESS_TOKEN", "")
			cfg.SecretKey = env("HOPPER_SECRET_KEY", "")
			if cfg.RootAccessToken == "" {
				return &cli.ExitError{Code: cli.ExitUsage, Msg: "HOPPER_ROOT_ACCESS_TOKEN is not set: hopper serve needs the root client's access token " +
					"(22–66 characters of A-Z a-z 0-9 _ -); generate one with `openssl rand -base64 33 | tr '+/' '-_'`, or use `hopper dev`"}
			}
			if cfg.ClaimTimeout <= 0 {
				return &cli.ExitError{Code: cli.ExitUsage, Msg: fmt.Sprintf("--claim-timeout must be positive, got %s", cfg.ClaimTimeout)}
			}
			if cfg.ExpireEvery <= 0 {
				return &cli.ExitError{Code: cli.ExitUsage, Msg: fmt.Sprintf("--expire-interval must be positive, got %s", cfg.ExpireEvery)}
			}
			if cfg.ProvisionInterval <= 0 || cfg.ScanInterval <= 0 {
				return &cli.ExitError{Code: cli.ExitUsage, Msg: fmt.Sprintf("--provision-interval and --worker-scan-interval must be positive, got %s and %s", cfg.ProvisionInterval, cfg.ScanInterval)}
			}
			if cfg.DeadlineDelay < 0 {
				return &cli.ExitError{Code: cli.ExitUsage, Msg: fmt.Sprintf("--deadline-delay must not be negative, got %s", cfg.DeadlineDelay)}
			}
			cfg.Logger = newLogger(logLevel)
			cfg.Version = build().Short()
			ctx, cancel := signalContext()
			defer cancel()
			return server.Run(ctx, cfg)
		},
	}
	addServerFlags(cmd, &cfg, &logLevel)
	return cmd
}

func migrateCommand() *cobra.Command {
	var (
		db, dataDir, logLevel string
	)
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations and exit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkEnvComments(os.LookupEnv); err != nil {
				return err
			}
			ctx, cancel := signalContext()
			defer cancel()
			st, err := server.OpenStore(ctx, db, dataDir, newLogger(logLevel), server.StoreOptions{})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "migrations applied")
			return st.Close()
		},
	}
	cmd.Flags().StringVar(&db, "db", env("HOPPER_DB", ""), "store: sqlite:PATH or a postgres:// URL (default sqlite in --data-dir) (HOPPER_DB)")
	cmd.Flags().StringVar(&dataDir, "data-dir", env("HOPPER_DATA_DIR", defaultDataDir), "directory for the SQLite file (HOPPER_DATA_DIR)")
	cmd.Flags().StringVar(&logLevel, "log-level", env("HOPPER_LOG_LEVEL", defaultLogLevel), "debug, info, warn or error (HOPPER_LOG_LEVEL)")
	return cmd
}
