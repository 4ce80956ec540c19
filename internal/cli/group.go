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
	// BlockedBy is set on an unscheduled task that can never run: the
	// dependency that failed, ended in exception or is itself blocked.
	BlockedBy string `json:"blockedBy,omitempty"`
}

// GroupSummary is a task group at one moment; `group --json` prints the
// final one.
type GroupSummary struct {
	TaskGroupID string `json:"taskGroupId"`
	// Total is the number of tasks, Resolved how many are completed,
	// failed or exception.
	Total    int `json:"total"`
	Resolved int `json:"resolved"`
	// Blocked is the number of unscheduled tasks that can never run
	// (GroupTask.BlockedBy).
	Blocked int `json:"blocked"`
	// Counts has an entry for every state, zero or not.
	Counts map[string]int `json:"counts"`
	// Done is set once every task is resolved; Success additionally
	// requires every task to have completed. Stuck is set once nothing
	// more can run: every task is resolved or blocked, and some are
	// blocked (they resolve exception only at their deadlines).
	Done    bool        `json:"done"`
	Stuck   bool        `json:"stuck"`
	Success bool        `json:"success"`
	Tasks   []GroupTask `json:"tasks"`
}

// SummarizeGroup counts a task group's members by state and finds the
// blocked ones; outside holds what is known of dependencies that are not
// members (nil: nothing).
func SummarizeGroup(taskGroupID string, members []tcclient.TaskGroupMember, outside map[string]depNode) GroupSummary {
	s := GroupSummary{TaskGroupID: taskGroupID, Counts: map[string]int{}, Tasks: []GroupTask{}}
	for _, st := range groupStates {
		s.Counts[st] = 0
	}
	nodes := groupNodes(members)
	for id, n := range outside {
		if _, member := nodes[id]; !member {
			nodes[id] = n
		}
	}
	blocked := blockedBy(nodes)
	for _, m := range members {
		s.Counts[m.Status.State]++
		t := GroupTask{TaskID: m.Status.TaskID, Name: m.Task.Metadata.Name, State: m.Status.State}
		if by, ok := blocked[t.TaskID]; ok {
			t.BlockedBy = by
			s.Blocked++
		}
		s.Tasks = append(s.Tasks, t)
		if isResolved(m.Status.State) {
			s.Resolved++
		}
	}
	s.Total = len(members)
	s.Done = s.Resolved == s.Total
	s.Stuck = s.Blocked > 0 && s.Resolved+s.Blocked == s.Total
	s.Success = s.Done && s.Counts[tcclient.StateCompleted] == s.Total
	return s
}

// groupNodes is the dependency graph of a group's members.
func groupNodes(members []tcclient.TaskGroupMember) map[string]depNode {
	nodes := make(map[string]depNode, len(members))
	for _, m := range members {
		nodes[m.Status.TaskID] = depNode{ID: m.Status.TaskID, Name: m.Task.Metadata.Name, State: m.Status.State,
			Requires: m.Task.Requires, Deps: m.Task.Dependencies}
	}
	return nodes
}

// outsideDeps looks up the dependencies of a group's unscheduled members
// that are not members themselves; resolved ones are kept in cache
// between polls.
func (a *app) outsideDeps(ctx context.Context, members []tcclient.TaskGroupMember, cache map[string]depNode) map[string]depNode {
	nodes := groupNodes(members)
	member := make(map[string]bool, len(nodes))
	for id := range nodes {
		member[id] = true
	}
	a.lookUpDeps(ctx, nodes, cache)
	outside := map[string]depNode{}
	for id, n := range nodes {
		if !member[id] {
			outside[id] = n
		}
	}
	return outside
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
		if state == tcclient.StateUnscheduled && s.Blocked > 0 {
			row += fmt.Sprintf("  %d blocked", s.Blocked)
		}
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
	if s.Blocked > 0 {
		parts[0] += fmt.Sprintf(" (%d blocked)", s.Blocked)
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
		return a.groupListing(SummarizeGroup(taskGroupID, list.Tasks, a.outsideDeps(ctx, list.Tasks, nil)))
	}
	frame := &frameWriter{w: a.env.Stdout}
	lastLine := ""
	resolvedDeps := map[string]depNode{}
	for {
		list, err := a.client.ListAllTaskGroup(ctx, taskGroupID)
		if err != nil {
			if ctx.Err() != nil {
				return &ExitError{Code: ExitInterrupted, Msg: "interrupted", Err: ctx.Err()}
			}
			return failure("listing task group "+taskGroupID, err)
		}
		s := SummarizeGroup(taskGroupID, list.Tasks, a.outsideDeps(ctx, list.Tasks, resolvedDeps))
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
		if s.Done || s.Stuck {
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
			fmt.Fprintf(a.env.Stdout, "%s%s  %s  %s%s\n", paintState(t.State, a.env.color()),
				strings.Repeat(" ", len(tcclient.StateUnscheduled)-len(t.State)), t.TaskID, t.Name, blockedNote(s, t))
		}
	}
	if bad := s.Counts[tcclient.StateFailed] + s.Counts[tcclient.StateException]; bad > 0 {
		return &ExitError{Code: ExitFailed, Msg: groupFailure(s)}
	}
	return nil
}

// blockedNote is what a listing adds after a blocked task.
func blockedNote(s GroupSummary, t GroupTask) string {
	if t.BlockedBy == "" {
		return ""
	}
	label := t.BlockedBy
	for _, d := range s.Tasks {
		if d.TaskID == t.BlockedBy {
			label = d.TaskID + " (" + taskLabel(d) + ", " + d.State
			if d.BlockedBy != "" {
				label += ", blocked"
			}
			label += ")"
		}
	}
	return "  blocked by " + label
}

// groupFailure words a group that did not complete.
func groupFailure(s GroupSummary) string {
	bad := s.Counts[tcclient.StateFailed] + s.Counts[tcclient.StateException]
	msg := fmt.Sprintf("task group %s: %d of %s did not complete (%d failed, %d exception)",
		s.TaskGroupID, bad+s.Blocked, count(s.Total, "task"), s.Counts[tcclient.StateFailed], s.Counts[tcclient.StateException])
	if s.Blocked > 0 {
		msg = fmt.Sprintf("task group %s: %d of %s did not complete (%d failed, %d exception, %d blocked)",
			s.TaskGroupID, bad+s.Blocked, count(s.Total, "task"), s.Counts[tcclient.StateFailed], s.Counts[tcclient.StateException], s.Blocked)
		if s.Stuck {
			msg += "; nothing more can run"
		}
	}
	return msg
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
				fmt.Fprintf(a.env.Stdout, "%s  %s  %s%s\n", paintState(t.State, a.env.color()), t.TaskID, t.Name, blockedNote(s, t))
			}
		}
	}
	if s.Success {
		return nil
	}
	return &ExitError{Code: ExitFailed, Msg: groupFailure(s)}
}
