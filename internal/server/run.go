package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/artifacts"
	"github.com/hopper-ci/hopper/internal/authapi"
	"github.com/hopper-ci/hopper/internal/clock"
	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/hop"
	"github.com/hopper-ci/hopper/internal/live"
	"github.com/hopper-ci/hopper/internal/login"
	"github.com/hopper-ci/hopper/internal/maintenance"
	"github.com/hopper-ci/hopper/internal/notifysend"
	"github.com/hopper-ci/hopper/internal/queueapi"
	"github.com/hopper-ci/hopper/internal/schema"
	"github.com/hopper-ci/hopper/internal/ui"
	"github.com/hopper-ci/hopper/internal/workerpool"
)

// The defaults of Config's settings, for cmd/hopper's flags: each is
// defined once, by the package that applies it; the data directory's
// here.
const (
	DefaultDataDir       = ".hopper"
	DefaultClaimTimeout  = queueapi.DefaultClaimTimeout
	DefaultLongPoll      = queueapi.DefaultLongPoll
	DefaultDeadlineDelay = maintenance.DefaultDeadlineDelay
	DefaultExpireEvery   = maintenance.DefaultExpireEvery
	// DefaultProvisionInterval and DefaultScanInterval are the worker
	// pools' duties' cadences.
	DefaultProvisionInterval = workerpool.DefaultProvisionTick
	DefaultScanInterval      = workerpool.DefaultScanTick
)

// Config configures a queue server.
type Config struct {
	// Listen is the TCP address to serve on.
	Listen string
	// RootURL is the public root URL (default http://<listen address>).
	RootURL string
	// ReplicaURL is where the other replicas reach this one directly,
	// bypassing the load balancer (default http://<listen address>, the
	// host name standing for an unspecified address): a viewer's shell or
	// tunnelled live log is forwarded to the replica the worker is
	// connected to.
	ReplicaURL string
	// DB is the store spec (see OpenStore); DataDir holds the SQLite file,
	// blobs and generated keys.
	DB string
	// Store tunes the store (see StoreOptions).
	Store   StoreOptions
	DataDir string
	// ClaimTimeout is takenUntil − now for claims; DeadlineDelay is how long
	// after a deadline unresolved tasks are resolved.
	ClaimTimeout  time.Duration
	DeadlineDelay time.Duration
	// LongPoll bounds claimWork's wait (default queueapi.DefaultLongPoll).
	LongPoll time.Duration
	// ExpireEvery is how often expired tasks, artifacts (rows and blobs)
	// and other records are deleted (default maintenance.DefaultExpireEvery). Tests shorten it to
	// watch expiration happen.
	ExpireEvery time.Duration
	// Artifacts is the blob storage spec ("" = local under DataDir).
	Artifacts string
	// AMQP, if set, is the broker events are published to.
	AMQP string
	// ForgeConfig, if set, is the forges' configuration file (forge.Load).
	ForgeConfig string
	// RootAccessToken is the access token of the root client.
	RootAccessToken string
	// SecretKey encrypts access tokens at rest and signs blob URLs
	// (generated into DataDir when empty).
	SecretKey string
	// Version is reported by __version__.
	Version string
	Logger  *slog.Logger
	Clock   clock.Clock
	// Pprof, if set, is the address of an extra listener serving Go's
	// profiling endpoints (pprof.go).
	Pprof string
	// TLSCert and TLSKey, if set, are PEM files: the server then serves
	// HTTPS itself (tls.go) instead of plain HTTP.
	TLSCert, TLSKey string
	// Ready, if set, receives the server's root URL once it is listening.
	Ready func(rootURL string)
	// Routes, if set, receives the API routes served before Ready is
	// called (tests walk them all).
	Routes func([]api.Route)
	// Notify configures the Notify service's channels; when nil, they are
	// read from NotifyConfigFile (if set) and the environment's
	// HOPPER_NOTIFY_* secrets. Without any, task notifications are still
	// recorded, and fail saying their channel is not configured.
	Notify           *notifysend.Config
	NotifyConfigFile string
	// Kubeconfig, if set, names the cluster the kubernetes provider runs
	// pools' Pods in (default: the cluster hopper runs in, through its
	// service account).
	Kubeconfig string
	// ProvisionInterval and ScanInterval are the provisioner's and the
	// worker scanner's cadence (defaults DefaultProvisionInterval and
	// DefaultScanInterval).
	ProvisionInterval, ScanInterval time.Duration
	// S3STS backs awsS3Credentials; when nil it is read from the
	// environment's HOPPER_AWS_S3_* (LoadS3STS), and without those
	// awsS3Credentials has no bucket.
	S3STS *authapi.S3STS
	// Azure backs the Azure methods; when nil it is read from the
	// environment's HOPPER_AZURE_* (LoadAzure).
	Azure *authapi.AzureStorage
	// Login configures sign-in for people (docs/login.md); when nil it is
	// read from the file HOPPER_LOGIN_CONFIG names, and without one
	// nobody signs in through a provider.
	Login *login.Config
}

