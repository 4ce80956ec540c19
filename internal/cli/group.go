package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// groupStates are the task states in the order the group view lists them.
var groupStates = []string{
	tcclient.StateUnscheduled, tcclient.StatePending, tcclient.StateRunning,
	tcclient.StateCompleted, tcclient.StateFailed, tcclient.StateException,
}

// GroupTask is one member of a task group in a GroupSummary.
type GroupTask struct {
	TaskID string `json:"taskId"`
	Name   string `json:"name"`
	State  string `json:"state"`
}

// GroupSummary is a task group at one moment; `group --json` prints the
// final one.
type GroupSummary struct {
	TaskGroupID string `json:"taskGroupId"`
	// Total is the number of tasks, Resolved how many are completed,
	// failed or exception.
	Total    int `json:"total"`
	Resolved int `json:"resolved"`
	// Counts has an entry for every state, zero or not.
	Counts map[string]int `json:"counts"`
	// Done is set once every task is resolved; Success additionally
	// requires every task to have completed.
	Done    bool        `json:"done"`
	Success bool        `json:"success"`
	Tasks   []GroupTask `json:"tasks"`
}

// SummarizeGroup counts a task group's members by state.
func SummarizeGroup(taskGroupID string, members []tcclient.TaskGroupMember) GroupSummary {
	s := GroupSummary{TaskGroupID: taskGroupID, Counts: map[string]int{}, Tasks: []GroupTask{}}
	for _, st := range groupStates {
		s.Counts[st] = 0
	}
	for _, m := range members {
		s.Counts[m.Status.State]++
		s.Tasks = append(s.Tasks, GroupTask{TaskID: m.Status.TaskID, Name: m.Task.Metadata.Name, State: m.Status.State})
		if isResolved(m.Status.State) {
			s.Resolved++
		}
	}
	s.Total = len(members)
	s.Done = s.Resolved == s.Total
	s.Success = s.Done && s.Counts[tcclient.StateCompleted] == s.Total
	return s
}

// progressBar draws resolved/total as a bar of width cells.
func progressBar(resolved, total, width int) string {
	filled := width
	if total > 0 {
		filled = resolved * width / total
	}
	return "[" + strings.Repeat("#", filled) + strings.Repeat("-", width-filled) + "]"
}

func percent(resolved, total int) int {
	if total == 0 {
		return 100
	}
	return resolved * 100 / total
}

// maxNamesPerState bounds how many task names a state's row lists.
const maxNamesPerState = 3

// RenderGroupFrame returns the lines of the terminal view of a group: a
// heading, a progress bar and one row per state, naming the tasks of the
// states worth watching (running, failed, exception).
func RenderGroupFrame(s GroupSummary, color bool) []string {
	lines := []string{
		fmt.Sprintf("Task group %s: %d/%d resolved", s.TaskGroupID, s.Resolved, s.Total),
		fmt.Sprintf("%s %3d%%", progressBar(s.Resolved, s.Total, 40), percent(s.Resolved, s.Total)),
	}
	for _, state := range groupStates {
		row := fmt.Sprintf("  %s%s %5d", paintState(state, color),
			strings.Repeat(" ", len(tcclient.StateUnscheduled)-len(state)), s.Counts[state])
		if state == tcclient.StateRunning || state == tcclient.StateFailed || state == tcclient.StateException {
			var names []string
			for _, t := range s.Tasks {
				if t.State == state {
					names = append(names, taskLabel(t))
				}
			}
			if len(names) > maxNamesPerState {
				names = append(names[:maxNamesPerState], fmt.Sprintf("+%d more", len(names)-maxNamesPerState))
			}
			if len(names) > 0 {
				row += "  " + strings.Join(names, ", ")
			}
		}
		lines = append(lines, row)
	}
	return lines
}

// taskLabel names a task for people: its metadata name, else its id.
func taskLabel(t GroupTask) string {
	if t.Name != "" {
		return truncate(t.Name, 40)
	}
	return t.TaskID
}

// RenderGroupLine is the one-line view of a group for logs and pipes.
func RenderGroupLine(s GroupSummary) string {
	parts := make([]string, len(groupStates))
	for i, st := range groupStates {
		parts[i] = fmt.Sprintf("%s %d", st, s.Counts[st])
	}
	return fmt.Sprintf("Task group %s: %d/%d resolved (%s)", s.TaskGroupID, s.Resolved, s.Total, strings.Join(parts, ", "))
}

