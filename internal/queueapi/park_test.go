package queueapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queueapi"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// parkClient is one worker's HTTP connection: at most one, so a reused
// connection is visible.
type parkClient struct {
	h      *harness
	client *http.Client
}

func newParkClient(h *harness) *parkClient {
	tr := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}
	return &parkClient{h: h, client: &http.Client{Transport: tr}}
}

// claimWork sends a claimWork and returns its reply, whether it went on a
// reused connection, and any transport error.
func (p *parkClient) claimWork(ctx context.Context, tq, workerID string) (tcclient.ClaimWorkResponse, http.Header, bool, error) {
	var out tcclient.ClaimWorkResponse
	reused := false
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
	body, _ := json.Marshal(map[string]any{"workerGroup": "wg", "workerId": workerID})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.h.url+queuePath("/claim-work/"+tcclient.EscapePathParam(tq)), bytes.NewReader(body))
	if err != nil {
		return out, nil, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return out, nil, reused, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return out, nil, reused, err
	}
	if resp.StatusCode != http.StatusOK {
		return out, resp.Header, reused, &replyError{resp.StatusCode, string(data)}
	}
	return out, resp.Header, reused, json.Unmarshal(data, &out)
}

type replyError struct {
	status int
	body   string
}

func (e *replyError) Error() string { return e.body }

// waitParked waits until n claimWork calls are parked.
func waitParked(t *testing.T, h *harness, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return h.srv.ParkedCalls() == n }, 10*time.Second, time.Millisecond, "parked calls")
}

type claimOutcome struct {
	resp   tcclient.ClaimWorkResponse
	header http.Header
	reused bool
	err    error
}

func goClaim(ctx context.Context, p *parkClient, tq, workerID string) <-chan claimOutcome {
	out := make(chan claimOutcome, 1)
	go func() {
		r, hd, reused, err := p.claimWork(ctx, tq, workerID)
		out <- claimOutcome{r, hd, reused, err}
	}()
	return out
}

// TestParkedClaim: a claimWork on an empty queue parks; the replies it
// gets later (a task, or none at the end of the long-poll) are what an
// unparked call answers, headers included, and the worker's connection
// serves its next request.
func TestParkedClaim(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		giveTask bool
	}{
		{"woken by a task", true},
		{"the long-poll ends", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOptions{LongPoll: 2 * time.Second})
			const tq = "prov-park/wt-park"
			p := newParkClient(h)
			// A first call opens the connection the parked one reuses.
			_, _, _, err := p.claimWork(context.Background(), "prov-park/warm-up", "w1")
			require.NoError(t, err)
			got := goClaim(context.Background(), p, tq, "w1")
			waitParked(t, h, 1)
			taskID := newTaskID()
			if tc.giveTask {
				h.createTask(t, taskID, h.taskDef(tq, nil))
			}
			r := <-got
			require.NoError(t, r.err)
			require.True(t, r.reused, "the parked call came on the warmed-up connection")
			require.Equal(t, "application/json; charset=utf-8", r.header.Get("Content-Type"))
			require.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"))
			if tc.giveTask {
				require.Len(t, r.resp.Tasks, 1)
				require.Equal(t, taskID, r.resp.Tasks[0].Status.TaskID)
				require.NotEmpty(t, r.resp.Tasks[0].Credentials.AccessToken)
				require.Equal(t, "running", r.resp.Tasks[0].Status.State)
				// The parked call was waiting armed on a queue known drained:
				// the create claimed the task for it (store/direct.go).
				require.Equal(t, uint64(1), h.store.(*store.DB).CombinedStats().ClaimedAtCreate)
			} else {
				require.Empty(t, r.resp.Tasks)
				require.NotNil(t, r.resp.Tasks, `an empty reply is {"tasks": []}`)
			}
			require.Equal(t, 0, h.srv.ParkedCalls())
			// The connection goes back to the HTTP server for the next call.
			next := goClaim(context.Background(), p, tq, "w1")
			waitParked(t, h, 1)
			h.createTask(t, newTaskID(), h.taskDef(tq, nil))
			r = <-next
			require.NoError(t, r.err)
			require.True(t, r.reused, "the answered connection serves the next request")
			require.Len(t, r.resp.Tasks, 1)
		})
	}
}

// TestParkedClaimWorkerGone: a parked worker that went away does not take
// the task meant for it: its wake-up goes to the next waiter at once.
func TestParkedClaimWorkerGone(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{LongPoll: 30 * time.Second})
	const tq = "prov-park/wt-gone"
	ctx, leave := context.WithCancel(context.Background())
	gone := goClaim(ctx, newParkClient(h), tq, "gone")
	waitParked(t, h, 1)
	stays := goClaim(context.Background(), newParkClient(h), tq, "stays")
	waitParked(t, h, 2)
	leave()
	require.Error(t, (<-gone).err)
	taskID := newTaskID()
	h.createTask(t, taskID, h.taskDef(tq, nil))
	select {
	case r := <-stays:
		require.NoError(t, r.err)
		require.Len(t, r.resp.Tasks, 1)
		require.Equal(t, taskID, r.resp.Tasks[0].Status.TaskID)
		require.Equal(t, "stays", r.resp.Tasks[0].WorkerID)
	case <-time.After(3 * time.Second): // well under the hub's 5 s backup
		t.Fatal("the wake-up of the worker that left was not passed on")
	}
}

