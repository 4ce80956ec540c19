package server

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/maintenance"
	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/notifyapi"
	"github.com/hopper-ci/hopper/internal/notifysend"
)

// notifyService is the Notify service: its routes, the sender duty and
// its metrics. Its channels are cfg.Notify (or the file and environment it
// names); Pulse goes to the notify exchange when a broker is configured,
// and the messages quote log tails read from the blob store.
func (w *wiring) notifyService() (service, error) {
	cfg := w.cfg.Notify
	if cfg == nil {
		var err error
		if cfg, err = notifysend.LoadConfig(w.cfg.NotifyConfigFile, os.Getenv); err != nil {
			return service{}, err
		}
	}
	svc := service{}
	var pulse events.Publisher
	if w.cfg.AMQP != "" {
		amqp, err := events.NewAMQP(events.AMQPOptions{URL: w.cfg.AMQP, ExchangePrefix: notifysend.PulseExchangePrefix, Logger: w.log})
		if err != nil {
			return service{}, fmt.Errorf("starting the notify exchange's publisher: %w", err)
		}
		pulse, svc.close = amqp, func() { _ = amqp.Close() }
	}
	d, err := notifysend.New(cfg, notifysend.Options{Pulse: pulse})
	if err != nil {
		if svc.close != nil {
			svc.close()
		}
		return service{}, fmt.Errorf("configuring notifications: %w", err)
	}
	for _, ch := range notify.Channels {
		if d.Configured(ch) {
			w.log.Info("notifications on", "channel", ch)
		}
	}
	metrics := notifysend.NewMetrics(w.store)
	svc.routes = notifyapi.Routes(notifyapi.Deps{Store: w.store, Version: w.cfg.Version})
	svc.collectors = metrics.Collectors()
	svc.expiries = []maintenance.Expiry{{Service: "notify", Run: w.store.ExpireNotifications}}
	sender := &notifysend.Sender{Store: w.store, Deliver: d, RootURL: w.cfg.RootURL,
		Clock: w.cfg.Clock, Logger: w.log, Metrics: metrics, LogTail: newArtifactReader(w.store, w.blobs, 64<<20, 10*time.Second).logTail}
	svc.duties = []maintenance.Service{&maintenance.Every{What: "sending notifications", Interval: notifysend.DefaultInterval, Logger: w.log,
		Pass: func(ctx context.Context) error {
			_, err := sender.Drain(ctx)
			return err
		}}}
	return svc, nil
}
