package server

import (
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
	svc := service{duties: []maintenance.Service{&maintenance.HookScheduler{Firer: firer, Logger: log}},
		expiries: []maintenance.Expiry{{Service: "hooks", Run: w.store.ExpireHookFires}}}
	var (
		changed   func()
		publisher events.Publisher
	)
	if w.cfg.AMQP != "" {
		listener := &maintenance.HookListener{Store: w.store, Firer: firer, AMQP: w.cfg.AMQP, Logger: log}
		changed = listener.Changed
		amqp, err := events.NewAMQP(events.AMQPOptions{URL: w.cfg.AMQP, ExchangePrefix: hooksapi.HooksExchangePrefix,
			ConnectionName: events.DefaultConnectionName + "-hooks", Logger: log})
		if err != nil {
			return service{}, fmt.Errorf("starting the hooks' AMQP publisher: %w", err)
		}
		publisher = amqp
		svc.duties = append(svc.duties, listener)
		svc.close = func() { _ = amqp.Close() }
	}
	svc.routes = hooksapi.Routes(hooksapi.Deps{Store: w.store, Sealer: w.sec.Sealer, Firer: firer, Caller: w.sec.Authorizer.Caller,
		PulseAvailable: w.cfg.AMQP != "", Changed: changed, Events: publisher, Logger: log, Version: w.cfg.Version})
	return svc, nil
}
