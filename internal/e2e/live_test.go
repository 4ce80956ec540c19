package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/live"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// openStream opens the live event stream at rootURL with query,
// anonymously as a browser's EventSource would, and returns its events
// once the server says the subscription is in place.
func openStream(ctx context.Context, t *testing.T, rootURL, query string) <-chan live.StreamEvent {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rootURL+live.StreamPath+"?"+query, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() && sc.Text() != ": subscribed" {
	}
	out := make(chan live.StreamEvent, 64)
	go func() {
		defer close(out)
		defer res.Body.Close()
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev live.StreamEvent
			if json.Unmarshal([]byte(data), &ev) == nil {
				out <- ev
			}
		}
	}()
	return out
}

// nextExchange waits for the next event on the stream and returns its
// exchange.
func nextExchange(t *testing.T, events <-chan live.StreamEvent) live.StreamEvent {
	t.Helper()
	select {
	case ev, ok := <-events:
		require.True(t, ok, "stream ended")
		return ev
	case <-time.After(20 * time.Second):
		t.Fatal("no event within 20 s")
	}
	return live.StreamEvent{}
}

// runTask creates a task on c and resolves it completed, as a worker.
func runTask(ctx context.Context, t *testing.T, c *tcclient.Client, taskID, taskQueueID string) {
	t.Helper()
	_, err := c.CreateTask(ctx, taskID, newTask(taskQueueID))
	require.NoError(t, err)
	claim, err := c.ClaimWork(ctx, taskQueueID, &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w", Tasks: 1})
	require.NoError(t, err)
	require.Len(t, claim.Tasks, 1)
	_, err = c.ReportCompleted(ctx, taskID, 0)
	require.NoError(t, err)
}

// TestLiveStream: a browser's stream of one task sees its life-cycle as
// the Pulse exchanges carry it; bad selections get Taskcluster's errors.
func TestLiveStream(t *testing.T) {
	t.Parallel()
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	c := rootClient(srv)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	taskID := tcclient.NewTaskID()
	events := openStream(ctx, t, srv.RootURL, "taskId="+taskID)
	other := tcclient.NewTaskID()
	_, err := c.CreateTask(ctx, other, newTask("live/other"))
	require.NoError(t, err)
	runTask(ctx, t, c, taskID, "live/one")
	for _, want := range []string{"task-defined", "task-pending", "task-running", "task-completed"} {
		ev := nextExchange(t, events)
		require.Equal(t, want, ev.Exchange)
		require.True(t, strings.HasPrefix(ev.RoutingKey, "primary."+taskID+"."), ev.RoutingKey)
		var body struct {
			Status struct {
				TaskID string `json:"taskId"`
			} `json:"status"`
		}
		require.NoError(t, json.Unmarshal(ev.Payload, &body))
		require.Equal(t, taskID, body.Status.TaskID)
	}

	for _, tt := range []struct{ query, code string }{
		{"taskId=nope", "InvalidRequestArguments"},
		{"taskId=" + taskID + "&taskGroupId=" + taskID, "InvalidRequestArguments"},
		{"colour=blue", "InvalidRequestArguments"},
	} {
		res, err := http.Get(srv.RootURL + live.StreamPath + "?" + tt.query)
		require.NoError(t, err)
		var body struct {
			Code string `json:"code"`
		}
		require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
		res.Body.Close()
		require.Equal(t, http.StatusBadRequest, res.StatusCode, tt.query)
		require.Equal(t, tt.code, body.Code, tt.query)
	}
}

// TestLiveStreamAcrossReplicas: on PostgreSQL a stream opened on one
// replica sees a task that another replica ran, through the
// LISTEN/NOTIFY relay.
func TestLiveStreamAcrossReplicas(t *testing.T) {
	t.Parallel()
	db := e2e.FreshPostgres(t)
	args := []string{"--db", db}
	env := []string{"HOPPER_SECRET_KEY=" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"}
	a := e2e.StartServer(t, e2e.ServerOptions{Args: args, Env: env})
	b := e2e.StartServer(t, e2e.ServerOptions{Args: args, Env: env})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	groupTask := tcclient.NewTaskID() // a task that is its own group
	events := openStream(ctx, t, b.RootURL, "taskGroupId="+groupTask)
	// Replica a hears of b's subscriber by NOTIFY; until then it does not
	// relay, so wait for a's first relayed event with a task made for it.
	require.Eventually(t, func() bool {
		probe := tcclient.NewTaskID()
		def := newTask("live/probe")
		def.TaskGroupID = groupTask
		_, err := rootClient(a).CreateTask(ctx, probe, def)
		require.NoError(t, err)
		select {
		case ev := <-events:
			return ev.Exchange == "task-defined"
		case <-time.After(200 * time.Millisecond):
			return false
		}
	}, 20*time.Second, 10*time.Millisecond)
	for drained := false; !drained; {
		select {
		case <-events:
		case <-time.After(300 * time.Millisecond):
			drained = true
		}
	}

	def := newTask("live/replicas")
	def.TaskGroupID = groupTask
	_, err := rootClient(a).CreateTask(ctx, groupTask, def)
	require.NoError(t, err)
	claim, err := rootClient(a).ClaimWork(ctx, "live/replicas", &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w", Tasks: 1})
	require.NoError(t, err)
	require.Len(t, claim.Tasks, 1)
	_, err = rootClient(a).ReportCompleted(ctx, groupTask, 0)
	require.NoError(t, err)
	var seen []string
	for len(seen) < 4 {
		ev := nextExchange(t, events)
		if strings.HasPrefix(ev.RoutingKey, "primary."+groupTask+".") {
			seen = append(seen, ev.Exchange)
		}
	}
	require.Equal(t, []string{"task-defined", "task-pending", "task-running", "task-completed"}, seen)
}
