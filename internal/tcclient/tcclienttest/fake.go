// Package tcclienttest provides an in-memory fake of the parts of the
// Taskcluster Queue API that workers use, served over real HTTP with Hawk
// verification, so that the client and the worker can be tested without the
// real queue. It follows queue-api.md semantics for the endpoints it serves;
// it is deliberately small (no dependencies, no priorities, no paging).
package tcclienttest

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/hawk"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// Options configure a fake queue.
type Options struct {
	// ClaimTimeout is takenUntil − now on claim and reclaim (default 20 s).
	ClaimTimeout time.Duration
	// LongPoll is how long claimWork waits for work (default 1 s).
	LongPoll time.Duration
}

// Request records one authenticated call the fake served.
type Request struct {
	Method, Path string
	// ClientID is the Hawk id ("" for anonymous requests).
	ClientID string
	// AuthorizedScopes is the ext's authorizedScopes (nil if absent).
	AuthorizedScopes []string
	// HasCertificate tells whether the ext carried a certificate.
	HasCertificate bool
	// Status is the HTTP status the fake answered.
	Status int
	// Time is when the request arrived.
	Time time.Time
}

// Artifact is an artifact as the fake stores it.
type Artifact struct {
	tcclient.CreateArtifactRequest
	// Name is the artifact name.
	Name string
	// Content is the uploaded body (s3 only), as sent (possibly gzipped).
	Content []byte
	// ContentEncoding is the Content-Encoding of the upload.
	ContentEncoding string
	// UploadContentType is the Content-Type header of the upload.
	UploadContentType string
	// Uploaded tells whether bytes were PUT.
	Uploaded bool
	// CreatedBy is the Hawk id that created the artifact.
	CreatedBy string
}

// Body returns the artifact content, gunzipped when uploaded with
// Content-Encoding gzip.
func (a *Artifact) Body() ([]byte, error) {
	if a.ContentEncoding != "gzip" {
		return a.Content, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(a.Content))
	if err != nil {
		return nil, fmt.Errorf("gunzipping %s: %w", a.Name, err)
	}
	defer zr.Close()
	return io.ReadAll(zr)
}

type client struct {
	token   string
	scopes  []string
	expires time.Time // zero = never
}

type task struct {
	def       tcclient.TaskDefinition
	status    tcclient.TaskStatus
	artifacts map[int]map[string]*Artifact
	// claimClient is the latest credential clientId issued per run.
	resolvedAt map[int]time.Time
}

// Server is the fake queue. Its exported methods are safe for concurrent
// use and meant for test set-up and assertions.
type Server struct {
	*httptest.Server
	opts Options

	mu       sync.Mutex
	clients  map[string]*client
	tasks    map[string]*task
	pending  []string // taskIds with a pending last run, FIFO
	requests []Request
	blobs    map[string]*Artifact
	faults   map[string][]int
	wake     chan struct{}
}

