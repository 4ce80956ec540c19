package superseder

import (
	"errors"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/slugid"
	"github.com/hopper-ci/hopper/internal/store"
)

// RoutePrefix is the task-route prefix by which tasks opt in to the built-in
// superseder: a task with route "coalesce.v1.<key>" is a candidate of lists
// for <key>.
const RoutePrefix = "coalesce.v1."

// DefaultMaxTasks is how many entries a built-in list holds at most (the
// worker's default superseding.maxTasks).
const DefaultMaxTasks = 32

// backlogScan bounds how many pending candidates one list request reads.
const backlogScan = 1000

// ServerOptions configure the built-in superseder endpoint.
type ServerOptions struct {
	// Store is the queue's store.
	Store store.Store
	// MaxTasks caps each list (default DefaultMaxTasks).
	MaxTasks int
	// DefaultAge and DefaultSize are the thresholds of the short form
	// /api/superseder/v1/list/<key> (zero: coalesce whenever another
	// same-key task is pending).
	DefaultAge  time.Duration
	DefaultSize int
}

// number is a path segment the reference service's int converter accepts.
var number = regexp.MustCompile(`^[0-9]+$`)

// Routes returns the built-in superseder's API routes for
// api.Options.Routes:
//
//	GET /api/superseder/v1/list/<age>/<size>/<key>?taskId=<taskId>
//	GET /api/superseder/v1/list/<key>?taskId=<taskId>   (server thresholds)
//
// Both answer {"supersedes": [...]} without authentication: they reveal
// only taskIds of tasks that opted in.
func Routes(opts ServerOptions) []api.Route {
	if opts.MaxTasks <= 0 {
		opts.MaxTasks = DefaultMaxTasks
	}
	return []api.Route{
		{
			Name: "supersederList", Method: http.MethodGet,
			Paths: []string{"/api/superseder/v1/list/{age}/{size}/{key}"},
			Query: []string{"taskId"},
			Handle: func(c *api.Call) (any, error) {
				age, size, ok := thresholds(c.Params["age"], c.Params["size"])
				if !ok {
					return nil, api.NotFoundf("age and size must be non-negative integers (got %q and %q)", c.Params["age"], c.Params["size"])
				}
				return list(c, opts, age, size)
			},
		},
		{
			Name: "supersederListDefault", Method: http.MethodGet,
			Paths: []string{"/api/superseder/v1/list/{key}"},
			Query: []string{"taskId"},
			Handle: func(c *api.Call) (any, error) {
				return list(c, opts, opts.DefaultAge, opts.DefaultSize)
			},
		},
		{
			Name: "supersederPing", Method: http.MethodGet,
			Paths: []string{"/api/superseder/v1/ping"},
			Handle: func(*api.Call) (any, error) {
				return map[string]any{"alive": true}, nil
			},
		},
	}
}

// thresholds parses the age (seconds) and size path segments. Values too
// large to represent saturate: such thresholds are simply never exceeded.
func thresholds(ageParam, sizeParam string) (time.Duration, int, bool) {
	if !number.MatchString(ageParam) || !number.MatchString(sizeParam) {
		return 0, 0, false
	}
	age := time.Duration(math.MaxInt64)
	if secs, err := strconv.ParseInt(ageParam, 10, 64); err == nil && secs <= int64(math.MaxInt64/int64(time.Second)) {
		age = time.Duration(secs) * time.Second
	}
	size := math.MaxInt
	if n, err := strconv.ParseInt(sizeParam, 10, 64); err == nil && n <= math.MaxInt {
		size = int(n)
	}
	return age, size, true
}

// Answer is the body of a list reply.
type Answer struct {
	Supersedes []string `json:"supersedes"`
}

// list computes one answer; see the package documentation for the rule.
func list(c *api.Call, opts ServerOptions, age time.Duration, size int) (any, error) {
	taskID := c.R.URL.Query().Get("taskId")
	if taskID == "" {
		return nil, &api.Error{Code: api.CodeInvalidRequestArguments, Message: "query-string parameter taskId (the requesting task) is required"}
	}
	if !slugid.Valid(taskID) {
		return nil, &api.Error{Code: api.CodeInvalidRequestArguments, Message: "query-string parameter taskId is not a taskId"}
	}
	ctx := c.Context()
	requester, err := opts.Store.GetTask(ctx, taskID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.NotFoundf("Task `%s` not found", taskID)
	}
	if err != nil {
		return nil, err
	}
	empty := Answer{Supersedes: []string{}}
	route := RoutePrefix + c.Params["key"]
	if !slices.Contains(requester.Task.Routes, route) {
		// The requester did not opt in under this key.
		return empty, nil
	}
	pending, err := opts.Store.PendingWithRoute(ctx, requester.Task.TaskQueueID, route, c.Now, backlogScan)
	if err != nil {
		return nil, err
	}
	entries := []Candidate{{TaskID: taskID, Created: requester.Task.Created.Time, Arrived: arrival(requester)}}
	for _, p := range pending {
		if p.Task.TaskID != taskID {
			entries = append(entries, Candidate{TaskID: p.Task.TaskID, Created: p.Task.Task.Created.Time, Arrived: p.Inserted})
		}
	}
	ids, ok := Select(entries, taskID, c.Now, age, size, opts.MaxTasks)
	if !ok {
		return empty, nil
	}
	return Answer{Supersedes: ids}, nil
}

// arrival is when the task's current run was queued (its creation time if
// it has no run).
func arrival(t *queue.TaskState) time.Time {
	if r := t.LastRun(); r != nil {
		return r.Scheduled.Time
	}
	return t.Task.Created.Time
}

// Candidate is one task a built-in list may contain.
type Candidate struct {
	// TaskID identifies the task.
	TaskID string
	// Created is the task's creation time (the list order).
	Created time.Time
	// Arrived is when its current run was queued (the age threshold).
	Arrived time.Time
}

// Select applies the built-in superseder's rule to the candidates (the
// requester and the pending same-key tasks of its queue): when more than
// size of them exist AND the earliest arrival lies more than age before
// now, it answers them ascending by creation (ties by taskId), keeping the
// requester and the newest maxTasks−1 others; otherwise it answers nothing
// (ok false).
func Select(entries []Candidate, requester string, now time.Time, age time.Duration, size, maxTasks int) ([]string, bool) {
	if len(entries) == 0 || len(entries) <= size {
		return nil, false
	}
	oldest := entries[0].Arrived
	for _, e := range entries[1:] {
		if e.Arrived.Before(oldest) {
			oldest = e.Arrived
		}
	}
	if now.Sub(oldest) <= age {
		return nil, false
	}
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b Candidate) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.TaskID, b.TaskID)
	})
	// Keep the newest maxTasks−1 others plus the requester, in order.
	keepOthers := max(maxTasks-1, 0)
	var out []string
	for i := len(sorted) - 1; i >= 0; i-- {
		if sorted[i].TaskID == requester {
			out = append(out, sorted[i].TaskID)
			continue
		}
		if keepOthers > 0 {
			out = append(out, sorted[i].TaskID)
			keepOthers--
		}
	}
	slices.Reverse(out)
	return out, true
}
