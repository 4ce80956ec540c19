package api

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"
)

// With debug logging on, requests that reach no API route (blob URLs of
// the built-in store, the web UI, unknown paths) get an access-log line
// too, without an API method name. API calls log their own line (with the
// method and clientId) and mark the writer so this one stays quiet.

// statusRecorder remembers the status a handler answered. It keeps the
// writer's optional interfaces that streaming relies on (ReaderFrom for
// large blob downloads, Flusher for live logs).
type statusRecorder struct {
	http.ResponseWriter
	status int
	api    bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(p)
}

// ReadFrom lets io.Copy keep the underlying writer's fast path.
func (r *statusRecorder) ReadFrom(src io.Reader) (int64, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if rf, ok := r.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(r.ResponseWriter, src)
}

// Flush implements http.Flusher when the underlying writer does.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// markAPICall tells the outer access log that the API logged this call.
func markAPICall(w http.ResponseWriter) {
	if r, ok := w.(*statusRecorder); ok {
		r.api = true
	}
}

// logOtherRequests wraps h so that, at debug level, each request no API
// route answered is logged (verb, path with its secrets redacted as if it
// had reached their route, status, duration; never the query string, which
// may carry a signature or bewit).
func (s *Server) logOtherRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.Background()
		if !s.log.Enabled(ctx, slog.LevelDebug) {
			h.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if rec.api {
			return
		}
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		s.log.LogAttrs(ctx, slog.LevelDebug, "request",
			slog.String("verb", r.Method),
			slog.String("path", s.redactPath(r.URL.Path)),
			slog.Int("status", status),
			slog.Duration("duration", time.Since(start)),
		)
	})
}