// New starts a fake queue; close it with Close. RootURL is Server.URL.
func New(opts Options) *Server {
	if opts.ClaimTimeout <= 0 {
		opts.ClaimTimeout = 20 * time.Second
	}
	if opts.LongPoll <= 0 {
		opts.LongPoll = time.Second
	}
	s := &Server{
		opts:    opts,
		clients: map[string]*client{},
		tasks:   map[string]*task{},
		blobs:   map[string]*Artifact{},
		faults:  map[string][]int{},
		wake:    make(chan struct{}),
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// AddClient registers permanent credentials with the given scopes and
// returns them.
func (s *Server) AddClient(clientID string, scopes ...string) *tcclient.Credentials {
	tok := randomToken()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients[clientID] = &client{token: tok, scopes: scopes}
	return &tcclient.Credentials{ClientID: clientID, AccessToken: tok}
}

// Client returns a tcclient.Client for the fake signed with creds, with
// fast retries.
func (s *Server) Client(creds *tcclient.Credentials) *tcclient.Client {
	return &tcclient.Client{RootURL: s.URL, Credentials: creds, RetryDelay: 5 * time.Millisecond}
}

// InjectFault makes the next len(statuses) calls of the named API method
// (e.g. "reclaimTask", "claimWork", "createArtifact", "reportCompleted")
// fail with the given statuses, in order.
func (s *Server) InjectFault(method string, statuses ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[method] = append(s.faults[method], statuses...)
}

// Requests returns a copy of every request served so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Status returns a copy of a task's status.
func (s *Server) Status(taskID string) (tcclient.TaskStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[taskID]
	if !ok {
		return tcclient.TaskStatus{}, false
	}
	st := t.status
	st.Runs = slices.Clone(st.Runs)
	return st, true
}

// Artifacts returns a copy of a run's artifacts by name.
func (s *Server) Artifacts(taskID string, runID int) map[string]*Artifact {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]*Artifact{}
	if t, ok := s.tasks[taskID]; ok {
		for name, a := range t.artifacts[runID] {
			cp := *a
			cp.Content = slices.Clone(a.Content)
			out[name] = &cp
		}
	}
	return out
}

// Cancel cancels a task as cancelTask does (without authorization).
func (s *Server) Cancel(taskID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.tasks[taskID]; ok {
		s.cancelLocked(t)
	}
}

// ---------------------------------------------------------------------------
// HTTP plumbing

type apiError struct {
	status int
	code   string
	msg    string
}

func fail(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

type caller struct {
	clientID string
	scopes   []string // effective scopes; nil for anonymous
}

func (c *caller) satisfies(required string) bool {
	for _, have := range c.scopes {
		if have == required || strings.HasSuffix(have, "*") && strings.HasPrefix(required, strings.TrimSuffix(have, "*")) {
			return true
		}
	}
	return false
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	status := http.StatusOK
	if strings.HasPrefix(r.URL.Path, "/blobs/") {
		s.serveBlob(w, r)
		return
	}
	rec := Request{Method: r.Method, Path: r.URL.EscapedPath(), Time: time.Now()}
	c, aerr := s.authenticate(r, &rec)
	var out any
	var headers map[string]string
	if aerr == nil {
		status, out, headers, aerr = s.route(r, c)
	}
	if aerr != nil {
		status = aerr.status
		out = map[string]string{"code": aerr.code, "message": aerr.msg}
	}
	rec.Status = status
	s.mu.Lock()
	s.requests = append(s.requests, rec)
	s.mu.Unlock()
	for k, v := range headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if aerr != nil && aerr.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", "hawk")
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(out)
}

// authenticate verifies the Hawk header (if any) and computes the caller's
// effective scopes.
func (s *Server) authenticate(r *http.Request, rec *Request) (*caller, *apiError) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return &caller{}, nil
	}
	attrs, err := parseHawk(h)
	if err != nil {
		return nil, fail(401, "AuthenticationFailed", "%v", err)
	}
	id := attrs["id"]
	rec.ClientID = id
	s.mu.Lock()
	cl, ok := s.clients[id]
	s.mu.Unlock()
	if !ok {
		return nil, fail(401, "AuthenticationFailed", "unknown client %q", id)
	}
	if !cl.expires.IsZero() && time.Now().After(cl.expires) {
		return nil, fail(401, "AuthenticationFailed", "credentials of %q expired", id)
	}
	ts, err := strconv.ParseInt(attrs["ts"], 10, 64)
	if err != nil {
		return nil, fail(401, "AuthenticationFailed", "bad ts")
	}
	rawURL := "http://" + r.Host + r.URL.RequestURI()
	want, err := hawk.RequestHeader(hawk.Credentials{ID: id, Key: cl.token}, r.Method, rawURL,
		time.Unix(ts, 0), attrs["nonce"], attrs["hash"], attrs["ext"])
	if err != nil {
		return nil, fail(401, "AuthenticationFailed", "recomputing mac: %v", err)
	}
	wantAttrs, _ := parseHawk(want)
	if subtle.ConstantTimeCompare([]byte(wantAttrs["mac"]), []byte(attrs["mac"])) != 1 {
		return nil, fail(401, "AuthenticationFailed", "bad mac")
	}
	scopes := cl.scopes
	if ext := attrs["ext"]; ext != "" {
		raw, err := base64.StdEncoding.DecodeString(ext)
		if err != nil {
			return nil, fail(401, "AuthenticationFailed", "ext is not base64: %v", err)
		}
		var parsed struct {
			Certificate      json.RawMessage `json:"certificate"`
			AuthorizedScopes *[]string       `json:"authorizedScopes"`
		}
		if err := json.Unmarshal(raw, &parsed); err != nil {
			return nil, fail(401, "AuthenticationFailed", "ext is not JSON: %v", err)
		}
		rec.HasCertificate = len(parsed.Certificate) > 0
		if parsed.AuthorizedScopes != nil {
			rec.AuthorizedScopes = *parsed.AuthorizedScopes
			// Restrict to scopes both held and authorized: a held scope
			// satisfies an authorized one, which is then kept.
			held := &caller{scopes: cl.scopes}
			var eff []string
			for _, a := range *parsed.AuthorizedScopes {
				if held.satisfies(a) {
					eff = append(eff, a)
				}
			}
			scopes = eff
		}
	}
	return &caller{clientID: id, scopes: scopes}, nil
}

