package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"net/http"

	"github.com/hopper-ci/hopper/internal/hop"
	"github.com/hopper-ci/hopper/internal/interactiveapi"
	"github.com/hopper-ci/hopper/internal/maintenance"
	"github.com/hopper-ci/hopper/internal/tunnel"
)

// interactiveService is the shells of interactive tasks
// (/api/interactive/v1/): the relay between viewers and workers. Its
// WebSockets are hijacked connections the HTTP server does not close, so
// draining closes them.
func (w *wiring) interactiveService() (service, error) {
	relay := interactiveapi.NewRelay(w.replicas, w.log)
	deps := interactiveapi.Deps{Store: w.store, Relay: relay, Version: w.cfg.Version, Logger: w.log}
	return service{
		routes:   interactiveapi.Routes(deps),
		handlers: map[string]http.Handler{interactiveapi.HopPrefix: interactiveapi.HopHandler(deps)},
		drain:    relay.Close,
	}, nil
}

// tunnelService is Taskcluster's websocktunnel served inside hopper
// (<root>/websocktunnel): workers without an inbound port serve their
// live logs and shells through it. It also renews the leases of the
// replica directory that it and the relay share (w.replicas).
func (w *wiring) tunnelService() (service, error) {
	t := tunnel.New(tunnelSecret(w.key), w.cfg.RootURL, w.log, w.replicas)
	return service{handlers: map[string]http.Handler{tunnel.Prefix: t, tunnel.Prefix + "/": t}, drain: t.Close,
		duties: []maintenance.Service{&maintenance.Every{What: "renewing the replica's connection leases", Interval: hop.RenewEvery,
			Logger: w.log, Pass: w.replicas.Renew}},
		expiries: []maintenance.Expiry{{Service: "replica-endpoints", Run: w.store.ExpireEndpoints}}}, nil
}

// tunnelSecret derives the websocktunnel tokens' signing secret from the
// server secret: every replica sharing it signs and verifies alike, and
// it is never stored.
func tunnelSecret(key [32]byte) []byte {
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte("hopper websocktunnel"))
	return m.Sum(nil)
}
