package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// ListOptions are the flags of `hopper task list`.
type ListOptions struct {
	Filter tcclient.TaskFilter
	// Since lists tasks created that long ago or later (instead of From).
	Since time.Duration
	From  string
	To    string
	Limit int
	// Page continues a listing where an earlier one stopped.
	Page string
}

// ListedTask is one line of `task list --json`.
type ListedTask struct {
	TaskID      string `json:"taskId"`
	State       string `json:"state"`
	Name        string `json:"name"`
	TaskQueueID string `json:"taskQueueId"`
	TaskGroupID string `json:"taskGroupId"`
	Created     string `json:"created"`
}

// TaskListing is `task list --json`'s output.
type TaskListing struct {
	Tasks []ListedTask `json:"tasks"`
	// ContinuationToken, when set, gives the next page with --page.
	ContinuationToken string `json:"continuationToken,omitempty"`
}

func listCommand(run runFunc) *cobra.Command {
	var opts ListOptions
	cmd := &cobra.Command{
		Use:   "list [--state S] [--queue Q] [--group G] [--name TEXT] [--since D | --from T --to T]",
		Short: "Find tasks of every queue by state, queue, group, name and creation time, newest first",
		Long: `List tasks of every task queue, newest first, without knowing their taskIds
(hopper's own /api/hopper/v1/tasks; Taskcluster has no such method). Filters
combine; --name matches anywhere in the task's name, ignoring case. Times are
RFC 3339 (2030-01-02T15:04:05Z) or, for --since, a duration (90m, 24h).

One page of --limit tasks is printed; when more match, the last line gives
the --page token that continues the listing.`,
		Args: args(),
		RunE: run(func(ctx context.Context, a *app, _ []string) error { return a.list(ctx, opts) }),
	}
	f := cmd.Flags()
	f.StringVar(&opts.Filter.State, "state", "", "unscheduled, pending, running, completed, failed or exception")
	f.StringVar(&opts.Filter.TaskQueueID, "queue", "", "task queue (provisioner/workerType)")
	f.StringVar(&opts.Filter.TaskGroupID, "group", "", "task group id")
	f.StringVar(&opts.Filter.Name, "name", "", "text found in the task's name")
	f.DurationVar(&opts.Since, "since", 0, "tasks created within this long (e.g. 24h)")
	f.StringVar(&opts.From, "from", "", "tasks created at or after this time (RFC 3339)")
	f.StringVar(&opts.To, "to", "", "tasks created before this time (RFC 3339)")
	f.IntVar(&opts.Limit, "limit", 50, "tasks per page (1-1000)")
	f.StringVar(&opts.Page, "page", "", "continue from the token a previous listing printed")
	return cmd
}

// filter completes the filter from the time flags, checking them.
func (o ListOptions) filter(now time.Time) (tcclient.TaskFilter, error) {
	f := o.Filter
	if o.Since > 0 && o.From != "" {
		return f, usagef("--since and --from both set the start; give one")
	}
	if o.Since < 0 {
		return f, usagef("--since must be positive, not %s", o.Since)
	}
	if o.Since > 0 {
		f.CreatedFrom = now.Add(-o.Since)
	}
	for _, t := range []struct {
		flag, value string
		into        *time.Time
	}{{"--from", o.From, &f.CreatedFrom}, {"--to", o.To, &f.CreatedTo}} {
		if t.value == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339Nano, t.value)
		if err != nil {
			return f, usagef("%s %q is not an RFC 3339 time such as 2030-01-02T15:04:05Z", t.flag, t.value)
		}
		*t.into = v
	}
	switch f.State {
	case "", tcclient.StateUnscheduled, tcclient.StatePending, tcclient.StateRunning,
		tcclient.StateCompleted, tcclient.StateFailed, tcclient.StateException:
	default:
		return f, usagef("--state %q is not a task state (unscheduled, pending, running, completed, failed, exception)", f.State)
	}
	if f.TaskGroupID != "" {
		if err := checkTaskID("--group", f.TaskGroupID); err != nil {
			return f, err
		}
	}
	if o.Limit < 1 || o.Limit > 1000 {
		return f, usagef("--limit must be from 1 to 1000, not %d", o.Limit)
	}
	return f, nil
}

func (a *app) list(ctx context.Context, o ListOptions) error {
	f, err := o.filter(time.Now())
	if err != nil {
		return err
	}
	res, err := a.client.ListTasks(ctx, f, tcclient.ListOptions{Limit: o.Limit, ContinuationToken: o.Page})
	if err != nil {
		return failure("listing tasks", err)
	}
	out := TaskListing{Tasks: make([]ListedTask, 0, len(res.Tasks)), ContinuationToken: res.ContinuationToken}
	for _, t := range res.Tasks {
		out.Tasks = append(out.Tasks, ListedTask{TaskID: t.Status.TaskID, State: t.Status.State, Name: t.Task.Metadata.Name,
			TaskQueueID: t.Task.TaskQueueID, TaskGroupID: t.Task.TaskGroupID, Created: t.Task.Created.String()})
	}
	if a.json {
		return a.printJSON(out)
	}
	w := a.env.Stdout
	if len(out.Tasks) == 0 {
		fmt.Fprintln(w, "no tasks match")
		return nil
	}
	for _, t := range out.Tasks {
		created := t.Created
		if c, err := time.Parse(time.RFC3339Nano, t.Created); err == nil {
			created = c.Local().Format("2006-01-02 15:04:05 MST")
		}
		fmt.Fprintf(w, "%s%s  %s  %s  %-24s  %s\n", paintState(t.State, a.env.color()),
			strings.Repeat(" ", len(tcclient.StateUnscheduled)-len(t.State)), t.TaskID, created, t.TaskQueueID, t.Name)
	}
	if out.ContinuationToken != "" {
		fmt.Fprintf(w, "more tasks match: add --page %s\n", out.ContinuationToken)
	}
	return nil
}