func parseHawk(h string) (map[string]string, error) {
	rest, ok := strings.CutPrefix(h, "Hawk ")
	if !ok {
		return nil, fmt.Errorf("not a Hawk header")
	}
	out := map[string]string{}
	for rest = strings.TrimSpace(rest); rest != ""; {
		key, after, ok := strings.Cut(rest, `="`)
		if !ok {
			return nil, fmt.Errorf("malformed Hawk header")
		}
		val, after2, ok := strings.Cut(after, `"`)
		if !ok {
			return nil, fmt.Errorf("malformed Hawk header")
		}
		out[strings.TrimSpace(key)] = val
		rest = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(after2), ","))
	}
	return out, nil
}

func (s *Server) takeFault(method string) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.faults[method]
	if len(q) == 0 {
		return nil
	}
	status := q[0]
	s.faults[method] = q[1:]
	code := map[int]string{401: "AuthenticationFailed", 403: "InsufficientScopes", 404: "ResourceNotFound",
		409: "RequestConflict"}[status]
	if code == "" {
		code = "InternalServerError"
	}
	return fail(status, code, "injected fault for %s", method)
}

func (s *Server) route(r *http.Request, c *caller) (int, any, map[string]string, *apiError) {
	path, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/queue/v1/")
	if !ok {
		return 0, nil, nil, fail(404, "ResourceNotFound", "no such service")
	}
	var segs []string
	for _, p := range strings.Split(path, "/") {
		u, err := url.PathUnescape(p)
		if err != nil {
			return 0, nil, nil, fail(400, "InvalidRequestArguments", "bad escape")
		}
		segs = append(segs, u)
	}
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(io.LimitReader(r.Body, 10<<20))
	}
	m, n := r.Method, len(segs)
	call := func(name string, f func() (any, *apiError)) (int, any, map[string]string, *apiError) {
		if e := s.takeFault(name); e != nil {
			return 0, nil, nil, e
		}
		out, e := f()
		return 200, out, nil, e
	}
	switch {
	case m == "GET" && n == 1 && segs[0] == "ping":
		return 200, map[string]any{"alive": true}, nil, nil
	case m == "POST" && n >= 2 && segs[0] == "claim-work":
		return call("claimWork", func() (any, *apiError) { return s.claimWork(r, c, strings.Join(segs[1:], "/"), body) })
	case n >= 2 && segs[0] == "task":
		taskID := segs[1]
		switch {
		case n == 2 && m == "PUT":
			return call("createTask", func() (any, *apiError) { return s.createTask(c, taskID, body) })
		case n == 2 && m == "GET":
			return call("task", func() (any, *apiError) { return s.getTask(c, taskID) })
		case n == 3 && m == "GET" && segs[2] == "status":
			return call("status", func() (any, *apiError) { return s.getStatus(c, taskID) })
		case n == 3 && m == "POST" && segs[2] == "cancel":
			return call("cancelTask", func() (any, *apiError) { return s.cancelTask(c, taskID) })
		case n == 3 && m == "POST" && segs[2] == "rerun":
			return call("rerunTask", func() (any, *apiError) { return s.rerunTask(c, taskID) })
		case n >= 4 && m == "GET" && segs[2] == "artifacts":
			if e := s.takeFault("getLatestArtifact"); e != nil {
				return 0, nil, nil, e
			}
			return s.getArtifact(c, taskID, -1, strings.Join(segs[3:], "/"))
		case n >= 4 && segs[2] == "runs":
			runID, err := strconv.Atoi(segs[3])
			if err != nil {
				return 0, nil, nil, fail(400, "InvalidRequestArguments", "bad runId")
			}
			switch {
			case n == 5 && m == "POST" && segs[4] == "claim":
				return call("claimTask", func() (any, *apiError) { return s.claimTask(c, taskID, runID, body) })
			case n == 5 && m == "POST" && segs[4] == "reclaim":
				return call("reclaimTask", func() (any, *apiError) { return s.reclaimTask(c, taskID, runID) })
			case n == 5 && m == "POST" && segs[4] == "completed":
				return call("reportCompleted", func() (any, *apiError) { return s.resolve(c, taskID, runID, tcclient.StateCompleted, "completed") })
			case n == 5 && m == "POST" && segs[4] == "failed":
				return call("reportFailed", func() (any, *apiError) { return s.resolve(c, taskID, runID, tcclient.StateFailed, "failed") })
			case n == 5 && m == "POST" && segs[4] == "exception":
				return call("reportException", func() (any, *apiError) {
					var in tcclient.ExceptionRequest
					if err := json.Unmarshal(body, &in); err != nil {
						return nil, fail(400, "MalformedPayload", "%v", err)
					}
					return s.resolve(c, taskID, runID, tcclient.StateException, in.Reason)
				})
			case n == 5 && m == "GET" && segs[4] == "artifacts":
				return call("listArtifacts", func() (any, *apiError) { return s.listArtifacts(c, taskID, runID) })
			case n >= 6 && m == "POST" && segs[4] == "artifacts":
				return call("createArtifact", func() (any, *apiError) {
					return s.createArtifact(r, c, taskID, runID, strings.Join(segs[5:], "/"), body)
				})
			case n >= 6 && m == "GET" && segs[4] == "artifacts":
				if e := s.takeFault("getArtifact"); e != nil {
					return 0, nil, nil, e
				}
				return s.getArtifact(c, taskID, runID, strings.Join(segs[5:], "/"))
			}
		}
	}
	return 0, nil, nil, fail(404, "ResourceNotFound", "no route for %s %s", m, r.URL.EscapedPath())
}

