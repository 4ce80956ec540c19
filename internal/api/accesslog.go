package api

import (
	"context"
	"log/slog"
	"time"
)

// knownClientID is implemented by authentication sessions (auth.Session)
// that can say who called without authenticating again.
type knownClientID interface{ KnownClientID() string }

// logAccess writes one line per API request at debug level: HTTP verb,
// path, API method name, status, duration and the caller's clientId when
// the request was authenticated. The query string (which may carry a
// bewit) and headers (which carry Hawk MACs) are never logged, and secrets
// in the path are redacted (redact.go).
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
		slog.String("path", s.redactPath(c.R.URL.Path)),
		slog.String("method", c.Route.Name),
		slog.Int("status", status),
		slog.Duration("duration", took),
		slog.String("clientId", clientID),
	)
}
