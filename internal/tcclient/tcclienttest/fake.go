// Package tcclienttest provides an in-memory fake of the parts of the
// Taskcluster Queue API that workers use, served over real HTTP with Hawk
// verification, so that the client and the worker can be tested without the
// real queue. It follows docs/contract/queue.md semantics for the endpoints it serves;
// it is deliberately small (no dependencies, no priorities, no paging).
package tcclienttest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

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

// statusCopy returns the task's status with its own copy of the runs, so a
// reply encoded after the lock is released cannot race a later change.
func (t *task) statusCopy() tcclient.TaskStatus {
	st := t.status
	st.Runs = slices.Clone(st.Runs)
	return st
}
