package server

import (
	"context"
	"fmt"

	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/hooksapi"
	"github.com/hopper-ci/hopper/internal/maintenance"
)

// hooksService is the Hooks service: its API routes and the firer they
// share with the scheduler (a duty), which creates tasks through the
// queue's own createTask (queueapi.Server.CreateTaskAs). With a broker
// (cfg.AMQP) hooks also fire for Pulse messages and announce their
// changes; without one, bindings are refused.
func (w *wiring) hooksService() (service, error) {
	log := w.log
	firer := &hooksapi.Firer{Store: w.store, Roles: w.sec.Roles, Clock: w.cfg.Clock, Log: log, Tasks: w.queue, RootURL: w.cfg.RootURL}
	w.hooks = firer
	scheduler := &maintenance.Every{What: "firing scheduled hooks", Interval: hooksapi.DefaultScheduleTick, Logger: log,
		Pass: func(ctx context.Context) error { _, err := firer.FireDue(ctx); return err }}
	svc := service{duties: []maintenance.Service{scheduler},
		expiries: []maintenance.Expiry{{Service: "hooks", Run: w.store.ExpireHookFires}}}
	var (
		changed   func()
		publisher events.Publisher
	)
	if w.cfg.AMQP != "" {
		amqp, err := events.NewAMQP(events.AMQPOptions{URL: w.cfg.AMQP, ExchangePrefix: hooksapi.HooksExchangePrefix,
			ConnectionName: events.DefaultConnectionName + "-hooks", Logger: log})
		if err != nil {
			return service{}, fmt.Errorf("starting the hooks' AMQP publisher: %w", err)
		}
		publisher = amqp
		// The listener binds each hook's queue at start, every
		// DefaultPulseSync, and at once when a hook changes; its
		// consumers close after the duties stopped.
		listener := hooksapi.NewPulseListener(w.store, firer, w.cfg.AMQP, log)
		binder := &maintenance.Every{What: "binding hooks to Pulse exchanges", Interval: hooksapi.DefaultPulseSync, Logger: log, Pass: listener.Pass}
		changed = binder.Wake
		svc.duties = append(svc.duties, binder)
		svc.close = func() { _ = listener.Close(); _ = amqp.Close() }
	}
	svc.routes = hooksapi.Routes(hooksapi.Deps{Store: w.store, Sealer: w.sec.Sealer, Firer: firer, Caller: w.sec.Authorizer.Caller,
		PulseAvailable: w.cfg.AMQP != "", Changed: changed, Events: publisher, Logger: log, Version: w.cfg.Version})
	return svc, nil
}
