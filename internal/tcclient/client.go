// Package tcclient is a Go client for the Taskcluster Queue and Auth HTTP APIs as hopper
// serves it (and as upstream Taskcluster serves it). It signs requests with
// Hawk, carries temporary-credential certificates and authorizedScopes in the
// Hawk ext, retries transient failures like the official clients do and maps
// error replies to *APIError values.
package tcclient

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/hawk"
	"github.com/hopper-ci/hopper/internal/retry"
)

// DefaultMaxRetries is how often a request is retried after a network error
// or a 5xx reply, matching the official Taskcluster clients.
const DefaultMaxRetries = 5

// maxResponseBytes bounds how much of a reply is read; queue replies are
// small JSON documents, so anything larger is a misbehaving server.
const maxResponseBytes = 32 << 20

// Client calls the Taskcluster Queue API. The zero value is not usable: set
// RootURL at least. A Client is safe for concurrent use as long as its fields
// are not modified concurrently; to change credentials create a copy with
// WithCredentials.
type Client struct {
	// RootURL is the deployment root, e.g. "https://tc.example.com"; the
	// queue API lives below <RootURL>/api/queue/v1.
	RootURL string
	// Credentials sign requests; nil sends unauthenticated requests (the
	// queue then applies the anonymous role).
	Credentials *Credentials
	// AuthorizedScopes restricts the request to these scopes; nil means no
	// restriction (an empty non-nil slice restricts to nothing).
	AuthorizedScopes []string
	// HTTPClient performs requests; nil means a default client. Redirects
	// are never followed regardless of its CheckRedirect, because the
	// artifact endpoints answer 303 with a JSON body that is the result.
	HTTPClient *http.Client
	// MaxRetries overrides DefaultMaxRetries when positive; negative
	// disables retries.
	MaxRetries int
	// RetryDelay is the base of the exponential back-off (default 100 ms):
	// attempt n waits about RetryDelay * 2^n, capped at 30 s.
	RetryDelay time.Duration
}

// WithCredentials returns a shallow copy of c that signs with creds.
func (c *Client) WithCredentials(creds *Credentials) *Client {
	cp := *c
	cp.Credentials = creds
	return &cp
}

// APIError is a reply with a 4xx or 5xx status (or an unexpected status such
// as a 424 error artifact).
type APIError struct {
	// StatusCode is the HTTP status of the reply.
	StatusCode int
	// Code is Taskcluster's error code (e.g. "RequestConflict"); empty when
	// the body carried none.
	Code string
	// Message is the server's explanation.
	Message string
	// Reason is set for error artifacts (424 replies carry {reason, message}).
	Reason string
	// Method and URL identify the failed call.
	Method, URL string
}

// Error implements error.
func (e *APIError) Error() string {
	code := e.Code
	if code == "" {
		code = http.StatusText(e.StatusCode)
	}
	// The digest keeps what to fix (each schema violation, each missing
	// scope) on the log line and leaves out Taskcluster's details block.
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.URL, e.StatusCode, code, OneLine(e.Message))
}

// StatusCode returns the HTTP status carried by err if it is (or wraps) an
// *APIError, else 0.
func StatusCode(err error) int {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr.StatusCode
	}
	return 0
}

// IsTransient reports whether err is worth retrying later: network errors
// and 5xx or 429 replies. Context cancellation is not transient.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	code := StatusCode(err)
	if code == 0 {
		return true
	}
	return code >= 500 || code == http.StatusTooManyRequests
}

// BaseURL returns the queue API base URL without a trailing slash.
func (c *Client) BaseURL() string {
	return strings.TrimRight(c.RootURL, "/") + "/api/queue/v1"
}

// EscapePathParam escapes s like JavaScript's encodeURIComponent, which is
// how every official client substitutes path parameters (so "/" becomes
// "%2F").
func EscapePathParam(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' ||
			strings.IndexByte("-_.!~*'()", ch) >= 0 {
			b.WriteByte(ch)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", ch)
	}
	return b.String()
}

// HawkExt returns the Hawk ext value for the given credentials and
// authorizedScopes: standard base64 of a JSON object holding only the keys
// that apply, or "" when neither applies.
func HawkExt(creds *Credentials, authorizedScopes []string) (string, error) {
	hasCert := creds != nil && creds.Certificate != ""
	if !hasCert && authorizedScopes == nil {
		return "", nil
	}
	// Written directly rather than through a map and json.Marshal: every
	// request signed with temporary credentials builds one.
	var buf bytes.Buffer
	buf.WriteByte('{')
	if authorizedScopes != nil {
		scopes, err := json.Marshal(authorizedScopes)
		if err != nil {
			return "", fmt.Errorf("encoding hawk ext: %w", err)
		}
		buf.WriteString(`"authorizedScopes":`)
		buf.Write(scopes)
	}
	if hasCert {
		if authorizedScopes != nil {
			buf.WriteByte(',')
		}
		buf.WriteString(`"certificate":`)
		if err := json.Compact(&buf, []byte(creds.Certificate)); err != nil {
			return "", fmt.Errorf("certificate is not valid JSON: %w", err)
		}
	}
	buf.WriteByte('}')
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// AuthorizationHeader returns a Hawk Authorization header value for a
// request with the given method to rawURL, signed with creds. It is exported
// for the worker's taskcluster-proxy, which signs requests it forwards.
func AuthorizationHeader(creds *Credentials, authorizedScopes []string, method, rawURL string) (string, error) {
	if creds == nil {
		return "", errors.New("no credentials to sign with")
	}
	ext, err := HawkExt(creds, authorizedScopes)
	if err != nil {
		return "", err
	}
	header, err := hawk.RequestHeader(hawk.Credentials{ID: creds.ClientID, Key: creds.AccessToken},
		method, rawURL, time.Now(), hawk.NewNonce(), "", ext)
	if err != nil {
		return "", fmt.Errorf("signing %s %s: %w", method, rawURL, err)
	}
	return header, nil
}

// SignedURL returns rawURL with a bewit valid for d, signed with the
// client's credentials (used for artifact downloads by URL).
func (c *Client) SignedURL(rawURL string, d time.Duration) (string, error) {
	if c.Credentials == nil {
		return rawURL, nil
	}
	ext, err := HawkExt(c.Credentials, c.AuthorizedScopes)
	if err != nil {
		return "", err
	}
	signed, err := hawk.SignURL(hawk.Credentials{ID: c.Credentials.ClientID, Key: c.Credentials.AccessToken},
		rawURL, time.Now().Add(d), ext)
	if err != nil {
		return "", fmt.Errorf("signing URL: %w", err)
	}
	return signed, nil
}

// Do calls the queue API: method and path (relative to BaseURL, with path
// parameters already escaped) plus optional query, JSON input in (nil for
// no body) and output out (nil to discard). Any 2xx or 3xx reply is a
// success; its JSON body is decoded into out.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	_, err := c.do(ctx, method, path, query, in, out)
	return err
}

