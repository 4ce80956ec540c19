package worker

// Run code both engines share: watching the queue for the run's
// cancellation.

import (
	"context"
	"fmt"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// watchCancellation asks the queue every CancelPollInterval whether the
// run is still running, and marks the claim lost as soon as it is not
// (cancelTask, a deadline, or any other resolution by someone else), so a
// cancelled task stops within about one interval instead of at its next
// reclaim. It reads the status through the public API, so it is right
// whichever replica handled the cancel. It ends with stop.
func (r *taskRun) watchCancellation(stop <-chan struct{}) {
	c := r.claim
	ticker := time.NewTicker(r.w.cfg.CancelPollInterval.Duration)
	defer ticker.Stop()
	q := r.w.Queue()
	q.MaxRetries = -1
	anonymous := false
	for {
		select {
		case <-stop:
			return
		case <-c.Lost():
			return
		case <-ticker.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.w.cfg.CancelPollInterval.Duration+5*time.Second)
		st, err := q.Status(ctx, c.TaskID)
		cancel()
		if code := tcclient.StatusCode(err); (code == 401 || code == 403) && !anonymous {
			// The worker's credentials may lack queue:status:<taskId>;
			// statuses are often public.
			anonymous = true
			q = r.w.queueClient()
			q.MaxRetries = -1
			continue
		} else if code == 401 || code == 403 || code == 404 {
			r.logger.Warn("cannot watch the run for cancellation; relying on reclaims", "error", err)
			return
		}
		if err != nil || c.RunID >= len(st.Runs) {
			continue
		}
		if run := st.Runs[c.RunID]; run.State != tcclient.StateRunning {
			select {
			case <-stop:
				// Our own resolution, seen after the run ended.
				return
			default:
			}
			c.markLost(fmt.Errorf("run %d is now %s (%s)", c.RunID, run.State, run.ReasonResolved))
			return
		}
	}
}

// stopWatching ends watchCancellation; safe to call more than once.
func (r *taskRun) stopWatching() {
	r.watchOnce.Do(func() {
		if r.watchStop != nil {
			close(r.watchStop)
		}
	})
}