func requireScope(c *caller, scope string) *apiError {
	if c.satisfies(scope) {
		return nil
	}
	return fail(403, "InsufficientScopes", "client %q lacks scope %s", c.clientID, scope)
}

func randomToken() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ---------------------------------------------------------------------------
// Endpoints

func (s *Server) createTask(c *caller, taskID string, body []byte) (any, *apiError) {
	var def tcclient.TaskDefinition
	if err := json.Unmarshal(body, &def); err != nil {
		return nil, fail(400, "InputValidationError", "%v", err)
	}
	if def.TaskQueueID == "" {
		def.TaskQueueID = def.ProvisionerID + "/" + def.WorkerType
	}
	def.ProvisionerID, def.WorkerType, _ = strings.Cut(def.TaskQueueID, "/")
	if def.ProvisionerID == "" || def.WorkerType == "" {
		return nil, fail(400, "InputError", "no task queue")
	}
	for _, sc := range def.Scopes {
		if e := requireScope(c, sc); e != nil {
			return nil, e
		}
	}
	if e := requireScope(c, "queue:create-task:lowest:"+def.TaskQueueID); e != nil {
		return nil, e
	}
	if def.Deadline.IsZero() || def.Created.IsZero() {
		return nil, fail(400, "InputValidationError", "created and deadline are required")
	}
	if def.Expires.IsZero() {
		def.Expires = tcclient.NewTime(def.Deadline.AddDate(1, 0, 0))
	}
	if def.SchedulerID == "" {
		def.SchedulerID = "-"
	}
	if def.ProjectID == "" {
		def.ProjectID = "none"
	}
	if def.TaskGroupID == "" {
		def.TaskGroupID = taskID
	}
	if def.Retries == nil {
		five := 5
		def.Retries = &five
	}
	if def.Priority == "" {
		def.Priority = "lowest"
	}
	if def.Requires == "" {
		def.Requires = "all-completed"
	}
	if def.Dependencies == nil {
		def.Dependencies = []string{}
	}
	if def.Scopes == nil {
		def.Scopes = []string{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if existing, ok := s.tasks[taskID]; ok {
		a, _ := json.Marshal(existing.def)
		b, _ := json.Marshal(def)
		if !bytes.Equal(a, b) {
			return nil, fail(409, "RequestConflict", "task %s exists with a different definition", taskID)
		}
		return tcclient.StatusResponse{Status: existing.statusCopy()}, nil
	}
	now := tcclient.NewTime(time.Now())
	t := &task{
		def: def,
		status: tcclient.TaskStatus{
			TaskID: taskID, ProvisionerID: def.ProvisionerID, WorkerType: def.WorkerType,
			TaskQueueID: def.TaskQueueID, SchedulerID: def.SchedulerID, ProjectID: def.ProjectID,
			TaskGroupID: def.TaskGroupID, Deadline: def.Deadline, Expires: def.Expires,
			RetriesLeft: *def.Retries, State: tcclient.StatePending,
			Runs: []tcclient.Run{{RunID: 0, State: tcclient.StatePending, ReasonCreated: "scheduled", Scheduled: now}},
		},
		artifacts:  map[int]map[string]*Artifact{},
		resolvedAt: map[int]time.Time{},
	}
	s.tasks[taskID] = t
	s.pushPendingLocked(taskID)
	return tcclient.StatusResponse{Status: t.statusCopy()}, nil
}

func (s *Server) pushPendingLocked(taskID string) {
	s.pending = append(s.pending, taskID)
	close(s.wake)
	s.wake = make(chan struct{})
}

func (s *Server) getTask(c *caller, taskID string) (any, *apiError) {
	if e := requireScope(c, "queue:get-task:"+taskID); e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[taskID]
	if !ok {
		return nil, fail(404, "ResourceNotFound", "task %s not found", taskID)
	}
	return t.def, nil
}

func (s *Server) getStatus(c *caller, taskID string) (any, *apiError) {
	if e := requireScope(c, "queue:status:"+taskID); e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[taskID]
	if !ok {
		return nil, fail(404, "ResourceNotFound", "task %s not found", taskID)
	}
	return tcclient.StatusResponse{Status: t.statusCopy()}, nil
}

// issueCredentialsLocked creates the temporary task credentials for a claim.
func (s *Server) issueCredentialsLocked(t *task, runID int, takenUntil time.Time) tcclient.Credentials {
	run := t.status.Runs[runID]
	id := fmt.Sprintf("task-client/%s/%d/on/%s/%s/until/%d", t.status.TaskID, runID,
		run.WorkerGroup, run.WorkerID, takenUntil.Unix())
	scopes := append([]string{
		fmt.Sprintf("queue:reclaim-task:%s/%d", t.status.TaskID, runID),
		fmt.Sprintf("queue:resolve-task:%s/%d", t.status.TaskID, runID),
		fmt.Sprintf("queue:create-artifact:%s/%d", t.status.TaskID, runID),
	}, t.def.Scopes...)
	tok := randomToken()
	// The fake accepts the credentials a little beyond takenUntil, like the
	// real queue's auth tolerates clock skew.
	s.clients[id] = &client{token: tok, scopes: scopes, expires: takenUntil.Add(time.Minute)}
	cert, _ := json.Marshal(map[string]any{
		"version": 1, "scopes": scopes, "start": time.Now().UnixMilli(), "expiry": takenUntil.UnixMilli(),
		"seed": randomToken(), "signature": "fake", "issuer": "static/taskcluster/queue",
	})
	return tcclient.Credentials{ClientID: id, AccessToken: tok, Certificate: string(cert)}
}

func (s *Server) claimLocked(t *task, runID int, workerGroup, workerID string) tcclient.TaskClaim {
	now := time.Now()
	takenUntil := tcclient.NewTime(now.Add(s.opts.ClaimTimeout))
	run := &t.status.Runs[runID]
	run.State = tcclient.StateRunning
	run.WorkerGroup, run.WorkerID = workerGroup, workerID
	run.TakenUntil = takenUntil
	run.Started = tcclient.NewTime(now)
	t.status.State = tcclient.StateRunning
	s.pending = slices.DeleteFunc(s.pending, func(id string) bool { return id == t.status.TaskID })
	status := t.status
	status.Runs = slices.Clone(status.Runs)
	return tcclient.TaskClaim{
		Status: status, RunID: runID, WorkerGroup: workerGroup, WorkerID: workerID,
		TakenUntil: takenUntil, Task: t.def, Credentials: s.issueCredentialsLocked(t, runID, takenUntil.Time),
	}
}

func (s *Server) claimWork(r *http.Request, c *caller, taskQueueID string, body []byte) (any, *apiError) {
	var in tcclient.ClaimWorkRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fail(400, "MalformedPayload", "%v", err)
	}
	if in.Tasks < 1 || in.Tasks > 32 {
		return nil, fail(400, "InputValidationError", "tasks must be 1..32, got %d", in.Tasks)
	}
	if in.WorkerGroup == "" || in.WorkerID == "" {
		return nil, fail(400, "InputValidationError", "workerGroup and workerId are required")
	}
	if e := requireScope(c, "queue:claim-work:"+taskQueueID); e != nil {
		return nil, e
	}
	if e := requireScope(c, "queue:worker-id:"+in.WorkerGroup+"/"+in.WorkerID); e != nil {
		return nil, e
	}
	deadline := time.NewTimer(s.opts.LongPoll)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		var claims []tcclient.TaskClaim
		for _, id := range slices.Clone(s.pending) {
			if len(claims) >= in.Tasks {
				break
			}
			t := s.tasks[id]
			last := len(t.status.Runs) - 1
			if t.status.TaskQueueID != taskQueueID || t.status.Runs[last].State != tcclient.StatePending ||
				time.Now().After(t.def.Deadline.Time) {
				continue
			}
			claims = append(claims, s.claimLocked(t, last, in.WorkerGroup, in.WorkerID))
		}
		wake := s.wake
		s.mu.Unlock()
		if len(claims) > 0 {
			return tcclient.ClaimWorkResponse{Tasks: claims}, nil
		}
		select {
		case <-wake:
		case <-deadline.C:
			return tcclient.ClaimWorkResponse{Tasks: []tcclient.TaskClaim{}}, nil
		case <-r.Context().Done():
			return tcclient.ClaimWorkResponse{Tasks: []tcclient.TaskClaim{}}, nil
		}
	}
}

