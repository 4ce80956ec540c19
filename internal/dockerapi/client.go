// Package dockerapi is a small client of the Docker Engine HTTP API over its
// unix socket or a TCP address, covering what hopper's docker engine and
// the worker manager's docker provider need: images (inspect, pull, load,
// tag), containers (create, start, wait, logs, kill, remove, list, copy
// out) and the daemon's version. It is a leaf both sides of the HTTP line
// use (the worker's engine, the server's provider).
//
// It uses net/http only. The official Go SDK would bring dozens of modules
// for a dozen endpoints, and driving the `docker` CLI would cost a process
// per call (about 30 ms each on these machines) and parse human output. The
// API version is pinned so a newer daemon answers in the shape this client
// decodes; 1.41 is what Debian 12's docker.io (20.10) speaks, and newer
// daemons still accept it.
package dockerapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// APIVersion is the Engine API version every request names.
const APIVersion = "v1.41"

// Client talks to one Docker daemon.
type Client struct {
	http *http.Client
	base string
}

// DefaultHost is the daemon's socket when none is named: DOCKER_HOST's
// usual default.
const DefaultHost = "unix:///var/run/docker.sock"

// New returns a client for host: a "unix:///path/to/docker.sock" address
// (or a bare socket path), or a "tcp://host:port" one. An empty host means
// DefaultHost.
func New(host string) (*Client, error) {
	if host == "" {
		host = DefaultHost
	}
	path, base := host, "http://docker/"+APIVersion
	if strings.Contains(host, "://") {
		u, err := url.Parse(host)
		if err != nil {
			return nil, fmt.Errorf("parsing docker host %q: %w", host, err)
		}
		switch u.Scheme {
		case "unix":
			path = u.Path
		case "tcp":
			path, base = "", "http://"+u.Host+"/"+APIVersion
		default:
			return nil, fmt.Errorf("docker host %q: unix:// or tcp:// expected", host)
		}
	}
	tr := &http.Transport{MaxIdleConns: 16, IdleConnTimeout: 30 * time.Second}
	if path != "" {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
	}
	// No client timeout: log streams and waits last as long as containers.
	return &Client{http: &http.Client{Transport: tr}, base: base}, nil
}

// WithTimeout returns a client whose every call ends after d (one that
// waits for nothing long, as the worker manager's provider).
func (c *Client) WithTimeout(d time.Duration) *Client {
	h := *c.http
	h.Timeout = d
	return &Client{http: &h, base: c.base}
}

// Error is an error reply from the daemon.
type Error struct {
	StatusCode int
	Message    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("docker daemon: %s (HTTP %d)", e.Message, e.StatusCode)
}

// IsNotFound reports whether err is a 404 from the daemon (no such image,
// container or path).
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.StatusCode == http.StatusNotFound
}

// IsRuntimeStartFailure reports whether err is the daemon saying that the
// OCI runtime could not start a created container's process ("OCI runtime
// create failed"). Besides a command the image lacks, this is what a start
// answers when runc set the container up on a root file system it did not
// see whole: on some hosts (Debian's docker.io 20.10 with runc 1.1 on
// recent kernels) a start now and then fails so while other mount
// namespaces are being created, and a new container then starts.
func IsRuntimeStartFailure(err error) bool {
	var e *Error
	return errors.As(err, &e) && strings.Contains(e.Message, "OCI runtime create failed")
}

// request sends one call and returns the open response for 2xx replies; any
// other status becomes an *Error carrying the daemon's message.
func (c *Client) request(ctx context.Context, method, path string, query url.Values, body io.Reader, contentType string) (*http.Response, error) {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("building docker request %s %s: %w", method, path, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("docker %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var msg struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(data, &msg) != nil || msg.Message == "" {
		msg.Message = strings.TrimSpace(string(data))
	}
	return nil, &Error{StatusCode: resp.StatusCode, Message: msg.Message}
}

// call sends in as JSON (nil for no body) and decodes the reply into out
// (nil to discard).
func (c *Client) call(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body io.Reader
	ct := ""
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding docker request: %w", err)
		}
		body, ct = bytes.NewReader(data), "application/json"
	}
	resp, err := c.request(ctx, method, path, query, body, ct)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decoding docker reply to %s %s: %w", method, path, err)
	}
	return nil
}

// Version is the daemon's self-description.
type Version struct {
	Version       string `json:"Version"`
	APIVersion    string `json:"ApiVersion"`
	MinAPIVersion string `json:"MinAPIVersion"`
	Os            string `json:"Os"`
	Arch          string `json:"Arch"`
}

// Version asks the daemon who it is; it doubles as a reachability check.
func (c *Client) Version(ctx context.Context) (*Version, error) {
	var v Version
	if err := c.call(ctx, http.MethodGet, "/version", nil, nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// jsonMessage is one line of the progress streams of pull and load.
type jsonMessage struct {
	Stream      string `json:"stream"`
	Status      string `json:"status"`
	Error       string `json:"error"`
	ErrorDetail struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// readProgress consumes a progress stream, returning the "stream" texts
// and the first error the daemon reported inside it (errors arrive in the
// body of a 200 reply).
func readProgress(r io.Reader) ([]string, error) {
	dec := json.NewDecoder(r)
	var texts []string
	for {
		var m jsonMessage
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return texts, nil
			}
			return texts, fmt.Errorf("reading docker progress: %w", err)
		}
		if m.Error != "" || m.ErrorDetail.Message != "" {
			msg := m.ErrorDetail.Message
			if msg == "" {
				msg = m.Error
			}
			return texts, &Error{StatusCode: http.StatusOK, Message: msg}
		}
		if m.Stream != "" {
			texts = append(texts, m.Stream)
		}
	}
}
