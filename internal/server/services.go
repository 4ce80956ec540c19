package server

import (
	"log/slog"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/artifacts"
	"github.com/hopper-ci/hopper/internal/maintenance"
	"github.com/hopper-ci/hopper/internal/object"
	"github.com/hopper-ci/hopper/internal/purgecache"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/queueapi"
	"github.com/hopper-ci/hopper/internal/store"
)

// sideServices are the Object and Purge-Cache services served beside the
// queue: their routes, the object service as object artifacts see it, and
// their background expiry.
type sideServices struct {
	routes  []api.Route
	objects queueapi.ObjectService
	duties  []maintenance.Service
}

// newSideServices wires the Object service over the blob store (when it
// can store data server-side, as both of hopper's backends can) and the
// Purge-Cache service over the store.
func newSideServices(st store.Store, blobs artifacts.Backend, clock queue.Clock, log *slog.Logger, expireEvery time.Duration, version string) *sideServices {
	s := &sideServices{}
	if b, ok := blobs.(object.Blobs); ok {
		svc := &object.Service{Store: st, Blobs: b, Clock: clock, Log: log}
		s.routes = append(s.routes, object.Routes(svc)...)
		s.routes = append(s.routes, api.VersionRoute(object.BasePath, version))
		s.objects = svc
		s.duties = append(s.duties, &maintenance.ObjectExpirer{Objects: svc, Interval: expireEvery, Logger: log})
	} else {
		log.Warn("the blob store cannot hold objects: the Object service and object artifacts are off")
	}
	s.routes = append(s.routes, purgecache.Routes(st, clock)...)
	s.routes = append(s.routes, api.VersionRoute(purgecache.BasePath, version))
	s.duties = append(s.duties, &maintenance.PurgeRequestExpirer{Store: st, Clock: clock, Interval: expireEvery, Logger: log})
	return s
}