func (s *Server) lookupRunLocked(taskID string, runID int) (*task, *apiError) {
	t, ok := s.tasks[taskID]
	if !ok {
		return nil, fail(404, "ResourceNotFound", "task %s not found", taskID)
	}
	if runID < 0 || runID >= len(t.status.Runs) {
		return nil, fail(404, "ResourceNotFound", "run %d of task %s not found", runID, taskID)
	}
	return t, nil
}

func (s *Server) claimTask(c *caller, taskID string, runID int, body []byte) (any, *apiError) {
	var in tcclient.ClaimTaskRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fail(400, "MalformedPayload", "%v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[taskID]
	if !ok {
		return nil, fail(404, "ResourceNotFound", "task %s not found", taskID)
	}
	if e := requireScope(c, "queue:claim-task:"+t.status.TaskQueueID); e != nil {
		return nil, e
	}
	if e := requireScope(c, "queue:worker-id:"+in.WorkerGroup+"/"+in.WorkerID); e != nil {
		return nil, e
	}
	if time.Now().After(t.def.Deadline.Time) {
		return nil, fail(409, "RequestConflict", "deadline passed")
	}
	if _, e := s.lookupRunLocked(taskID, runID); e != nil {
		return nil, e
	}
	if runID != len(t.status.Runs)-1 || t.status.Runs[runID].State != tcclient.StatePending {
		return nil, fail(409, "RequestConflict", "run %d is not pending", runID)
	}
	return s.claimLocked(t, runID, in.WorkerGroup, in.WorkerID), nil
}

func (s *Server) reclaimTask(c *caller, taskID string, runID int) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, e := s.lookupRunLocked(taskID, runID)
	if e != nil {
		return nil, e
	}
	if e := requireScope(c, fmt.Sprintf("queue:reclaim-task:%s/%d", taskID, runID)); e != nil {
		return nil, e
	}
	if time.Now().After(t.def.Deadline.Time) {
		return nil, fail(409, "RequestConflict", "deadline passed")
	}
	run := &t.status.Runs[runID]
	if runID != len(t.status.Runs)-1 || run.State != tcclient.StateRunning {
		return nil, fail(409, "RequestConflict", "run %d of %s is %s", runID, taskID, run.State)
	}
	takenUntil := tcclient.NewTime(time.Now().Add(s.opts.ClaimTimeout))
	run.TakenUntil = takenUntil
	status := t.status
	status.Runs = slices.Clone(status.Runs)
	return tcclient.TaskReclaim{
		Status: status, RunID: runID, WorkerGroup: run.WorkerGroup, WorkerID: run.WorkerID,
		TakenUntil: takenUntil, Credentials: s.issueCredentialsLocked(t, runID, takenUntil.Time),
	}, nil
}

