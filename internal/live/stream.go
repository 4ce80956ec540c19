package live

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/ident"
)

// BasePath is where the live feed's API lives below the root URL.
const BasePath = "/api/live/v1"

// StreamPath is where the event stream is served.
const StreamPath = BasePath + "/events"

// KeepAlive is how often an idle stream sends a comment line, so proxies
// keep the connection and a browser notices a dead one.
const KeepAlive = 15 * time.Second

// DroppedEvent is what a stream that fell too far behind receives last: an
// event named "dropped" asking it to reconnect and re-read; the stream
// then ends.
const DroppedEvent = "event: dropped\ndata: {\"reconnect\":true,\"reason\":\"the stream fell too far behind the events and missed some: reconnect and re-read\"}\n\n"

// StreamEvent is the data of one server-sent event: a queue event as its
// Pulse exchange carries it. Payload is null when the message was too
// large to relay between replicas; the task named by the routing key
// changed and should be re-read.
type StreamEvent struct {
	Exchange   string          `json:"exchange"`
	RoutingKey string          `json:"routingKey"`
	Payload    json.RawMessage `json:"payload"`
}

var (
	slugPattern      = ident.SlugID()
	taskQueuePattern = ident.TaskQueueID()
)

// Routes returns the stream's route, after the health routes, for
// api.Options.Routes.
//
// Query parameters narrow the stream, like a Pulse binding: taskId (that
// task's events), taskGroupId (its tasks' events and the group's own),
// taskQueueId (tasks of that queue). Each needs the scope to read what it
// selects (queue:status:<taskId>, queue:list-task-group:<taskGroupId>,
// queue:pending-list:<taskQueueId>); the whole stream needs
// queue:status:*. The anonymous role has these by default, and
// EventSource cannot send headers, so a signed-in browser passes a bewit.
func Routes(hub *Hub, version string) []api.Route {
	return append(api.ServiceHealthRoutes(BasePath, time.Now(), version), api.Route{
		Name:   "liveEvents",
		Method: http.MethodGet,
		Paths:  []string{StreamPath},
		Query:  []string{"taskId", "taskGroupId", "taskQueueId"},
		Handle: func(c *api.Call) (any, error) { return stream(c, hub) },
	})
}

// selection is what one stream asked for.
type selection struct {
	filter events.Filter
	scope  string
}

func parseSelection(q map[string][]string) (selection, error) {
	one := func(name string, pattern *regexp.Regexp) (string, error) {
		vals := q[name]
		switch {
		case len(vals) == 0:
			return "", nil
		case len(vals) > 1:
			return "", &api.Error{Code: api.CodeInvalidRequestArguments, Message: fmt.Sprintf("Query-string parameter %s is given %d times; give it once", name, len(vals))}
		case !pattern.MatchString(vals[0]):
			return "", &api.Error{Code: api.CodeInvalidRequestArguments, Message: fmt.Sprintf("Invalid query-string parameter %s: %q does not match %s", name, vals[0], pattern)}
		}
		return vals[0], nil
	}
	taskID, err := one("taskId", slugPattern)
	if err != nil {
		return selection{}, err
	}
	groupID, err := one("taskGroupId", slugPattern)
	if err != nil {
		return selection{}, err
	}
	queueID, err := one("taskQueueId", taskQueuePattern)
	if err != nil {
		return selection{}, err
	}
	given := 0
	for _, v := range []string{taskID, groupID, queueID} {
		if v != "" {
			given++
		}
	}
	if given > 1 {
		return selection{}, &api.Error{Code: api.CodeInvalidRequestArguments, Message: "Give at most one of taskId, taskGroupId and taskQueueId"}
	}
	// Task routing keys are primary.<taskId>.<runId>.<workerGroup>.
	// <workerId>.<provisionerId>.<workerType>.<schedulerId>.<taskGroupId>._
	// and group keys primary.<taskGroupId>.<schedulerId>._ .
	switch {
	case taskID != "":
		return selection{filter: events.Binding("", "primary."+taskID+".#"), scope: "queue:status:" + taskID}, nil
	case groupID != "":
		return selection{filter: events.AnyOf(
			events.Binding("", "primary.*.*.*.*.*.*.*."+groupID+".#"),
			events.Binding(events.ExchangeTaskGroupResolved, "primary."+groupID+".#"),
			events.Binding(events.ExchangeTaskGroupSealed, "primary."+groupID+".#"),
		), scope: "queue:list-task-group:" + groupID}, nil
	case queueID != "":
		prov, wt, _ := ident.SplitTaskQueueID(queueID)
		return selection{filter: events.Binding("", "primary.*.*.*.*."+prov+"."+wt+".#"), scope: "queue:pending-list:" + queueID}, nil
	}
	return selection{filter: nil, scope: "queue:status:*"}, nil
}

