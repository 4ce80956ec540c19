package workermanager

import (
	"fmt"
	"time"
)

// RunHold is a run a removed worker may still be working on: one it holds
// in the queue (Running), or one its removal resolved while its claim,
// which the worker does not know is gone, had not run out (TakenUntil).
type RunHold struct {
	TaskID     string
	RunID      int
	Running    bool
	TakenUntil time.Time
}

// Removed reports whether the worker was removed (stopping or stopped).
func (w *Worker) Removed() bool { return w.State == StateStopping || w.State == StateStopped }

// ShouldTerminate answers shouldWorkerTerminate. A removed worker is told
// to stop only once it holds nothing it may still be working on: no run
// in the queue under its name, and no run its removal resolved whose
// claim has not yet run out. By then the worker has reported the run, or
// lost it (its reclaim or report was refused, which generic-worker asks
// for three minutes before the claim runs out, hopper's worker up to
// three minutes before), and stopping loses nothing. Telling it sooner
// is worse than useless: generic-worker, asked to stop with a task still
// running, waits for that task in the very loop that would end it, and
// neither it nor worker-runner ever exits (Taskcluster answers false for
// a removed static worker, so its workers never take that path). holds
// are the worker's runs (see RunHold); only a removed worker's matter.
func (w *Worker) ShouldTerminate(holds []RunHold, now time.Time) (terminate bool, reason string) {
	if w.Removed() {
		for _, h := range holds {
			if h.Running {
				return false, fmt.Sprintf("the worker was removed; it still holds run %d of task %s, which the worker manager is resolving", h.RunID, h.TaskID)
			}
			if h.TakenUntil.After(now) {
				return false, fmt.Sprintf("the worker was removed; run %d of task %s was resolved exception/worker-shutdown, and the worker may work on it until its claim runs out at %s",
					h.RunID, h.TaskID, h.TakenUntil.UTC().Format(time.RFC3339))
			}
		}
		return true, "the worker was removed"
	}
	if w.Expires.Before(now) {
		return true, "the worker has expired"
	}
	return false, "none"
}