var retryReasons = map[string]string{"worker-shutdown": "retry", "intermittent-task": "task-retry"}

var validReasons = []string{"worker-shutdown", "malformed-payload", "resource-unavailable",
	"internal-error", "intermittent-task", "superseded"}

func (s *Server) resolve(c *caller, taskID string, runID int, state, reason string) (any, *apiError) {
	if state == tcclient.StateException && !slices.Contains(validReasons, reason) {
		return nil, fail(400, "InputValidationError", "invalid reason %q", reason)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, e := s.lookupRunLocked(taskID, runID)
	if e != nil {
		return nil, e
	}
	if e := requireScope(c, fmt.Sprintf("queue:resolve-task:%s/%d", taskID, runID)); e != nil {
		return nil, e
	}
	run := &t.status.Runs[runID]
	if run.State == state && run.ReasonResolved == reason {
		return tcclient.StatusResponse{Status: t.statusCopy()}, nil
	}
	if run.State != tcclient.StateRunning {
		return nil, fail(409, "RequestConflict", "run %d of %s is %s/%s", runID, taskID, run.State, run.ReasonResolved)
	}
	now := tcclient.NewTime(time.Now())
	run.State, run.ReasonResolved, run.Resolved = state, reason, now
	t.resolvedAt[runID] = now.Time
	t.status.State = state
	if rc, ok := retryReasons[reason]; ok && state == tcclient.StateException && t.status.RetriesLeft > 0 {
		t.status.RetriesLeft--
		t.status.Runs = append(t.status.Runs, tcclient.Run{
			RunID: len(t.status.Runs), State: tcclient.StatePending, ReasonCreated: rc, Scheduled: now,
		})
		t.status.State = tcclient.StatePending
		s.pushPendingLocked(taskID)
	}
	return tcclient.StatusResponse{Status: t.statusCopy()}, nil
}

func (s *Server) cancelLocked(t *task) {
	last := &t.status.Runs[len(t.status.Runs)-1]
	if last.State != tcclient.StatePending && last.State != tcclient.StateRunning {
		return
	}
	now := tcclient.NewTime(time.Now())
	last.State, last.ReasonResolved, last.Resolved = tcclient.StateException, "canceled", now
	t.resolvedAt[last.RunID] = now.Time
	t.status.State = tcclient.StateException
	s.pending = slices.DeleteFunc(s.pending, func(id string) bool { return id == t.status.TaskID })
}

func (s *Server) cancelTask(c *caller, taskID string) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[taskID]
	if !ok {
		return nil, fail(404, "ResourceNotFound", "task %s not found", taskID)
	}
	if e := requireScope(c, "queue:cancel-task:"+t.def.SchedulerID+"/"+t.def.TaskGroupID+"/"+taskID); e != nil {
		return nil, e
	}
	s.cancelLocked(t)
	return tcclient.StatusResponse{Status: t.statusCopy()}, nil
}