// reply is what do hands back besides the decoded body.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) (*reply, error) {
	return c.doAt(ctx, c.BaseURL(), method, path, query, in, out)
}

// doAt sends one API call to the service at base (with retries for network
// errors and 5xx) and decodes its JSON reply into out.
func (c *Client) doAt(ctx context.Context, base, method, path string, query url.Values, in, out any) (*reply, error) {
	rawURL := base + path
	if len(query) > 0 {
		rawURL += "?" + query.Encode()
	}
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return nil, fmt.Errorf("encoding request for %s %s: %w", method, path, err)
		}
	}
	var rep *reply
	err := retry.Do(ctx, retryPolicy(c.MaxRetries, c.RetryDelay), func(int) error {
		var err error
		rep, err = c.attempt(ctx, method, rawURL, body)
		if err != nil && (!IsTransient(err) || StatusCode(err) == http.StatusTooManyRequests) {
			return retry.Stop(err)
		}
		return err
	})
	if err != nil {
		return rep, err
	}
	if out != nil && len(bytes.TrimSpace(rep.body)) > 0 {
		if err := json.Unmarshal(rep.body, out); err != nil {
			return rep, fmt.Errorf("decoding reply of %s %s: %w", method, path, err)
		}
	}
	return rep, nil
}

// retryPolicy is how a call or upload is retried: MaxRetries more
// attempts (DefaultMaxRetries when zero, none when negative) with
// jittered exponential back-off from delay.
func retryPolicy(maxRetries int, delay time.Duration) retry.Policy {
	switch {
	case maxRetries == 0:
		maxRetries = DefaultMaxRetries
	case maxRetries < 0:
		maxRetries = 0
	}
	return retry.Policy{Attempts: maxRetries + 1, Delay: func(n int) time.Duration { return backoff(delay, n) }}
}

func (c *Client) attempt(ctx context.Context, method, rawURL string, body []byte) (*reply, error) {
	var rdr io.Reader
	if body != nil {
		rdr = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, rdr)
	if err != nil {
		return nil, fmt.Errorf("building request %s %s: %w", method, rawURL, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Credentials != nil {
		header, err := AuthorizationHeader(c.Credentials, c.AuthorizedScopes, method, req.URL.String())
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", header)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, rawURL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("reading reply of %s %s: %w", method, rawURL, err)
	}
	rep := &reply{status: resp.StatusCode, header: resp.Header, body: data}
	// Like the official clients, a redirect is a result only when it carries
	// a JSON body (getArtifact's 303); any other redirect (say, a path
	// cleaned by the server) is an error, not an empty success.
	if resp.StatusCode < 300 || (resp.StatusCode < 400 && isJSONContent(resp.Header.Get("Content-Type"))) {
		return rep, nil
	}
	apiErr := &APIError{StatusCode: resp.StatusCode, Method: method, URL: rawURL}
	var parsed struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Reason  string `json:"reason"`
		Error   string `json:"error"`
	}
	if json.Unmarshal(data, &parsed) == nil {
		apiErr.Code, apiErr.Message, apiErr.Reason = parsed.Code, parsed.Message, parsed.Reason
		if apiErr.Message == "" {
			apiErr.Message = parsed.Error
		}
	} else {
		apiErr.Message = strings.TrimSpace(string(data))
	}
	return rep, apiErr
}

func isJSONContent(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/json")
}

func (c *Client) httpClient() *http.Client {
	base := c.HTTPClient
	if base == nil {
		base = http.DefaultClient
	}
	cp := *base
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cp
}

// backoff returns the delay before retry attempt+1: base·2^attempt with ±25%
// jitter, capped at 30 s.
func backoff(base time.Duration, attempt int) time.Duration {
	if base <= 0 {
		base = 100 * time.Millisecond
	}
	d := base << min(attempt, 20)
	if d > 30*time.Second || d <= 0 {
		d = 30 * time.Second
	}
	jitter := 0.75 + rand.Float64()/2
	return time.Duration(float64(d) * jitter)
}

// SleepContext waits d, or until ctx ends (then it returns ctx's error):
// the wait pollers built on the client use.
func SleepContext(ctx context.Context, d time.Duration) error { return retry.Sleep(ctx, d) }
