// Package api is the HTTP framework every hopper service is served
// through, over net/http: routing on the escaped path, Taskcluster's error
// format, JSON-schema validation of every body, Hawk scope checks, paging,
// health and version routes, the access log and request metrics, and the
// parking of calls that wait (parked.go). It knows no service: each
// service's package (queueapi, authapi, …) declares its route table.
package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/schema"
	"github.com/hopper-ci/hopper/internal/store"
)

// Clock tells the time of calls (clock.Clock satisfies it; tests pass a
// fake).
type Clock interface{ Now() time.Time }

// Authorizer decides whether a call satisfies a scope expression. The
// template is a Taskcluster scope-expression template (JSON) rendered with
// params. It returns an *Error (401 or 403) to refuse.
type Authorizer interface {
	Authorize(c *Call, template string, params map[string]any) error
}

// Server serves the route tables of hopper's services: one ServeMux, the
// request pipeline every route goes through (body limits, JSON checks,
// scopes, parameter and schema validation, Taskcluster's error bodies), the
// access log, request metrics and the parking of calls that wait
// (parked.go). It knows no service: each hands it its routes.
type Server struct {
	clock   Clock
	schemas *schema.Registry
	authz   Authorizer
	log     *slog.Logger
	metrics *Metrics
	mux     *http.ServeMux
	// routes are the routes served, in registration order.
	routes []Route
	// bodies is the budget request bodies are read and decoded within
	// (body.go).
	bodies *bodyBudget
	// tails are the routes ending in "{name...}" (cleanpath.go).
	tails []tailRoute
	// secretPaths find the secrets of routes' paths in any request's path,
	// for the access log (redact.go).
	secretPaths []secretPath
	// parking is the listener parked calls hand their connections back
	// to (nil: calls wait in their handler; parklistener.go).
	parking *parkingListener
}

// Options wires a Server.
type Options struct {
	Clock      Clock
	Authorizer Authorizer
	Logger     *slog.Logger
	Metrics    *Metrics
	// Schemas validates request bodies (nil: a registry of its own).
	Schemas *schema.Registry
	// Routes are the services' route tables.
	Routes []Route
	// Handlers are mounted verbatim (path prefix → handler), e.g. the blob
	// store's signed-URL endpoint.
	Handlers map[string]http.Handler
}

// New builds the server and its routes.
func New(opts Options) (*Server, error) {
	schemas := opts.Schemas
	if schemas == nil {
		var err error
		if schemas, err = schema.New(); err != nil {
			return nil, err
		}
	}
	s := &Server{
		clock: opts.Clock, schemas: schemas, authz: opts.Authorizer, log: opts.Logger,
		metrics: opts.Metrics, mux: http.NewServeMux(), bodies: newBodyBudget(bodyBudgetBytes),
	}
	if s.clock == nil {
		s.clock = systemClock{}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.authz == nil {
		return nil, errors.New("api: an Authorizer is required")
	}
	for _, r := range opts.Routes {
		if r.BodyLimits == nil {
			limits := NoBodyLimits
			if r.Input != "" {
				limits = s.bodyLimitsFor(r.Input)
			}
			r.BodyLimits = &limits
		}
		if err := s.register(r); err != nil {
			return nil, err
		}
		s.routes = append(s.routes, r)
	}
	for prefix, h := range opts.Handlers {
		s.mux.Handle(prefix, h)
	}
	s.mux.HandleFunc("GET /robots.txt", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "User-Agent: *\nDisallow: /\n")
	})
	if s.metrics != nil {
		s.mux.Handle("GET /metrics", s.metrics.Handler())
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// A browser opening the root URL gets the web UI; API clients
		// keep Taskcluster's JSON 404 for every unmatched path.
		if r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
			strings.Contains(r.Header.Get("Accept"), "text/html") {
			http.Redirect(w, r, "/ui/", http.StatusFound)
			return
		}
		WriteJSON(w, http.StatusNotFound, map[string]string{"error": "Not found"})
	})
	return s, nil
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.logOtherRequests(http.HandlerFunc(s.routeVerbatim)) }

// Routes returns the routes served, for tools and tests that walk them all
// (the fuzz test of every route's parameters).
func (s *Server) Routes() []Route { return slices.Clone(s.routes) }

