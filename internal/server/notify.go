package server

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/hopper-ci/hopper/internal/artifacts"
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
	metrics := maintenance.NewNotifyMetrics(w.store)
	svc.routes = notifyapi.Routes(notifyapi.Deps{Store: w.store, Version: w.cfg.Version})
	svc.collectors = metrics.Collectors()
	svc.expiries = []maintenance.Expiry{{Service: "notify", Run: w.store.ExpireNotifications}}
	svc.duties = []maintenance.Service{&maintenance.NotifySender{Store: w.store, Deliver: d, RootURL: w.cfg.RootURL,
		Clock: w.cfg.Clock, Logger: w.log, Metrics: metrics, LogTail: logTailer(w.store, w.blobs)}}
	return svc, nil
}

// logTailer reads the last lines of a run's backing log from blob storage.
func logTailer(st artifactRecords, blobs artifacts.Backend) func(ctx context.Context, taskID string, runID int) (string, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	return func(ctx context.Context, taskID string, runID int) (string, error) {
		const name = "public/logs/live_backing.log"
		a, err := st.GetArtifact(ctx, taskID, runID, name)
		if err != nil {
			return "", err
		}
		if a.StorageType != "s3" || !a.Present {
			return "", fmt.Errorf("the log of %s run %d is not stored here", taskID, runID)
		}
		u, err := blobs.GetURL(ctx, artifacts.BlobKey(taskID, runID, name), time.Now().Add(time.Minute))
		if err != nil {
			return "", err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return "", err
		}
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("reading the log of %s run %d: %s", taskID, runID, resp.Status)
		}
		var r io.Reader = resp.Body
		if resp.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(resp.Body)
			if err != nil {
				return "", err
			}
			r = gz
		}
		// A ring of the last bytes read, so a long log costs no memory.
		const keep = notify.MaxLogTailSize
		buf := make([]byte, 0, 2*keep)
		chunk := make([]byte, 32*1024)
		for read := 0; read < 64<<20; {
			n, err := r.Read(chunk)
			read += n
			buf = append(buf, chunk[:n]...)
			if len(buf) > keep {
				buf = append(buf[:0], buf[len(buf)-keep:]...)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return "", err
			}
		}
		return notify.TailLines(buf, notify.LogTailLines, keep), nil
	}
}