func stream(c *api.Call, hub *Hub) (any, error) {
	sel, err := parseSelection(c.R.URL.Query())
	if err != nil {
		return nil, err
	}
	// Authorize takes a scope-expression template, a JSON document.
	template, _ := json.Marshal(sel.scope)
	if err := c.Authorize(string(template), nil); err != nil {
		return nil, err
	}
	if _, ok := c.W.(http.Flusher); !ok {
		return nil, &api.Error{Code: api.CodeInternalServerError, Message: "this connection cannot stream"}
	}
	ended := &api.Response{Status: http.StatusOK, Streamed: true}
	cur := hub.subscribe()
	if cur == nil {
		return nil, &api.Error{Code: api.CodeServiceUnavailable, Message: "The server is shutting down; reconnect", RetryAfter: 2}
	}
	defer hub.unsubscribe()
	h := c.W.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	// Proxies such as nginx would otherwise buffer the stream.
	h.Set("X-Accel-Buffering", "no")
	// Not chunked: the stream ends when the connection closes, and each
	// write is one system call rather than three (a chunk's size, its
	// bytes, its end), which with 2,000 streams was most of their cost.
	h.Set("Transfer-Encoding", "identity")
	c.W.WriteHeader(http.StatusOK)
	// retry: how long a browser waits before reconnecting; the comment
	// tells it (and tests) the subscription is in place.
	w := streamWriter{w: c.W, rc: http.NewResponseController(c.W)}
	if w.write([]byte("retry: 2000\n: subscribed\n\n")) != nil {
		return ended, nil
	}
	keepAlive := time.NewTicker(KeepAlive)
	defer keepAlive.Stop()
	var (
		runs  []*run
		batch []byte
		lost  bool
		more  <-chan struct{}
	)
	for {
		end, ok := hub.streams.turn(c.Context())
		if !ok {
			return ended, nil
		}
		runs, lost, more = hub.streams.read(cur, runs[:0])
		if lost {
			// Too slow to follow: the events it missed are gone, so it
			// is told to reconnect (EventSource does on its own when the
			// stream ends) and re-read what it shows.
			_ = w.write([]byte(DroppedEvent))
			end()
			return ended, nil
		}
		err := writeRuns(w, runs, sel.filter, &batch)
		end()
		clear(runs)
		if err != nil {
			return ended, nil
		}
		// Read up to the last seal: wait for the next (more).
		select {
		case <-c.Context().Done():
			return ended, nil
		case <-hub.streams.done:
			// The server is shutting down: end the stream, and the
			// browser reconnects (to another replica, or later).
			return ended, nil
		case <-keepAlive.C:
			if w.write([]byte(": keep-alive\n\n")) != nil {
				return ended, nil
			}
		case <-more:
		}
	}
}

// writeRuns writes the events of runs that filter selects: each run's
// shared encoding when it selects all (a write each), else the events it
// selects, in one write (batch is the buffer, kept between calls).
func writeRuns(w streamWriter, runs []*run, filter events.Filter, batch *[]byte) error {
	if filter == nil {
		for _, r := range runs {
			if err := w.write(r.bytes()); err != nil {
				return err
			}
		}
		return nil
	}
	b := (*batch)[:0]
	for _, r := range runs {
		for _, f := range r.frames {
			if filter(f.msg) {
				b = append(b, f.bytes()...)
			}
		}
	}
	*batch = b
	if len(b) == 0 {
		return nil
	}
	return w.write(b)
}

// streamWriteTimeout bounds one write to a stream: a client that reads
// nothing for this long is cut off rather than holding its connection
// and goroutine for ever.
const streamWriteTimeout = time.Minute

// streamWriter writes and flushes one piece of a stream at a time, each
// within streamWriteTimeout.
type streamWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (s streamWriter) write(p []byte) error {
	// Not every connection has deadlines (a test's recorder): then the
	// write just waits.
	_ = s.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if _, err := s.w.Write(p); err != nil {
		return err
	}
	return s.rc.Flush()
}