// Run serves until ctx is cancelled, then drains: open long-polls end with
// no tasks, in-flight requests finish, background loops stop.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	log := cfg.Logger
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.DataDir == "" {
		cfg.DataDir = DefaultDataDir
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("creating data dir: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	defer ln.Close()
	scheme := "http://"
	if cfg.TLSCert != "" || cfg.TLSKey != "" {
		if ln, err = tlsListener(ln, cfg.TLSCert, cfg.TLSKey); err != nil {
			return err
		}
		scheme = "https://"
	}
	if cfg.RootURL == "" {
		cfg.RootURL = scheme + ln.Addr().String()
	}
	if cfg.ReplicaURL == "" {
		cfg.ReplicaURL = scheme + replicaHost(ln.Addr())
	}
	st, err := OpenStore(ctx, cfg.DB, cfg.DataDir, log, cfg.Store)
	if err != nil {
		return fmt.Errorf("opening store: %w", err)
	}
	defer st.Close()

	key, err := loadSecretKey(cfg.SecretKey, cfg.DataDir)
	if err != nil {
		return err
	}
	blobs, err := artifacts.Open(ctx, cfg.Artifacts, artifacts.Options{Local: artifacts.LocalOptions{
		Dir: filepath.Join(cfg.DataDir, "blobs"), BaseURL: cfg.RootURL, SigningKey: key[:],
	}, S3: artifacts.S3Options{RelayBaseURL: cfg.RootURL, RelaySigningKey: key[:]}})
	if err != nil {
		return fmt.Errorf("opening blob storage: %w", err)
	}

	hub, ep, stopEvents, err := startEvents(cfg, log)
	if err != nil {
		return err
	}
	defer stopEvents()

	sec, err := NewSecurity(ctx, st, cfg.RootAccessToken, key, cfg.Clock, log)
	if err != nil {
		return err
	}
	schemas, err := schema.New()
	if err != nil {
		return err
	}
	w := &wiring{cfg: cfg, store: st, hub: st, sec: sec, blobs: blobs, schemas: schemas, key: key, log: log, events: ep, live: hub,
		replicas: hop.New(key[:], cfg.ReplicaURL, st, cfg.Clock, log)}
	services, err := w.build()
	if err != nil {
		return err
	}
	defer func() {
		for i := len(services) - 1; i >= 0; i-- {
			if c := services[i].close; c != nil {
				c()
			}
		}
	}()
	srv, duties, err := w.apiServer(services)
	if err != nil {
		return err
	}
	maintainer := maintenance.NewMaintainer(duties...)
	maintainer.Start(ctx)
	defer maintainer.Stop()

	if cfg.Pprof != "" {
		stop, err := startPprof(cfg.Pprof, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	return serve(ctx, cfg, ln, srv, services)
}

// apiServer serves the services' routes, the root heartbeats, the web
// console and the blob store's signed URLs through one api.Server, with
// the services' metrics; it also returns their duties.
func (w *wiring) apiServer(services []service) (*api.Server, []maintenance.Service, error) {
	routes := api.RootHealthRoutes(w.cfg.Version)
	var (
		duties     []maintenance.Service
		expiries   []maintenance.Expiry
		collectors []prometheus.Collector
	)
	handlers := map[string]http.Handler{ui.Prefix: ui.Handler(), ui.CLISigninPath: ui.CLISignin()}
	for _, svc := range services {
		for prefix, h := range svc.handlers {
			handlers[prefix] = h
		}
		routes = append(routes, svc.routes...)
		duties = append(duties, svc.duties...)
		expiries = append(expiries, svc.expiries...)
		collectors = append(collectors, svc.collectors...)
	}
	// One duty deletes every service's expired rows.
	duties = append(duties, &maintenance.DataExpirer{Expiries: expiries, Clock: w.cfg.Clock, Logger: w.log, Interval: w.cfg.ExpireEvery})
	if m, ok := w.blobs.(artifacts.Mountable); ok {
		handlers[m.MountPath()] = m
	}
	srv, err := api.New(api.Options{Clock: w.cfg.Clock, Authorizer: w.sec.Authorizer, Logger: w.log,
		Metrics: api.NewMetrics(collectors...), Schemas: w.schemas, Routes: routes, Handlers: handlers})
	if err != nil {
		return nil, nil, fmt.Errorf("building API: %w", err)
	}
	return srv, duties, nil
}

// startEvents starts the task events' way out. They feed the web UI's
// live stream (hub) and, when a broker is configured, AMQP. Without a
// broker, messages are built only while a stream (here or, through the
// relay, on another replica) is open. stop closes what it started.
func startEvents(cfg Config, log *slog.Logger) (hub *live.Hub, ep *queueapi.EventPublisher, stop func(), err error) {
	var closers []func() // in the order they are to run
	stop = func() {
		for _, c := range closers {
			c()
		}
	}
	hub = live.NewHub()
	var out events.Publisher = hub
	if cfg.AMQP != "" {
		amqp, err := events.NewAMQP(events.AMQPOptions{URL: cfg.AMQP, Logger: log})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("starting AMQP publisher: %w", err)
		}
		closers = append([]func(){func() { _ = amqp.Close() }}, closers...)
		out = events.Multi{amqp, hub}
	}
	if storeKind(cfg.DB) == "postgres" {
		relay, err := live.StartRelay(hub, live.RelayOptions{URL: cfg.DB, Logger: log})
		if err != nil {
			stop()
			return nil, nil, nil, err
		}
		closers = append([]func(){func() { _ = relay.Close() }}, closers...)
	}
	ep = queueapi.NewEventPublisher(out, log)
	closers = append([]func(){ep.Close}, closers...)
	return hub, ep, stop, nil
}

// serve answers on ln until ctx is cancelled, then drains: the services
// end their long-polls and streams, in-flight requests finish, and the
// services write what they queued while the store is still open.
func serve(ctx context.Context, cfg Config, ln net.Listener, srv *api.Server, services []service) error {
	log := cfg.Logger
	serving := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 30 * time.Second, IdleTimeout: idleConnTimeout,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() { errc <- serving.Serve(srv.Listener(ln)) }()
	log.Info("hopper queue serving", "rootUrl", cfg.RootURL, "listen", ln.Addr().String(), "db", storeKind(cfg.DB))
	if cfg.Routes != nil {
		cfg.Routes(srv.Routes())
	}
	if cfg.Ready != nil {
		cfg.Ready(cfg.RootURL)
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: draining requests")
	for _, svc := range services {
		if svc.drain != nil {
			svc.drain()
		}
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := serving.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutting down: %w", err)
	}
	for _, svc := range services {
		if svc.flush != nil {
			if err := svc.flush(shutdownCtx); err != nil {
				return fmt.Errorf("shutting down: %w", err)
			}
		}
	}
	return nil
}

// idleConnTimeout closes a kept-alive connection that has carried no
// request for this long. Net/http holds a goroutine and its buffers
// (some 25 KB) for every such connection: a fleet of busy workers, each
// calling only to reclaim every quarter of an hour, would otherwise keep
// them all for nothing. An idle worker's long-polls follow each other
// with no gap, and its parked call is not idle in this sense, so polling
// never meets the timeout; clients open a new connection when they need
// one, as they do after Taskcluster's own services close theirs.
const idleConnTimeout = time.Minute

func storeKind(spec string) string {
	if spec == "" || len(spec) > 7 && spec[:7] == "sqlite:" {
		return "sqlite"
	}
	return "postgres"
}

// replicaHost is the listener's address as another replica dials it: an
// unspecified IP (listening on every interface) stands for this machine's
// host name.
func replicaHost(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return a.String()
	}
	host, err := os.Hostname()
	if err != nil {
		return a.String()
	}
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}
