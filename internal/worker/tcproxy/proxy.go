// Package tcproxy is hopper's in-process taskcluster-proxy (docs/contract/worker.md §4):
// a per-run HTTP server on a loopback port that forwards requests from task
// code to Taskcluster APIs, signing them with the run's temporary
// credentials restricted to authorizedScopes, so task code can use the
// task's scopes without ever seeing a credential.
package tcproxy

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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/retry"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// Version is reported in the X-Taskcluster-Proxy-Version header.
const Version = "hopper-1"

// maxBodyBytes bounds request bodies the proxy buffers (it must buffer them
// to retry upstream 5xx replies).
const maxBodyBytes = 32 << 20

// Options configure a proxy.
type Options struct {
	// RootURL is the Taskcluster deployment the proxy forwards to.
	RootURL string
	// BindAddress is the IP to listen on (default 127.0.0.1).
	BindAddress string
	// Port is the port to listen on; zero picks an ephemeral one.
	Port int
	// Listener, when set, is where the proxy serves instead (BindAddress
	// and Port are then unused): the worker opens it in the task's own
	// network namespace. Close closes it.
	Listener net.Listener
	// Credentials are the run's current temporary credentials.
	Credentials tcclient.Credentials
	// AuthorizedScopes restrict every forwarded request.
	AuthorizedScopes []string
	// TaskID and RunID are the run the proxy serves: GET /id-token asks
	// for its identity token.
	TaskID string
	RunID  int
	// HTTPClient performs upstream requests (default: a client without
	// redirect following).
	HTTPClient *http.Client
	// MaxRetries is how often an upstream 5xx or network error is retried
	// (default 5; negative disables).
	MaxRetries int
	// RetryDelay is the back-off base (default 100 ms).
	RetryDelay time.Duration
	// AllowPeerFunc, when set, decides for each accepted connection
	// (local and remote address) whether to serve it; refused ones are
	// closed at once. The worker's sandbox uses it to serve only the
	// task's own user, not other tasks on the machine.
	AllowPeerFunc func(local, remote net.Addr) bool
}

// Proxy is a running proxy.
type Proxy struct {
	opts    Options
	mu      sync.RWMutex
	creds   tcclient.Credentials
	srv     *http.Server
	ln      net.Listener
	done    chan struct{}
	rootURL *url.URL
}

// Start listens on an ephemeral port and serves until Close.
func Start(opts Options) (*Proxy, error) {
	root, err := url.Parse(strings.TrimRight(opts.RootURL, "/"))
	if err != nil || root.Scheme == "" || root.Host == "" {
		return nil, fmt.Errorf("proxy root URL %q is not an absolute URL", opts.RootURL)
	}
	if opts.BindAddress == "" {
		opts.BindAddress = "127.0.0.1"
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 5 * time.Minute}
	}
	hc := *opts.HTTPClient
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	opts.HTTPClient = &hc
	if opts.MaxRetries == 0 {
		opts.MaxRetries = 5
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = 100 * time.Millisecond
	}
	ln := opts.Listener
	if ln == nil {
		ln, err = net.Listen("tcp", net.JoinHostPort(opts.BindAddress, strconv.Itoa(opts.Port)))
		if err != nil {
			return nil, fmt.Errorf("listening for the taskcluster proxy: %w", err)
		}
	}
	if opts.AllowPeerFunc != nil {
		ln = filteredListener{Listener: ln, allow: opts.AllowPeerFunc}
	}
	p := &Proxy{opts: opts, creds: opts.Credentials, ln: ln, done: make(chan struct{}), rootURL: root}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 30 * time.Second}
	go func() {
		defer close(p.done)
		_ = p.srv.Serve(ln)
	}()
	return p, nil
}

// URL is the proxy's base URL (the value of TASKCLUSTER_PROXY_URL).
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// SetCredentials replaces the signing credentials (after every reclaim).
func (p *Proxy) SetCredentials(c tcclient.Credentials) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.creds = c
}

func (p *Proxy) credentials() tcclient.Credentials {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.creds
}

// Close stops the proxy, letting in-flight requests finish for up to grace.
func (p *Proxy) Close(grace time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := p.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = p.srv.Close()
	}
	<-p.done
	if err != nil {
		return fmt.Errorf("stopping the taskcluster proxy: %w", err)
	}
	return nil
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Taskcluster-Proxy-Version", Version)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/credentials" && r.Method == http.MethodPut:
		p.serveCredentials(w, r)
		return
	case r.URL.Path == "/bewit" && r.Method == http.MethodPost:
		p.serveBewit(w, r)
		return
	case r.URL.Path == "/id-token" && r.Method == http.MethodGet:
		p.serveIDToken(w, r)
		return
	}
	target, err := p.targetURL(r.URL)
	if err != nil {
		writeJSONError(w, http.StatusNotFound, err.Error())
		return
	}
	p.forward(w, r, target)
}

func (p *Proxy) serveCredentials(w http.ResponseWriter, r *http.Request) {
	var c tcclient.Credentials
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&c); err != nil || c.ClientID == "" || c.AccessToken == "" {
		writeJSONError(w, http.StatusBadRequest, "body must be JSON {clientId, accessToken, certificate?}")
		return
	}
	if c.Certificate != "" && !json.Valid([]byte(c.Certificate)) {
		writeJSONError(w, http.StatusBadRequest, "certificate must be JSON text")
		return
	}
	p.SetCredentials(c)
	w.Header().Set("X-Taskcluster-Proxy-Version", Version)
	w.WriteHeader(http.StatusOK)
}

