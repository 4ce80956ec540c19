package tasklog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// LiveServer serves one task log over HTTP while the task runs, at a
// secret, unguessable path, so `curl -N <URL>` follows the output live.
// Each run gets its own server on an ephemeral port, so concurrent runs
// never share one.
type LiveServer struct {
	log  *Log
	srv  *http.Server
	ln   net.Listener
	path string
	host string
	done chan struct{}
}

// StartLive listens on bindHost:0 and serves log. publicHost is the host
// name put into URL (usually the same loopback address).
func StartLive(log *Log, bindHost, publicHost string) (*LiveServer, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(bindHost, "0"))
	if err != nil {
		return nil, fmt.Errorf("listening for the live log: %w", err)
	}
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	if publicHost == "" {
		publicHost = bindHost
	}
	s := &LiveServer{log: log, ln: ln, path: "/log/" + hex.EncodeToString(tok[:]), host: publicHost, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+s.path, s.serveLog)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// URL is where the log can be followed.
func (s *LiveServer) URL() string {
	port := s.ln.Addr().(*net.TCPAddr).Port
	return "http://" + net.JoinHostPort(s.host, strconv.Itoa(port)) + s.path
}

func (s *LiveServer) serveLog(w http.ResponseWriter, r *http.Request) { ServeLive(s.log, w, r) }

// ServeLive follows log on w (the live log's answer, wherever it is
// served). A reader that lost its stream resumes with Range: bytes=N- and
// gets 206 and the log from byte N on, nothing lost or repeated; while the
// log grows its complete length is unknown, so Content-Range is sent once
// the log is closed only, and a client takes the 206 itself as the
// promise that the body starts at N.
func ServeLive(log *Log, w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-cache")
	// The URL itself is the secret (like Taskcluster's livelog), so any page,
	// such as hopper's web UI, may read it.
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Accept-Ranges", "bytes")
	from, ranged := openRange(r.Header.Get("Range"))
	if ranged {
		size, spill, closed, _ := log.snapshot()
		total := size + int64(len(spill))
		if from > total && closed {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", total))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		if closed && from < total {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, total-1, total))
		}
		w.WriteHeader(http.StatusPartialContent)
	} else {
		w.WriteHeader(http.StatusOK)
	}
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	_ = log.FollowFrom(r.Context(), from, w, flush)
}

// openRange parses the one kind of Range a resuming reader sends,
// "bytes=N-"; anything else is ignored (the whole log, 200).
func openRange(h string) (int64, bool) {
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok {
		return 0, false
	}
	n, ok := strings.CutSuffix(spec, "-")
	if !ok {
		return 0, false
	}
	from, err := strconv.ParseInt(n, 10, 64)
	if err != nil || from < 0 {
		return 0, false
	}
	return from, true
}

// Close stops the server. Followers get the rest of the log if it was
// already closed; otherwise they are cut off after the grace period.
func (s *LiveServer) Close(grace time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.srv.Close()
	}
	<-s.done
	if err != nil {
		return fmt.Errorf("stopping the live log server: %w", err)
	}
	return nil
}