func (s *Server) rerunTask(c *caller, taskID string) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[taskID]
	if !ok {
		return nil, fail(404, "ResourceNotFound", "task %s not found", taskID)
	}
	if e := requireScope(c, "queue:rerun-task:"+t.def.SchedulerID+"/"+t.def.TaskGroupID+"/"+taskID); e != nil {
		return nil, e
	}
	last := t.status.Runs[len(t.status.Runs)-1]
	if last.State == tcclient.StatePending || last.State == tcclient.StateRunning {
		return tcclient.StatusResponse{Status: t.statusCopy()}, nil
	}
	t.status.Runs = append(t.status.Runs, tcclient.Run{
		RunID: len(t.status.Runs), State: tcclient.StatePending, ReasonCreated: "rerun", Scheduled: tcclient.NewTime(time.Now()),
	})
	t.status.State = tcclient.StatePending
	s.pushPendingLocked(taskID)
	return tcclient.StatusResponse{Status: t.statusCopy()}, nil
}

func (s *Server) createArtifact(r *http.Request, c *caller, taskID string, runID int, name string, body []byte) (any, *apiError) {
	if e := requireScope(c, fmt.Sprintf("queue:create-artifact:%s/%d", taskID, runID)); e != nil {
		return nil, e
	}
	var in tcclient.CreateArtifactRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fail(400, "MalformedPayload", "%v", err)
	}
	if in.Expires.IsZero() || in.Expires.Before(time.Now().Add(-15*time.Minute)) {
		return nil, fail(400, "InputError", "expires missing or in the past")
	}
	switch in.StorageType {
	case tcclient.StorageS3:
		if in.ContentType == "" {
			return nil, fail(400, "InputValidationError", "contentType required")
		}
	case tcclient.StorageReference:
		if in.URL == "" || in.ContentType == "" {
			return nil, fail(400, "InputValidationError", "url and contentType required")
		}
	case tcclient.StorageLink:
		if in.Artifact == "" {
			return nil, fail(400, "InputValidationError", "artifact required")
		}
	case tcclient.StorageError:
		if in.Reason == "" || in.Message == "" {
			return nil, fail(400, "InputValidationError", "reason and message required")
		}
	default:
		return nil, fail(400, "InputValidationError", "unsupported storageType %q", in.StorageType)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[taskID]
	if !ok || runID < 0 || runID >= len(t.status.Runs) || t.status.Runs[runID].WorkerGroup == "" {
		return nil, fail(400, "InputError", "task %s run %d unknown or never claimed", taskID, runID)
	}
	if in.Expires.After(t.def.Expires.Time) {
		return nil, fail(400, "InputError", "artifact expires after the task")
	}
	run := t.status.Runs[runID]
	if run.State != tcclient.StateRunning &&
		!(run.State == tcclient.StateException && time.Since(t.resolvedAt[runID]) < 25*time.Minute) {
		return nil, fail(409, "RequestConflict", "run %d of %s is %s; no artifacts accepted", runID, taskID, run.State)
	}
	if t.artifacts[runID] == nil {
		t.artifacts[runID] = map[string]*Artifact{}
	}
	if prev, ok := t.artifacts[runID][name]; ok {
		compatible := !in.Expires.Before(prev.Expires.Time) &&
			(in.StorageType == tcclient.StorageLink || in.StorageType == tcclient.StorageError || in.ContentType == prev.ContentType) &&
			(in.StorageType == prev.StorageType || prev.StorageType == tcclient.StorageReference &&
				(in.StorageType == tcclient.StorageLink || in.StorageType == tcclient.StorageError))
		if !compatible {
			return nil, fail(409, "RequestConflict", "artifact %s exists with different properties", name)
		}
	}
	a := &Artifact{CreateArtifactRequest: in, Name: name, CreatedBy: c.clientID}
	if a.ContentType == "" {
		a.ContentType = "application/binary"
	}
	t.artifacts[runID][name] = a
	switch in.StorageType {
	case tcclient.StorageS3:
		key := randomToken()
		s.blobs[key] = a
		return tcclient.CreateArtifactResponse{
			StorageType: "s3", PutURL: s.URL + "/blobs/" + key + "?signature=secret",
			Expires: tcclient.NewTime(time.Now().Add(45 * time.Minute)), ContentType: in.ContentType,
		}, nil
	default:
		return map[string]string{"storageType": in.StorageType}, nil
	}
}