// Route declares one API method.
type Route struct {
	// Name is the API method name (as in the client reference), used in
	// errors and metrics.
	Name string
	// Method is the HTTP verb.
	Method string
	// Paths are ServeMux path patterns (without the verb), absolute.
	Paths []string
	// Scopes is the scope-expression template; "" means none.
	Scopes string
	// EarlyScopes says the template renders from URL parameters alone, so
	// authorization runs before parameter and body validation.
	EarlyScopes bool
	// Input names the request body schema; "" means the body is ignored.
	Input string
	// KeepsNUL says the route keeps NULs in its body's strings (it stores
	// them as JSON, where a NUL is an escape): task definitions, hook
	// definitions, index data, secrets. Every other route's body with a
	// NUL is refused with 400 before its handler runs (nul.go).
	KeepsNUL bool
	// InputRepeats says callers send the same body again and again (a
	// worker's claimWork poll): a valid one validated lately is not
	// validated again (schema.Registry.ValidateRepeated).
	InputRepeats bool
	// Query lists the allowed query-string parameters.
	Query []string
	// Handle serves the call.
	Handle func(c *Call) (any, error)
	// SecretParams name URL parameters that are secrets (a webhook
	// token): the access log shows them redacted.
	SecretParams []string
	// BodyLimits bound the request body (nil: derived from the Input
	// schema, bodyLimitsFor; NoBodyLimits without one). A route that
	// reads its body raw, without a schema, declares its own.
	BodyLimits *BodyLimits
	// CleanPayloadFunc, if set, rewrites the request body an error reply
	// echoes (requestInfo.payload), to keep secrets out of it.
	CleanPayloadFunc func(payload []byte) []byte
}

// paramPatterns validate URL parameters (docs/contract/queue.md §1.2).
var paramPatterns = map[string]*regexp.Regexp{
	"taskId":        ident.SlugID(),
	"taskGroupId":   ident.SlugID(),
	"provisionerId": ident.Identifier(),
	"workerType":    ident.Identifier(),
	"workerGroup":   ident.Identifier(),
	"workerId":      ident.Identifier(),
	"taskQueueId":   ident.TaskQueueID(),
	"runId":         regexp.MustCompile(`^[1-9]*[0-9]+$`),
	"name":          regexp.MustCompile(`^[\x20-\x7e]+$`),
}

// paramRanges bound the numeric URL parameters, from the schemas that
// describe what they name: a run's runId is an integer from 0 to 1000 in
// Taskcluster's task-status schema. A value outside never reaches a query
// (PostgreSQL refused one above 2^31-1 as an integer column's value: a 500).
var paramRanges = map[string]struct{ min, max int64 }{
	"runId": {0, 1000},
}

var queryPatterns = map[string]*regexp.Regexp{
	"limit":             regexp.MustCompile(`^[0-9]+$`),
	"continuationToken": regexp.MustCompile(`^.+$`),
	"quarantined":       regexp.MustCompile(`^(true|false)$`),
	"prefix":            regexp.MustCompile(`^.*$`),
	"bewit":             regexp.MustCompile(`^.*$`),
	// awsS3Credentials' format: Taskcluster's pattern, unanchored as
	// there (any value naming the format asks for it).
	"format": regexp.MustCompile(`iam-role-compat`),
}

var wildcard = regexp.MustCompile(`\{([A-Za-z]+)(\.\.\.)?\}`)

func (s *Server) register(rt Route) error {
	for _, p := range rt.Paths {
		var names []string
		for _, m := range wildcard.FindAllStringSubmatch(p, -1) {
			names = append(names, m[1])
		}
		if tr, ok := newTailRoute(p); ok {
			s.tails = append(s.tails, tr)
		}
		if sp, ok := newSecretPath(p, rt.SecretParams); ok {
			s.secretPaths = append(s.secretPaths, sp)
		}
		pattern := rt.Method + " " + p
		s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			s.serve(w, r, &rt, names)
		})
	}
	return nil
}

// maxBodyBytes is the request body limit (docs/contract/queue.md §7).
const maxBodyBytes = 10 << 20

// Call is one API request being served.
type Call struct {
	W      http.ResponseWriter
	R      *http.Request
	Route  *Route
	Params map[string]string
	// Body is the raw request body; Input is the validated body with
	// defaults filled (nil when the route has no input).
	Body  []byte
	Input []byte
	Now   time.Time
	// Auth caches the authentication result for the authorizer.
	Auth any
	srv  *Server
}

// Context returns the request context.
func (c *Call) Context() context.Context { return c.R.Context() }

// Authorize checks a scope-expression template rendered with params.
func (c *Call) Authorize(template string, params map[string]any) error {
	return c.srv.authz.Authorize(c, template, params)
}

// IntParam returns a numeric URL parameter.
func (c *Call) IntParam(name string) int {
	v, _ := strconv.Atoi(c.Params[name])
	return v
}

// Page returns the pagination parameters of the query string.
func (c *Call) Page() store.Page {
	q := c.R.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	return store.Page{Limit: limit, ContinuationToken: q.Get("continuationToken")}
}

