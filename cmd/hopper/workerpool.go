package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/hopper-ci/hopper/internal/cli"
	"github.com/hopper-ci/hopper/internal/worker"
	"github.com/hopper-ci/hopper/internal/worker/poolmember"
	"github.com/hopper-ci/hopper/internal/workerprovider"
)

// poolFlags are `hopper worker`'s worker-pool flags.
type poolFlags struct {
	workerPool, secretFile, providerID string
	checkEvery                         time.Duration
}

// joinPool registers the worker with its pool and returns the config the
// pool gives it (unless a config file was given, which then wins whole).
func joinPool(ctx context.Context, p poolFlags, cfg worker.Config, haveFile bool, flags worker.Config, cmd *cobra.Command, log *slog.Logger) (*poolmember.Member, worker.Config, error) {
	usage := func(format string, args ...any) error {
		msg := fmt.Sprintf(format, args...)
		return &cli.ExitError{Code: cli.ExitUsage, Msg: msg, Err: errors.New(msg)}
	}
	secret := os.Getenv(workerprovider.EnvStaticSecret)
	var proof map[string]string
	switch tokenFile := os.Getenv(workerprovider.EnvIdentityTokenFile); {
	case p.secretFile != "":
		raw, err := os.ReadFile(p.secretFile)
		if err != nil {
			return nil, cfg, usage("reading the static secret: %v", err)
		}
		secret = string(raw)
	case secret == "" && tokenFile != "":
		// A kubernetes provider's Pod: the token the kubelet projected
		// into it is its proof.
		raw, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, cfg, fmt.Errorf("reading the Pod's identity token: %w", err)
		}
		proof = map[string]string{workerprovider.ProofToken: strings.TrimSpace(string(raw))}
	case secret == "":
		return nil, cfg, usage("--worker-pool needs --static-secret-file (the secret the pool's operator made for this machine)")
	}
	if cfg.RootURL == "" {
		return nil, cfg, usage("--worker-pool needs the root URL (--root-url or TASKCLUSTER_ROOT_URL)")
	}
	group, id := cfg.WorkerGroup, cfg.WorkerID
	if cmd.Flags().Changed("worker-group") {
		group = flags.WorkerGroup
	}
	if cmd.Flags().Changed("worker-id") {
		id = flags.WorkerID
	}
	// A container a provider started is told who it is in its
	// environment.
	if group == "" {
		group = os.Getenv(workerprovider.EnvWorkerGroup)
	}
	if id == "" {
		id = os.Getenv(workerprovider.EnvWorkerID)
	}
	if group == "" {
		group = worker.DefaultWorkerGroup
	}
	if id == "" {
		id = worker.HostWorkerID()
	}
	member, err := poolmember.Register(ctx, poolmember.Options{RootURL: cfg.RootURL, WorkerPoolID: p.workerPool,
		ProviderID: p.providerID, WorkerGroup: group, WorkerID: id, StaticSecret: strings.TrimSpace(secret), Proof: proof, Logger: log, CheckEvery: p.checkEvery})
	if err != nil {
		return nil, cfg, err
	}
	if !haveFile {
		pc, err := poolWorkerConfig(member.WorkerConfig, member.SecretConfig)
		if err != nil {
			return nil, cfg, err
		}
		pc.RootURL = cfg.RootURL
		cfg = pc
	} else {
		log.Info("a --config file was given: the pool's worker config is not used")
	}
	cfg.WorkerGroup, cfg.WorkerID = group, id
	return member, cfg, nil
}

// poolWorkerConfig reads the worker's config from the pool: the
// "hopperWorker" object of the pool's workerConfig, its keys overridden
// by those of the "hopperWorker" object in the pool secret's config.
func poolWorkerConfig(workerConfig, secretConfig json.RawMessage) (worker.Config, error) {
	merged := map[string]any{}
	for _, src := range []struct {
		name string
		raw  json.RawMessage
	}{{"the pool's workerConfig", workerConfig}, {"the pool secret's config", secretConfig}} {
		if len(src.raw) == 0 {
			continue
		}
		var doc struct {
			HopperWorker map[string]any `json:"hopperWorker"`
		}
		if err := json.Unmarshal(src.raw, &doc); err != nil {
			return worker.Config{}, fmt.Errorf("reading %s: %w", src.name, err)
		}
		for k, v := range doc.HopperWorker {
			merged[k] = v
		}
	}
	var cfg worker.Config
	raw, err := json.Marshal(merged)
	if err != nil {
		return cfg, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, fmt.Errorf("the pool's hopperWorker config: %w", err)
	}
	return cfg, nil
}

// commandContext is the command's context, or the background one when
// the command runs without (tests).
func commandContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
