package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// WakeResult is the outcome of the wake-up benchmark. FromReply is measured
// from the createTask reply to the claimWork reply, the figure a scheduler
// watching both would see; it can be slightly negative, because the server
// wakes the waiting claimWork at commit, before it has written the
// createTask reply. FromRequest is measured from when the createTask request
// was sent, so it also holds the createTask call's own time.
type WakeResult struct {
	FromReply   Latency
	FromRequest Latency
	// Settle is how long each sample waited after sending claimWork before
	// creating the task, so that the claimWork was waiting when it arrived.
	Settle time.Duration
}

// wakeSettle lets a claimWork reach its wait before the task is created:
// its first, empty claim attempt takes well under this on any machine.
const wakeSettle = 25 * time.Millisecond

// RunWake measures, opts.WakeSamples times, how long a worker long-polling
// an empty task queue takes to receive a task created while it waits.
func RunWake(ctx context.Context, opts Options) (WakeResult, error) {
	if err := opts.defaults(); err != nil {
		return WakeResult{}, err
	}
	tq := opts.taskQueue("wk")
	opts.Logf("wake: %d samples on %s", opts.WakeSamples, tq)
	c := opts.client()
	var fromReply, fromRequest []time.Duration
	for i := range opts.WakeSamples {
		reply, request, err := wakeSample(ctx, &opts, c, tq)
		if err != nil {
			return WakeResult{}, fmt.Errorf("wake sample %d: %w", i, err)
		}
		fromReply = append(fromReply, reply)
		fromRequest = append(fromRequest, request)
	}
	res := WakeResult{FromReply: summarize(fromReply), FromRequest: summarize(fromRequest), Settle: wakeSettle}
	opts.Logf("wake: p50 %s p99 %s after the createTask reply", res.FromReply.P50, res.FromReply.P99)
	return res, nil
}

// wakeSample starts a claimWork on the empty queue tq, creates a task once
// the claimWork is waiting, and returns the claimWork reply's delay after
// the createTask reply and after the createTask request.
func wakeSample(ctx context.Context, opts *Options, c *tcclient.Client, tq string) (fromReply, fromRequest time.Duration, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // releases the claimWork if the sample fails
	type claimed struct {
		resp *tcclient.ClaimWorkResponse
		err  error
		at   time.Time
	}
	got := make(chan claimed, 1)
	go func() {
		resp, err := c.ClaimWork(ctx, tq, &tcclient.ClaimWorkRequest{WorkerGroup: opts.WorkerGroup, WorkerID: "wake", Tasks: 1})
		got <- claimed{resp, err, time.Now()}
	}()
	if err := tcclient.SleepContext(ctx, wakeSettle); err != nil {
		return 0, 0, err
	}
	id := tcclient.NewTaskID()
	sent := time.Now()
	if _, err := c.CreateTask(ctx, id, taskDefinition(tq, sent, time.Hour)); err != nil {
		return 0, 0, err
	}
	replied := time.Now()
	r := <-got
	if r.err != nil {
		return 0, 0, r.err
	}
	if len(r.resp.Tasks) != 1 || r.resp.Tasks[0].Status.TaskID != id {
		return 0, 0, fmt.Errorf("claimWork returned %d tasks, not the task %s just created (did the long-poll end empty?)", len(r.resp.Tasks), id)
	}
	claim := r.resp.Tasks[0]
	creds := claim.Credentials
	if _, err := c.WithCredentials(&creds).ReportCompleted(ctx, id, claim.RunID); err != nil {
		return 0, 0, err
	}
	return r.at.Sub(replied), r.at.Sub(sent), nil
}