func (s *Server) serveBlob(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, "/blobs/")
	s.mu.Lock()
	a, ok := s.blobs[key]
	s.mu.Unlock()
	if !ok {
		http.Error(w, "no such blob", http.StatusNotFound)
		return
	}
	switch r.Method {
	case http.MethodPut:
		if e := s.takeFault("putBlob"); e != nil {
			http.Error(w, e.msg, e.status)
			return
		}
		data, err := io.ReadAll(r.Body)
		if err != nil || int64(len(data)) != r.ContentLength {
			http.Error(w, "short body", http.StatusBadRequest)
			return
		}
		if r.Header.Get("Content-Type") != a.ContentType {
			http.Error(w, "content-type mismatch", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		a.Content, a.Uploaded = data, true
		a.ContentEncoding = r.Header.Get("Content-Encoding")
		a.UploadContentType = r.Header.Get("Content-Type")
		s.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	case http.MethodGet:
		s.mu.Lock()
		data, enc, ct := a.Content, a.ContentEncoding, a.ContentType
		s.mu.Unlock()
		if enc != "" {
			w.Header().Set("Content-Encoding", enc)
		}
		w.Header().Set("Content-Type", ct)
		_, _ = w.Write(data)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (s *Server) getArtifact(c *caller, taskID string, runID int, name string) (int, any, map[string]string, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[taskID]
	if !ok {
		return 0, nil, nil, fail(404, "ResourceNotFound", "task %s not found", taskID)
	}
	if runID < 0 {
		runID = len(t.status.Runs) - 1
	}
	seen := map[string]bool{}
	for {
		if !strings.HasPrefix(name, "public/") {
			if e := requireScope(c, "queue:get-artifact:"+name); e != nil {
				return 0, nil, nil, e
			}
		}
		if seen[name] {
			return 0, nil, nil, fail(400, "InputError", "link cycle")
		}
		seen[name] = true
		a, ok := t.artifacts[runID][name]
		if !ok {
			return 0, nil, nil, fail(404, "ResourceNotFound", "artifact %s not found", name)
		}
		hdr := map[string]string{"x-taskcluster-artifact-storage-type": a.StorageType}
		switch a.StorageType {
		case tcclient.StorageLink:
			name = a.Artifact
			continue
		case tcclient.StorageError:
			return 424, map[string]string{"reason": a.Reason, "message": a.Message}, hdr, nil
		case tcclient.StorageReference:
			hdr["Location"] = a.URL
			return 303, map[string]string{"storageType": a.StorageType, "url": a.URL}, hdr, nil
		default:
			var key string
			for k, b := range s.blobs {
				if b == a {
					key = k
				}
			}
			u := s.URL + "/blobs/" + key
			hdr["Location"] = u
			return 303, map[string]string{"storageType": a.StorageType, "url": u}, hdr, nil
		}
	}
}

func (s *Server) listArtifacts(c *caller, taskID string, runID int) (any, *apiError) {
	if e := requireScope(c, fmt.Sprintf("queue:list-artifacts:%s:%d", taskID, runID)); e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, e := s.lookupRunLocked(taskID, runID); e != nil {
		return nil, e
	}
	var names []string
	for n := range s.tasks[taskID].artifacts[runID] {
		names = append(names, n)
	}
	sort.Strings(names)
	out := tcclient.ListArtifactsResponse{Artifacts: []tcclient.Artifact{}}
	for _, n := range names {
		a := s.tasks[taskID].artifacts[runID][n]
		out.Artifacts = append(out.Artifacts, tcclient.Artifact{
			StorageType: a.StorageType, Name: n, Expires: a.Expires, ContentType: a.ContentType,
		})
	}
	return out, nil
}

// statusCopy returns the task's status with its own copy of the runs, so a
// reply encoded after the lock is released cannot race a later change.
func (t *task) statusCopy() tcclient.TaskStatus {
	st := t.status
	st.Runs = slices.Clone(st.Runs)
	return st
}