// Decode unmarshals the validated input into v.
func (c *Call) Decode(v any) error {
	if err := json.Unmarshal(c.Input, v); err != nil {
		return Errorf(CodeInputValidationError, "decoding request body: %v", err)
	}
	return nil
}

// Response lets a handler choose the status and headers.
type Response struct {
	Status  int
	Header  http.Header
	Body    any // JSON-encoded; nil means an empty body
	RawBody []byte
	// Streamed says the handler has written the reply itself (a
	// server-sent event stream) with Status; nothing more is written.
	Streamed bool
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, rt *Route, names []string) {
	start := time.Now()
	c := &Call{W: w, R: r, Route: rt, Params: map[string]string{}, Now: s.clock.Now(), srv: s}
	for _, n := range names {
		c.Params[n] = r.PathValue(n)
	}
	// "<provisionerId>/<workerType>" sent with a raw slash reaches routes
	// whose canonical parameter is taskQueueId (docs/contract/queue.md §1.2).
	if p, ok := c.Params["tqProvisioner"]; ok {
		c.Params["taskQueueId"] = p + "/" + c.Params["tqWorkerType"]
		delete(c.Params, "tqProvisioner")
		delete(c.Params, "tqWorkerType")
	}
	status := s.handle(c)
	if status == statusParked {
		// The call answers, logs and counts itself when it ends (park.go).
		markAPICall(w)
		return
	}
	took := time.Since(start)
	if s.metrics != nil {
		s.metrics.ObserveRequest(rt.Name, status, took)
	}
	s.logAccess(c, status, took)
	markAPICall(w)
}

// The headers of every reply.
var baseHeaders = [...][2]string{
	{"Cache-Control", "no-store no-cache must-revalidate"},
	{"X-Content-Type-Options", "nosniff"},
}

func setBaseHeaders(h http.Header) {
	for _, kv := range baseHeaders {
		h.Set(kv[0], kv[1])
	}
}

// hasOnlyBaseHeaders reports whether h holds the base headers and nothing
// else, so that a parked call need not keep a copy.
func hasOnlyBaseHeaders(h http.Header) bool {
	if len(h) != len(baseHeaders) {
		return false
	}
	for _, kv := range baseHeaders {
		if v := h[kv[0]]; len(v) != 1 || v[0] != kv[1] {
			return false
		}
	}
	return true
}

func (s *Server) handle(c *Call) int {
	h := c.W.Header()
	setBaseHeaders(h)
	if mustAuthenticateFirst(c) {
		if pre, ok := s.authz.(Preauthenticator); ok {
			if err := pre.Preauthenticate(c); err != nil {
				return s.fail(c, err)
			}
		}
	}
	body, held, err := s.readBody(c)
	defer s.bodies.release(held)
	if err != nil {
		return s.fail(c, bodyFailure(err))
	}
	c.Body = body
	if c.Route.Input != "" {
		if apiErr := checkJSONBody(c); apiErr != nil {
			return s.fail(c, apiErr)
		}
	}
	if c.Route.Scopes != "" && c.Route.EarlyScopes {
		if err := c.Authorize(c.Route.Scopes, paramsAny(c.Params)); err != nil {
			return s.fail(c, err)
		}
	}
	if apiErr := validateParams(c); apiErr != nil {
		return s.fail(c, apiErr)
	}
	if c.Route.Input != "" {
		raw := validUTF8(c.Body)
		if len(strings.TrimSpace(string(raw))) == 0 {
			raw = []byte("{}")
		}
		validate := s.schemas.Validate
		if c.Route.InputRepeats {
			validate = s.schemas.ValidateRepeated
		}
		in, err := validate(c.Route.Input, raw)
		if err != nil {
			return s.fail(c, err)
		}
		if !c.Route.KeepsNUL {
			if apiErr := refuseNUL(in); apiErr != nil {
				return s.fail(c, apiErr)
			}
		}
		c.Input = in
	}
	out, err := c.Route.Handle(c)
	if err != nil {
		return s.fail(c, err)
	}
	switch v := out.(type) {
	case ParkedReply:
		return statusParked
	case *Response:
		if v.Streamed {
			return v.Status
		}
		for k, vals := range v.Header {
			for _, val := range vals {
				h.Add(k, val)
			}
		}
		status := v.Status
		if status == 0 {
			status = http.StatusOK
		}
		switch {
		case v.RawBody != nil:
			c.W.WriteHeader(status)
			_, _ = c.W.Write(v.RawBody)
		case v.Body != nil:
			WriteJSON(c.W, status, v.Body)
		default:
			c.W.WriteHeader(status)
		}
		return status
	default:
		WriteJSON(c.W, http.StatusOK, out)
		return http.StatusOK
	}
}

