package api

import (
	"net/http"
	"time"
)

// ServiceHealthRoutes declares the routes every Taskcluster service answers
// under its base path besides its API methods: ping (alive, with the uptime
// since started), __lbheartbeat__ and __heartbeat__ (both {}), and, when
// version is not empty, __version__. Each service plugged in through
// Routes starts its table with them.
func ServiceHealthRoutes(basePath string, started time.Time, version string) []Route {
	routes := []Route{
		{Name: "ping", Method: http.MethodGet, Paths: []string{basePath + "/ping"}, Handle: PingSince(started)},
		{Name: "lbheartbeat", Method: http.MethodGet, Paths: []string{basePath + "/__lbheartbeat__"}, Handle: EmptyObject},
		{Name: "heartbeat", Method: http.MethodGet, Paths: []string{basePath + "/__heartbeat__"}, Handle: EmptyObject},
	}
	if version != "" {
		routes = append(routes, Route{Name: "version", Method: http.MethodGet, Paths: []string{basePath + "/__version__"}, Handle: VersionOf(version)})
	}
	return routes
}

// PingSince answers ping with the uptime since started, measured on the
// call's clock.
func PingSince(started time.Time) func(*Call) (any, error) {
	return func(c *Call) (any, error) {
		return map[string]any{"alive": true, "uptime": c.Now.Sub(started).Seconds()}, nil
	}
}

// EmptyObject answers {}.
func EmptyObject(*Call) (any, error) { return map[string]any{}, nil }

// VersionOf answers __version__ in Taskcluster's shape.
func VersionOf(version string) func(*Call) (any, error) {
	return func(*Call) (any, error) {
		return map[string]string{"version": version, "commit": "", "source": "https://github.com/hopper-ci/hopper", "build": ""}, nil
	}
}

// RootHealthRoutes are __lbheartbeat__, __heartbeat__ and __version__ at
// the deployment's root, as Taskcluster's load balancers and the official
// clients look for them there.
func RootHealthRoutes(version string) []Route {
	return []Route{
		{Name: "lbheartbeat", Method: http.MethodGet, Paths: []string{"/__lbheartbeat__"}, Handle: EmptyObject},
		{Name: "heartbeat", Method: http.MethodGet, Paths: []string{"/__heartbeat__"}, Handle: EmptyObject},
		{Name: "version", Method: http.MethodGet, Paths: []string{"/__version__"}, Handle: VersionOf(version)},
	}
}
