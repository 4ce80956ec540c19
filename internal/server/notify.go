package server

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/artifacts"
	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/maintenance"
	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/notifyapi"
	"github.com/hopper-ci/hopper/internal/notifysend"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// notifyService is the Notify service: its routes, its sender duty and
// the metrics the duty keeps.
type notifyService struct {
	routes  []api.Route
	sender  *maintenance.NotifySender
	metrics *maintenance.NotifyMetrics
	close   func()
}

// newNotifyService wires the Notify service: the channels of cfg (nil: no
// channel; notifications are recorded and fail saying so), Pulse on the
// notify exchange when a broker is configured, and log tails read from the
// blob store.
func newNotifyService(st store.Store, blobs artifacts.Backend, cfg *notifysend.Config, amqpURL, rootURL, version string,
	clock queue.Clock, log *slog.Logger) (*notifyService, error) {
	svc := &notifyService{close: func() {}}
	var pulse events.Publisher
	if amqpURL != "" {
		amqp, err := events.NewAMQP(events.AMQPOptions{URL: amqpURL, ExchangePrefix: notifysend.PulseExchangePrefix, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("starting the notify exchange's publisher: %w", err)
		}
		pulse, svc.close = amqp, func() { _ = amqp.Close() }
	}
	d, err := notifysend.New(cfg, notifysend.Options{Pulse: pulse})
	if err != nil {
		svc.close()
		return nil, fmt.Errorf("configuring notifications: %w", err)
	}
	for _, ch := range notify.Channels {
		if d.Configured(ch) {
			log.Info("notifications on", "channel", ch)
		}
	}
	svc.metrics = maintenance.NewNotifyMetrics(st)
	svc.sender = &maintenance.NotifySender{Store: st, Deliver: d, RootURL: rootURL, Clock: clock, Logger: log,
		Metrics: svc.metrics, LogTail: logTailer(st, blobs)}
	svc.routes = notifyapi.Routes(notifyapi.Deps{Store: st, Version: version})
	return svc, nil
}

// logTailer reads the last lines of a run's backing log from blob storage.
func logTailer(st store.Store, blobs artifacts.Backend) func(ctx context.Context, taskID string, runID int) (string, error) {
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