func checkJSONBody(c *Call) *Error {
	if len(strings.TrimSpace(string(c.Body))) == 0 {
		return nil
	}
	ct := c.R.Header.Get("Content-Type")
	if mt, _, _ := strings.Cut(ct, ";"); strings.TrimSpace(strings.ToLower(mt)) != "application/json" {
		return Errorf(CodeMalformedPayload, "Request body must be sent with Content-Type application/json (got %q)", ct)
	}
	if !json.Valid(c.Body) {
		// Decoded only to say what is wrong: json.Valid allocates nothing
		// on the common path.
		var v any
		err := json.Unmarshal(c.Body, &v)
		return Errorf(CodeMalformedPayload, "Request body is not valid JSON: %v", err)
	}
	switch bytes.TrimLeft(c.Body, " \t\r\n")[0] {
	case '{', '[':
		return nil
	}
	return Errorf(CodeMalformedPayload, "Request body must be a JSON object")
}

// textual reports whether a URL parameter or query value can be text in a
// query: UTF-8 without NUL. No route names anything else, and PostgreSQL
// refuses both as a text parameter (a 500), where SQLite stores them.
func textual(v string) bool { return utf8.ValidString(v) && strings.IndexByte(v, 0) < 0 }

func validateParams(c *Call) *Error {
	for name, value := range c.Params {
		if p, ok := paramPatterns[name]; ok && !p.MatchString(value) {
			return InvalidParam(name, value, p)
		}
		if !textual(value) {
			return Errorf(CodeInvalidRequestArguments,
				"Invalid URL patterns:\nURL parameter '%s' must be UTF-8 text without NUL", name)
		}
		if r, ok := paramRanges[name]; ok {
			if n, err := strconv.ParseInt(value, 10, 64); err != nil || n < r.min || n > r.max {
				return Errorf(CodeInvalidRequestArguments,
					"Invalid URL patterns:\nURL parameter '%s' given as '%s' must be an integer from %d to %d", name, value, r.min, r.max)
			}
		}
	}
	allowed := map[string]bool{"bewit": true}
	for _, q := range c.Route.Query {
		allowed[q] = true
	}
	for key, values := range c.R.URL.Query() {
		if !allowed[key] {
			return Errorf(CodeInvalidRequestArguments, "Query-string parameter: %s is not supported!", key)
		}
		if p, ok := queryPatterns[key]; ok {
			for _, v := range values {
				if !p.MatchString(v) {
					return InvalidQuery(key, v, p)
				}
			}
		}
		for _, v := range values {
			if !textual(v) {
				return Errorf(CodeInvalidRequestArguments, "Query-string parameter: %s must be UTF-8 text without NUL", key)
			}
		}
	}
	return nil
}

func paramsAny(params map[string]string) map[string]any {
	out := make(map[string]any, len(params))
	for k, v := range params {
		out[k] = v
	}
	return out
}

// statusClientClosedRequest is recorded (in metrics) for calls whose
// client went away before the answer was ready; nobody receives it.
const statusClientClosedRequest = 499

func (s *Server) fail(c *Call, err error) int {
	apiErr := AsError(err)
	if apiErr == nil && c.Context().Err() != nil {
		// The client disconnected (say, a worker stopped during a
		// long-poll): not a server fault, and there is no one to answer.
		s.log.Debug("client went away", "method", c.Route.Name, "error", err)
		return statusClientClosedRequest
	}
	if apiErr == nil {
		incident := newIncidentID()
		s.log.Error("internal error", "method", c.Route.Name, "incidentId", incident, "error", err)
		apiErr = Errorf(CodeInternalServerError, "Internal Server Error, incidentId %s", incident)
	}
	if apiErr.Code == CodeAuthenticationFailed {
		c.W.Header().Set("WWW-Authenticate", "hawk")
	}
	if apiErr.RetryAfter > 0 {
		c.W.Header().Set("Retry-After", strconv.Itoa(apiErr.RetryAfter))
	}
	if apiErr.Code == CodeServiceUnavailable && !errors.Is(err, apiErr) {
		s.log.Warn("database unreachable", "method", c.Route.Name, "error", err)
	}
	payload := json.RawMessage(validUTF8(c.Body))
	if c.Input != nil {
		payload = c.Input
	}
	if c.Route.CleanPayloadFunc != nil {
		payload = c.Route.CleanPayloadFunc(payload)
	}
	WriteJSON(c.W, apiErr.Status(), errorResponse(apiErr, c.Route.Name, c.Params, payload, c.Now))
	return apiErr.Status()
}

func newIncidentID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// WriteJSON writes v as the JSON reply with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
