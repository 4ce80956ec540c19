package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/forge"
	"github.com/hopper-ci/hopper/internal/githubapi"
	"github.com/hopper-ci/hopper/internal/hooks"
	"github.com/hopper-ci/hopper/internal/hooksapi"
	"github.com/hopper-ci/hopper/internal/maintenance"
)

// githubService is the forge integration (the github service): its routes
// and two duties, processing stored deliveries and reporting builds to
// the forges. Its tasks are created through the queue's own createTask,
// with the repositories' roles.
func (w *wiring) githubService() (service, error) {
	log := w.log
	var forges []*forge.Forge
	if w.cfg.ForgeConfig != "" {
		var err error
		if forges, err = forge.Load(w.cfg.ForgeConfig); err != nil {
			return service{}, err
		}
		for _, f := range forges {
			log.Info("forge configured", "host", f.Host, "kind", f.Kind, "apiUrl", f.APIURL, "app", f.AppID != 0)
		}
	}
	// Task ids are derived from delivery ids with a key of their own.
	idKey := sha256.Sum256(append([]byte("hopper github task ids\x00"), w.key[:]...))
	// The duties' passes are the service's (set once it is made); the
	// webhook kicks them when it stores work.
	deliveries := &maintenance.Every{What: "processing webhook deliveries", Interval: githubapi.DefaultTick, Logger: log}
	reports := &maintenance.Every{What: "reporting builds to the forges", Interval: githubapi.DefaultTick, Logger: log}
	cfg := githubapi.Service{Store: w.store, Tasks: w.queue, Roles: w.sec.Roles, Clock: w.cfg.Clock, Schemas: w.schemas,
		Log: log, RootURL: w.cfg.RootURL, IDSecret: idKey[:], Changes: w.queue, Hooks: hookTrigger{w.hooks},
		Artifacts: newArtifactReader(w.store, w.blobs, 256<<20, 30*time.Second), Reruns: w.queue, Identities: w.store,
		Kick: func() { deliveries.Kick(); reports.Kick() }}
	var svc service
	if w.cfg.AMQP != "" {
		amqp, err := events.NewAMQP(events.AMQPOptions{URL: w.cfg.AMQP, ExchangePrefix: githubapi.ExchangePrefix,
			ConnectionName: events.DefaultConnectionName + "-github", Logger: log})
		if err != nil {
			return service{}, fmt.Errorf("starting the github service's AMQP publisher: %w", err)
		}
		cfg.Events = amqp
		svc.close = func() { _ = amqp.Close() }
	}
	s, err := githubapi.NewService(cfg, forges)
	if err != nil {
		if svc.close != nil {
			svc.close()
		}
		return service{}, err
	}
	deliveries.Pass, reports.Pass = s.ProcessPass, s.Report
	installations := &maintenance.Every{What: "listing the GitHub Apps' installations", Interval: githubapi.DefaultInstallationsInterval,
		Logger: log, Pass: s.InstallationsPass}
	svc.routes = githubapi.Routes(githubapi.Deps{Service: s, Version: w.cfg.Version, Started: time.Now()})
	svc.duties = []maintenance.Service{deliveries, reports, installations}
	svc.expiries = []maintenance.Expiry{{Service: "github", Run: w.store.ExpireGithubRecords}}
	return svc, nil
}

// hookTrigger lets the github service trigger hooks through the Hooks
// service's firer, with the hooks' refusals as text for the repository's
// users.
type hookTrigger struct{ firer *hooksapi.Firer }

func (h hookTrigger) TriggerHook(ctx context.Context, hookGroupID, hookID string, payload []byte, taskID string, now time.Time) (string, error) {
	err := h.firer.Trigger(ctx, hookGroupID, hookID, payload, taskID, githubapi.ClientID, now)
	var refused *hooks.Error
	if errors.As(err, &refused) {
		return refused.Error(), nil
	}
	return "", err
}
