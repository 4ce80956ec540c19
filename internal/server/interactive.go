package server

import "github.com/hopper-ci/hopper/internal/interactiveapi"

// interactiveService is the shells of interactive tasks
// (/api/interactive/v1/): the relay between viewers and workers. Its
// WebSockets are hijacked connections the HTTP server does not close, so
// draining closes them.
func (w *wiring) interactiveService() (service, error) {
	relay := interactiveapi.NewRelay()
	return service{
		routes: interactiveapi.Routes(interactiveapi.Deps{Store: w.store, Relay: relay, Version: w.cfg.Version, Logger: w.log}),
		drain:  relay.Close,
	}, nil
}