// serveBewit answers with a 303 to the posted URL signed for one hour.
func (p *Proxy) serveBewit(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, "reading body: "+err.Error())
		return
	}
	u, err := url.Parse(strings.TrimSpace(string(raw)))
	if err != nil || u.Scheme == "" || u.Host == "" {
		writeJSONError(w, http.StatusBadRequest, "body must be an absolute URL")
		return
	}
	creds := p.credentials()
	c := &tcclient.Client{Credentials: &creds, AuthorizedScopes: p.opts.AuthorizedScopes}
	signed, err := c.SignedURL(u.String(), time.Hour)
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Location", signed)
	w.Header().Set("X-Taskcluster-Proxy-Version", Version)
	w.WriteHeader(http.StatusSeeOther)
}

// serveIDToken asks hopper for the run's identity token for
// ?audience= (Auth's createIdToken for this task and run), so task code
// needs neither its taskId nor its runId: GET
// $TASKCLUSTER_PROXY_URL/id-token?audience=sts.amazonaws.com answers
// {"token", "subject", "expires"}, or the Auth API's refusal; &subject=
// asks for the token only if the run has that subject.
func (p *Proxy) serveIDToken(w http.ResponseWriter, r *http.Request) {
	audience := r.URL.Query().Get("audience")
	if audience == "" || p.opts.TaskID == "" {
		writeJSONError(w, http.StatusBadRequest, "GET /id-token?audience=<audience> asks for the run's identity token for an audience")
		return
	}
	in := map[string]string{"audience": audience}
	if subject := r.URL.Query().Get("subject"); subject != "" {
		in["subject"] = subject
	}
	body, err := json.Marshal(in)
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, err.Error())
		return
	}
	target := p.rootURL.String() + "/api/auth/v1/task/" + url.PathEscape(p.opts.TaskID) + "/runs/" + strconv.Itoa(p.opts.RunID) + "/id-token"
	req := r.Clone(r.Context())
	req.Method, req.Body, req.URL.RawQuery = http.MethodPost, io.NopCloser(bytes.NewReader(body)), ""
	req.Header = http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}}
	p.forward(w, req, target)
}

// targetURL maps /api/<service>/<version>/<path> and the legacy
// /<service>/<version>/<path> onto the deployment's API URL, keeping the
// escaped path and raw query exactly as the task sent them (the signature
// must cover what the upstream receives).
func (p *Proxy) targetURL(in *url.URL) (string, error) {
	escaped := strings.TrimPrefix(in.EscapedPath(), "/")
	escaped = strings.TrimPrefix(escaped, "api/")
	parts := strings.SplitN(escaped, "/", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return "", fmt.Errorf("path %q is not /api/<service>/<version>/<path>", in.EscapedPath())
	}
	out := p.rootURL.String() + "/api/" + escaped
	if in.RawQuery != "" {
		out += "?" + in.RawQuery
	}
	return out, nil
}

// hopByHop headers are not forwarded in either direction.
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Authorization": true,
	"Content-Length": true, "Host": true,
}

func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, target string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, "reading request body: "+err.Error())
		return
	}
	if len(body) > maxBodyBytes {
		writeJSONError(w, http.StatusRequestEntityTooLarge, "request body too large for the proxy")
		return
	}
	var resp *http.Response
	policy := retry.Policy{Attempts: max(p.opts.MaxRetries, 0) + 1, Delay: retry.Doubling(p.opts.RetryDelay, 0)}
	err = retry.Do(r.Context(), policy, func(int) error {
		if resp != nil {
			resp.Body.Close() // a 5xx reply, tried again
		}
		var err error
		if resp, err = p.attempt(r, target, body); err == nil && resp.StatusCode >= 500 {
			return errUpstreamFailed
		}
		return err
	})
	if err == errUpstreamFailed {
		err = nil // the last reply is passed on as it is
	}
	if err != nil {
		if resp != nil {
			resp.Body.Close()
		}
		writeJSONError(w, http.StatusBadGateway, "forwarding request: "+err.Error())
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		if hopByHop[http.CanonicalHeaderKey(k)] {
			continue
		}
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("X-Taskcluster-Proxy-Version", Version)
	w.Header().Set("X-Taskcluster-Endpoint", target)
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// errUpstreamFailed marks a 5xx reply, which is tried again.
var errUpstreamFailed = errors.New("upstream answered 5xx")

func (p *Proxy) attempt(r *http.Request, target string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, target, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building upstream request: %w", err)
	}
	if len(body) == 0 {
		req.Body = http.NoBody
	}
	for k, vs := range r.Header {
		if hopByHop[http.CanonicalHeaderKey(k)] {
			continue
		}
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	creds := p.credentials()
	header, err := tcclient.AuthorizationHeader(&creds, p.opts.AuthorizedScopes, r.Method, req.URL.String())
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", header)
	resp, err := p.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.Method, target, err)
	}
	return resp, nil
}

// filteredListener drops the connections allow refuses.
type filteredListener struct {
	net.Listener
	allow func(local, remote net.Addr) bool
}

func (f filteredListener) Accept() (net.Conn, error) {
	for {
		c, err := f.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if f.allow(c.LocalAddr(), c.RemoteAddr()) {
			return c, nil
		}
		c.Close()
	}
}