// TestParkedClaimDrain: draining answers parked calls at once, with no task.
func TestParkedClaimDrain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{LongPoll: 30 * time.Second})
	got := goClaim(context.Background(), newParkClient(h), "prov-park/wt-drain", "w1")
	waitParked(t, h, 1)
	h.srv.Drain()
	select {
	case r := <-got:
		require.NoError(t, r.err)
		require.Empty(t, r.resp.Tasks)
	case <-time.After(5 * time.Second):
		t.Fatal("a drain must answer parked calls")
	}
}

// TestParkedClaimsEndTogether: many parked calls share one timer; a woken
// one leaves, and the others' long-polls end with no task, none before its
// time, and spread apart: calls that came together do not all end
// together.
func TestParkedClaimsEndTogether(t *testing.T) {
	t.Parallel()
	const longPoll = time.Second
	h := newHarness(t, harnessOptions{LongPoll: longPoll})
	const tq, calls = "prov-park/wt-many", 20
	type outcome struct {
		claimOutcome
		took time.Duration
	}
	results := make(chan outcome, calls)
	for i := range calls {
		p := newParkClient(h)
		go func() {
			start := time.Now()
			r, hd, reused, err := p.claimWork(context.Background(), tq, fmt.Sprintf("w%d", i))
			results <- outcome{claimOutcome{r, hd, reused, err}, time.Since(start)}
		}()
	}
	waitParked(t, h, calls)
	taskID := newTaskID()
	h.createTask(t, taskID, h.taskDef(tq, nil))
	var withTask, empty int
	var shortest, longest time.Duration
	for range calls {
		r := <-results
		require.NoError(t, r.err)
		if len(r.resp.Tasks) == 1 {
			require.Equal(t, taskID, r.resp.Tasks[0].Status.TaskID)
			withTask++
			continue
		}
		require.Empty(t, r.resp.Tasks)
		require.GreaterOrEqual(t, r.took, queueapi.ShortestLongPoll(longPoll), "a long-poll ended early")
		if shortest == 0 || r.took < shortest {
			shortest = r.took
		}
		longest = max(longest, r.took)
		empty++
	}
	require.Equal(t, 1, withTask)
	require.Equal(t, calls-1, empty)
	require.Equal(t, 0, h.srv.ParkedCalls())
	// 19 ends drawn over a quarter of a second lie within 25 ms of each
	// other with a probability below 10^-16.
	require.Greater(t, longest-shortest, longPoll/40, "the long-polls did not spread")
}

// TestParkedClaimsHoldNoGoroutine: a parked call keeps no goroutine of the
// HTTP server's (nor one of its own): 200 waiting workers leave none in
// net/http's connection loop or in a handler.
func TestParkedClaimsHoldNoGoroutine(t *testing.T) {
	// Not parallel: the parallel tests wait meanwhile, so the connection
	// loops counted are this test's.
	h := newHarness(t, harnessOptions{LongPoll: 30 * time.Second})
	const tq, calls = "prov-park/wt-goroutines", 200
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range calls {
		goClaim(ctx, newParkClient(h), tq, fmt.Sprintf("w%d", i))
	}
	waitParked(t, h, calls)
	var stacks bytes.Buffer
	require.NoError(t, pprof.Lookup("goroutine").WriteTo(&stacks, 2))
	serving := strings.Count(stacks.String(), "net/http.(*conn).serve(")
	require.Less(t, serving, 10, "parked calls hold the HTTP server's connection goroutines")
}

// TestParkedClaimsUnderChurn: workers poll over and over while tasks
// arrive at random moments, so wake-ups, long-polls ending and new calls
// parking interleave: every task is claimed once, by one worker, and no
// call is left parked.
func TestParkedClaimsUnderChurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{LongPoll: 300 * time.Millisecond})
	const tq, workers, tasks = "prov-park/wt-churn", 60, 200
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	claimedBy := map[string]string{}
	allClaimed := make(chan struct{})
	var wg sync.WaitGroup
	for i := range workers {
		p := newParkClient(h)
		workerID := fmt.Sprintf("w%d", i)
		wg.Go(func() {
			for ctx.Err() == nil {
				r, _, _, err := p.claimWork(ctx, tq, workerID)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("%s: %v", workerID, err)
					}
					return
				}
				mu.Lock()
				for _, c := range r.Tasks {
					if other, ok := claimedBy[c.Status.TaskID]; ok {
						t.Errorf("task %s claimed by %s and %s", c.Status.TaskID, other, workerID)
					}
					claimedBy[c.Status.TaskID] = workerID
				}
				if len(claimedBy) == tasks {
					select {
					case <-allClaimed:
					default:
						close(allClaimed)
					}
				}
				mu.Unlock()
			}
		})
	}
	for range tasks {
		time.Sleep(time.Duration(rand.Int64N(int64(5 * time.Millisecond))))
		h.createTask(t, newTaskID(), h.taskDef(tq, nil))
	}
	select {
	case <-allClaimed:
	case <-ctx.Done():
		mu.Lock()
		t.Fatalf("%d of %d tasks claimed", len(claimedBy), tasks)
	}
	cancel()
	wg.Wait()
	require.Eventually(t, func() bool { return h.srv.ParkedCalls() == 0 }, 5*time.Second, 10*time.Millisecond,
		"calls whose workers left are not kept once their long-polls end")
}
