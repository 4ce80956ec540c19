package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// ANSI colours of the states on a terminal.
var stateColors = map[string]string{
	tcclient.StateUnscheduled: "\x1b[90m", // grey
	tcclient.StatePending:     "\x1b[33m", // yellow
	tcclient.StateRunning:     "\x1b[36m", // cyan
	tcclient.StateCompleted:   "\x1b[32m", // green
	tcclient.StateFailed:      "\x1b[31m", // red
	tcclient.StateException:   "\x1b[35m", // magenta
}

// paint colours a state word when colour is on.
func (a *app) paint(state string) string { return paintState(state, a.env.color()) }

func paintState(state string, color bool) string {
	if c, ok := stateColors[state]; ok && color {
		return c + state + "\x1b[0m"
	}
	return state
}

// isResolved tells whether a state is final.
func isResolved(state string) bool {
	return state == tcclient.StateCompleted || state == tcclient.StateFailed || state == tcclient.StateException
}

// runDuration is how long a run has been (or was) running; 0 before it
// started.
func runDuration(r tcclient.Run, now time.Time) time.Duration {
	if r.Started.IsZero() {
		return 0
	}
	end := now
	if !r.Resolved.IsZero() {
		end = r.Resolved.Time
	}
	if d := end.Sub(r.Started.Time); d > 0 {
		return d
	}
	return 0
}

// formatDuration rounds for people: tenths of a second under a minute,
// whole seconds above.
func formatDuration(d time.Duration) string {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// statusOutput is what `status --json` prints: the queue's status reply.
type statusOutput struct {
	Status tcclient.TaskStatus `json:"status"`
}

func (a *app) status(ctx context.Context, taskID string) error {
	if err := checkTaskID("taskId", taskID); err != nil {
		return err
	}
	st, err := a.client.Status(ctx, taskID)
	if err != nil {
		return failure("getting status of task "+taskID, err)
	}
	if a.json {
		return a.printJSON(statusOutput{Status: *st})
	}
	def, err := a.client.Task(ctx, taskID)
	if err != nil {
		return failure("getting task "+taskID, err)
	}
	if err := RenderStatus(a.env.Stdout, st, def, a.env.now(), a.env.color()); err != nil {
		return err
	}
	return a.printBlocked(ctx, a.env.Stdout, st, def)
}

// RenderStatus writes the human view of a task: identity, state, timing
// and a table of its runs.
func RenderStatus(w io.Writer, st *tcclient.TaskStatus, def *tcclient.TaskDefinition, now time.Time, color bool) error {
	t := newTable(w)
	t.row("Task", st.TaskID)
	if def != nil && def.Metadata.Name != "" {
		t.row("Name", def.Metadata.Name)
	}
	t.row("State", paintState(st.State, color))
	t.row("Queue", st.TaskQueueID)
	t.row("Group", st.TaskGroupID)
	if def != nil && !def.Created.IsZero() {
		t.row("Created", def.Created.String())
	}
	t.row("Deadline", st.Deadline.String())
	t.row("Retries left", strconv.Itoa(st.RetriesLeft))
	if err := t.flush(); err != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	if len(st.Runs) == 0 {
		_, err := fmt.Fprintln(w, "\nNo runs yet.")
		return err
	}
	fmt.Fprintln(w)
	// The table is laid out without colour, because tabwriter counts the
	// bytes of escape codes as width; the state cells are painted after.
	var runs strings.Builder
	t = newTable(&runs, "RUN", "STATE", "CREATED", "RESOLVED", "WORKER", "STARTED", "DURATION")
	for _, r := range st.Runs {
		worker := "-"
		if r.WorkerGroup != "" || r.WorkerID != "" {
			worker = r.WorkerGroup + "/" + r.WorkerID
		}
		started, dur := "-", "-"
		if !r.Started.IsZero() {
			started = r.Started.String()
			dur = formatDuration(runDuration(r, now))
		}
		resolved := r.ReasonResolved
		if resolved == "" {
			resolved = "-"
		}
		t.row(r.RunID, r.State, r.ReasonCreated, resolved, worker, started, dur)
	}
	if err := t.flush(); err != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	lines := strings.SplitAfter(runs.String(), "\n")
	if color {
		col := strings.Index(lines[0], "STATE")
		for i, r := range st.Runs {
			ln := lines[i+1]
			if col >= 0 && strings.HasPrefix(ln[col:], r.State) {
				lines[i+1] = ln[:col] + paintState(r.State, true) + ln[col+len(r.State):]
			}
		}
	}
	if _, err := io.WriteString(w, strings.Join(lines, "")); err != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	return nil
}

func (a *app) cancel(ctx context.Context, taskID string) error {
	if err := checkTaskID("taskId", taskID); err != nil {
		return err
	}
	st, err := a.client.CancelTask(ctx, taskID)
	if err != nil {
		return failure("cancelling task "+taskID, err)
	}
	return a.printState(st)
}

func (a *app) rerun(ctx context.Context, taskID string) error {
	if err := checkTaskID("taskId", taskID); err != nil {
		return err
	}
	st, err := a.client.RerunTask(ctx, taskID)
	if err != nil {
		return failure("rerunning task "+taskID, err)
	}
	return a.printState(st)
}

// printState prints a lifecycle reply: the JSON status, or one line.
func (a *app) printState(st *tcclient.TaskStatus) error {
	if a.json {
		return a.printJSON(statusOutput{Status: *st})
	}
	_, err := fmt.Fprintln(a.env.Stdout, StateLine(st, a.env.color()))
	return err
}

// StateLine summarises a task in one line: its state and latest run.
func StateLine(st *tcclient.TaskStatus, color bool) string {
	line := fmt.Sprintf("Task %s: %s", st.TaskID, paintState(st.State, color))
	if n := len(st.Runs); n > 0 {
		r := st.Runs[n-1]
		detail := r.ReasonCreated
		if r.ReasonResolved != "" {
			detail = r.ReasonResolved
		}
		line += fmt.Sprintf(" (run %d, %s)", r.RunID, detail)
	}
	return line
}
