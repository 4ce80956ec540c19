package api

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"time"
)

// knownClientID is implemented by authentication sessions (auth.Session)
// that can say who called without authenticating again.
type knownClientID interface{ KnownClientID() string }

// logAccess writes one line per API request at debug level: HTTP verb,
// path, API method name, status, duration and the caller's clientId when
// the request was authenticated. The query string (which may carry a
// bewit) and headers (which carry Hawk MACs) are never logged.
func (s *Server) logAccess(c *Call, status int, took time.Duration) {
	ctx := context.Background()
	if !s.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	clientID := ""
	if k, ok := c.Auth.(knownClientID); ok {
		clientID = k.KnownClientID()
	}
	s.log.LogAttrs(ctx, slog.LevelDebug, "request",
		slog.String("verb", c.R.Method),
		slog.String("path", redactedPath(c)),
		slog.String("method", c.Route.Name),
		slog.Int("status", status),
		slog.Duration("duration", took),
		slog.String("clientId", clientID),
	)
}

// redactedPath is the request path with the route's secret parameters
// replaced, so a token in a URL never reaches the log.
func redactedPath(c *Call) string {
	path := c.R.URL.Path
	for _, name := range c.Route.SecretParams {
		if v := c.Params[name]; v != "" {
			path = strings.ReplaceAll(path, v, "<redacted>")
			path = strings.ReplaceAll(path, url.PathEscape(v), "<redacted>")
		}
	}
	return path
}
