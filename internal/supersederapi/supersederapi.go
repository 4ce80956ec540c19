// Package supersederapi serves the built-in superseder's API
// (/api/superseder/v1/…) from the queue's store; its rule is
// superseder.Select.
package supersederapi

import (
	"errors"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/superseder"
)

// backlogScan bounds how many pending candidates one list request reads.
const backlogScan = 1000

// BasePath is where the superseder's API lives below the root URL.
const BasePath = "/api/superseder/v1"

// Deps are what the built-in superseder endpoint needs.
type Deps struct {
	// Version is reported by __version__.
	Version string
	// Store reads the tasks.
	Store store.SupersederStore
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
func Routes(d Deps) []api.Route {
	if d.MaxTasks <= 0 {
		d.MaxTasks = superseder.DefaultMaxTasks
	}
	return append(api.ServiceHealthRoutes(BasePath, time.Now(), d.Version), []api.Route{
		{
			Name: "supersederList", Method: http.MethodGet,
			Paths: []string{BasePath + "/list/{age}/{size}/{key}"},
			Query: []string{"taskId"},
			Handle: func(c *api.Call) (any, error) {
				age, size, ok := thresholds(c.Params["age"], c.Params["size"])
				if !ok {
					return nil, api.NotFoundf("age and size must be non-negative integers (got %q and %q)", c.Params["age"], c.Params["size"])
				}
				return list(c, d, age, size)
			},
		},
		{
			Name: "supersederListDefault", Method: http.MethodGet,
			Paths: []string{BasePath + "/list/{key}"},
			Query: []string{"taskId"},
			Handle: func(c *api.Call) (any, error) {
				return list(c, d, d.DefaultAge, d.DefaultSize)
			},
		},
	}...)
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
func list(c *api.Call, d Deps, age time.Duration, size int) (any, error) {
	taskID := c.R.URL.Query().Get("taskId")
	if taskID == "" {
		return nil, &api.Error{Code: api.CodeInvalidRequestArguments, Message: "query-string parameter taskId (the requesting task) is required"}
	}
	if !ident.ValidSlugID(taskID) {
		return nil, &api.Error{Code: api.CodeInvalidRequestArguments, Message: "query-string parameter taskId is not a taskId"}
	}
	ctx := c.Context()
	requester, err := d.Store.GetTask(ctx, taskID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.NotFoundf("Task `%s` not found", taskID)
	}
	if err != nil {
		return nil, err
	}
	empty := Answer{Supersedes: []string{}}
	route := superseder.RoutePrefix + c.Params["key"]
	if !slices.Contains(requester.Task.Routes, route) {
		// The requester did not opt in under this key.
		return empty, nil
	}
	pending, err := d.Store.PendingWithRoute(ctx, store.PendingWithRouteParams{TaskQueueID: requester.Task.TaskQueueID, Route: route, Now: c.Now, Limit: backlogScan})
	if err != nil {
		return nil, err
	}
	entries := []superseder.Candidate{{TaskID: taskID, Created: requester.Task.Created.Time, Arrived: superseder.Arrival(requester)}}
	for _, p := range pending {
		if p.Task.TaskID != taskID {
			entries = append(entries, superseder.Candidate{TaskID: p.Task.TaskID, Created: p.Task.Task.Created.Time, Arrived: p.Inserted})
		}
	}
	ids, ok := superseder.Select(entries, taskID, c.Now, age, size, d.MaxTasks)
	if !ok {
		return empty, nil
	}
	return Answer{Supersedes: ids}, nil
}