// frameWriter redraws a block of lines in place on a terminal.
type frameWriter struct {
	w     io.Writer
	lines int
	last  string
}

// draw replaces the previous frame with lines; an unchanged frame is not
// redrawn, which spares slow terminals the flicker.
func (f *frameWriter) draw(lines []string) {
	frame := strings.Join(lines, "\n")
	if f.lines > 0 && frame == f.last {
		return
	}
	f.last = frame
	var b strings.Builder
	if f.lines > 0 {
		// Back to the first line of the previous frame.
		fmt.Fprintf(&b, "\x1b[%dF", f.lines)
	}
	for _, ln := range lines {
		b.WriteString("\x1b[2K")
		b.WriteString(ln)
		b.WriteByte('\n')
	}
	// Clear whatever a longer previous frame left below.
	b.WriteString("\x1b[J")
	_, _ = io.WriteString(f.w, b.String())
	f.lines = len(lines)
}

// group lists a task group once, or with watch follows it until every
// task is resolved.
func (a *app) group(ctx context.Context, taskGroupID string, watch bool) error {
	if err := checkTaskID("taskGroupId", taskGroupID); err != nil {
		return err
	}
	if !watch {
		list, err := a.client.ListAllTaskGroup(ctx, taskGroupID)
		if err != nil {
			return failure("listing task group "+taskGroupID, err)
		}
		return a.groupListing(SummarizeGroup(taskGroupID, list.Tasks))
	}
	frame := &frameWriter{w: a.env.Stdout}
	lastLine := ""
	for {
		list, err := a.client.ListAllTaskGroup(ctx, taskGroupID)
		if err != nil {
			if ctx.Err() != nil {
				return &ExitError{Code: ExitInterrupted, Msg: "interrupted", Err: ctx.Err()}
			}
			return failure("listing task group "+taskGroupID, err)
		}
		s := SummarizeGroup(taskGroupID, list.Tasks)
		switch {
		case a.json:
		case a.env.TTY:
			frame.draw(RenderGroupFrame(s, a.env.color()))
		default:
			if line := RenderGroupLine(s); line != lastLine {
				fmt.Fprintln(a.env.Stdout, line)
				lastLine = line
			}
		}
		if s.Done {
			return a.groupResult(s)
		}
		if err := tcclient.SleepContext(ctx, a.env.pollInterval()); err != nil {
			return &ExitError{Code: ExitInterrupted, Msg: "interrupted", Err: err}
		}
	}
}

// groupListing prints a group once: the summary line and every task. It
// exits 1 when a task failed or ended in exception, so scripts can check
// a group without waiting for it.
func (a *app) groupListing(s GroupSummary) error {
	if a.json {
		if err := a.printJSON(s); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(a.env.Stdout, RenderGroupLine(s))
		for _, t := range s.Tasks {
			fmt.Fprintf(a.env.Stdout, "%s%s  %s  %s\n", paintState(t.State, a.env.color()),
				strings.Repeat(" ", len(tcclient.StateUnscheduled)-len(t.State)), t.TaskID, t.Name)
		}
	}
	if bad := s.Counts[tcclient.StateFailed] + s.Counts[tcclient.StateException]; bad > 0 {
		return &ExitError{Code: ExitFailed, Msg: fmt.Sprintf("task group %s: %d of %d tasks did not complete (%d failed, %d exception)",
			s.TaskGroupID, bad, s.Total, s.Counts[tcclient.StateFailed], s.Counts[tcclient.StateException])}
	}
	return nil
}

// groupResult prints the final summary and maps it to an exit code.
func (a *app) groupResult(s GroupSummary) error {
	if a.json {
		if err := a.printJSON(s); err != nil {
			return err
		}
	} else {
		for _, t := range s.Tasks {
			if t.State != tcclient.StateCompleted {
				fmt.Fprintf(a.env.Stdout, "%s  %s  %s\n", paintState(t.State, a.env.color()), t.TaskID, t.Name)
			}
		}
	}
	if s.Success {
		return nil
	}
	bad := s.Total - s.Counts[tcclient.StateCompleted]
	return &ExitError{Code: ExitFailed, Msg: fmt.Sprintf("task group %s: %d of %d tasks did not complete (%d failed, %d exception)",
		s.TaskGroupID, bad, s.Total, s.Counts[tcclient.StateFailed], s.Counts[tcclient.StateException])}
}
