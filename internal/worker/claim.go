package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/retry"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// maxReclaimMargin is the largest head start a reclaim takes before
// takenUntil; it absorbs clock drift between worker and queue.
const maxReclaimMargin = 3 * time.Minute

// ReclaimAt returns when a claim valid until takenUntil should be reclaimed,
// seen at now: takenUntil − min(3 min, (takenUntil − now)/2). For 20-minute
// production claims that is 3 minutes early; for the seconds-long claims of
// tests it is half-way, so reclaims always happen before expiry.
func ReclaimAt(now, takenUntil time.Time) time.Time {
	remaining := takenUntil.Sub(now)
	if remaining <= 0 {
		return now
	}
	return takenUntil.Add(-min(maxReclaimMargin, remaining/2))
}

// Claim is a held claim on one run: its current temporary credentials and
// the reclaimer that keeps it alive. The superseding step creates Claims for
// secondary tasks with Worker.HoldClaim, so each gets its own reclaimer.
type Claim struct {
	// TaskID and RunID identify the claimed run.
	TaskID string
	RunID  int
	// Task is the task definition from the claim.
	Task tcclient.TaskDefinition
	// Status is the task status at claim time.
	Status tcclient.TaskStatus

	w      *Worker
	logger *slog.Logger

	mu         sync.Mutex
	creds      tcclient.Credentials
	takenUntil time.Time
	listeners  []func(tcclient.Credentials)
	lostErr    error

	lost        chan struct{}
	lostOnce    sync.Once
	stop        chan struct{}
	stopOnce    sync.Once
	reclaimDone chan struct{}
}

// ValidateClaim checks the structural fields of a claim (docs/contract/worker.md §1.3
// step 1); a broken claim is a queue bug reported as internal-error.
func ValidateClaim(c *tcclient.TaskClaim) error {
	var missing []string
	if c.Status.TaskID == "" {
		missing = append(missing, "status.taskId")
	}
	if c.RunID < 0 || c.RunID >= len(c.Status.Runs) {
		missing = append(missing, "runId (out of range)")
	}
	if c.TakenUntil.IsZero() {
		missing = append(missing, "takenUntil")
	}
	if c.Credentials.ClientID == "" || c.Credentials.AccessToken == "" {
		missing = append(missing, "credentials")
	}
	if len(c.Task.Payload) == 0 {
		missing = append(missing, "task.payload")
	}
	if c.WorkerGroup == "" || c.WorkerID == "" {
		missing = append(missing, "workerGroup/workerId")
	}
	if len(missing) > 0 {
		return fmt.Errorf("claim is missing or has invalid fields: %v", missing)
	}
	return nil
}

// HoldClaim validates a claim (from claimWork or claimTask) and starts its
// reclaimer immediately. The caller must eventually call StopReclaiming.
func (w *Worker) HoldClaim(tc tcclient.TaskClaim) (*Claim, error) {
	if err := ValidateClaim(&tc); err != nil {
		return nil, err
	}
	key := fmt.Sprintf("%s/%d", tc.Status.TaskID, tc.RunID)
	if _, dup := w.heldRuns.LoadOrStore(key, true); dup {
		// The queue answers a repeated claimTask from the holder with the
		// claim again; holding it twice would run the task twice.
		return nil, fmt.Errorf("run %s is already held by this worker", key)
	}
	c := &Claim{
		TaskID: tc.Status.TaskID, RunID: tc.RunID, Task: tc.Task, Status: tc.Status,
		w: w, logger: w.logger.With("taskId", tc.Status.TaskID, "runId", tc.RunID),
		creds: tc.Credentials, takenUntil: tc.TakenUntil.Time,
		lost: make(chan struct{}), stop: make(chan struct{}), reclaimDone: make(chan struct{}),
	}
	go c.reclaimLoop()
	return c, nil
}

// Credentials returns the claim's current temporary credentials.
func (c *Claim) Credentials() tcclient.Credentials {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.creds
}

// TakenUntil returns the current claim expiry.
func (c *Claim) TakenUntil() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.takenUntil
}

// Queue returns a queue client signing with the claim's current
// credentials. Get a fresh one for each call sequence: credentials change on
// every reclaim.
func (c *Claim) Queue() *tcclient.Client {
	creds := c.Credentials()
	return c.w.queueClient().WithCredentials(&creds)
}

// OnCredentials registers f to be called with new credentials after each
// successful reclaim (the proxy uses it).
func (c *Claim) OnCredentials(f func(tcclient.Credentials)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listeners = append(c.listeners, f)
}

// Lost is closed when the claim is gone: a reclaim answered 409 (resolved,
// cancelled, deadline passed), 401/403 (credentials rejected) or another
// permanent error, or transient failures lasted until takenUntil. The
// worker must then stop the task and report nothing; it uploads only the
// task's log, where the queue still takes it.
func (c *Claim) Lost() <-chan struct{} { return c.lost }

// LostReason returns why the claim was lost (nil while it is held).
func (c *Claim) LostReason() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lostErr
}

// StopReclaiming stops the reclaimer and waits for it to finish; safe to
// call more than once. It must be called before the run is resolved.
func (c *Claim) StopReclaiming() {
	c.stopOnce.Do(func() { close(c.stop) })
	<-c.reclaimDone
	c.w.heldRuns.Delete(fmt.Sprintf("%s/%d", c.TaskID, c.RunID))
}

func (c *Claim) markLost(err error) {
	c.lostOnce.Do(func() {
		c.mu.Lock()
		c.lostErr = err
		c.mu.Unlock()
		c.logger.Warn("claim lost", "error", err)
		close(c.lost)
	})
}

func (c *Claim) reclaimLoop() {
	defer close(c.reclaimDone)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		at := ReclaimAt(time.Now(), c.TakenUntil())
		timer := time.NewTimer(time.Until(at))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		if !c.reclaimOnce(ctx) {
			return
		}
	}
}

// reclaimOnce reclaims, retrying transient failures with short back-off
// until takenUntil has passed. It reports whether the claim is still held.
func (c *Claim) reclaimOnce(ctx context.Context) bool {
	backoff := retry.Doubling(c.w.reclaimRetryDelay, 10*time.Second)
	policy := retry.Policy{Delay: func(n int) time.Duration {
		return min(backoff(n), time.Until(c.TakenUntil())+time.Millisecond)
	}}
	var rec *tcclient.TaskReclaim
	err := retry.Do(ctx, policy, func(int) error {
		q := c.Queue()
		q.MaxRetries = -1 // retry.Do does the retrying here, bounded by takenUntil
		var err error
		rec, err = q.ReclaimTask(ctx, c.TaskID, c.RunID)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return retry.Stop(err)
		case !tcclient.IsTransient(err):
			c.markLost(err)
			return retry.Stop(err)
		case time.Now().After(c.TakenUntil()):
			c.markLost(fmt.Errorf("reclaim kept failing until the claim expired: %w", err))
			return retry.Stop(err)
		}
		c.logger.Warn("reclaim failed, retrying", "error", err)
		return err
	})
	if err != nil {
		return false
	}
	c.mu.Lock()
	c.creds = rec.Credentials
	c.takenUntil = rec.TakenUntil.Time
	listeners := append([]func(tcclient.Credentials){}, c.listeners...)
	c.mu.Unlock()
	c.logger.Debug("reclaimed", "takenUntil", rec.TakenUntil.String())
	for _, f := range listeners {
		f(rec.Credentials)
	}
	return true
}
