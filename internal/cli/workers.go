package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// NewWorkerListCommand is `hopper worker list`: the workers of a task
// queue with whether each is online, its busy slots against its capacity
// and its latest task (the Queue's listWorkers, with hopper's fields).
func NewWorkerListCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list TASK_QUEUE_ID",
		Short: "List the workers of a task queue: online or offline, busy slots, capacity, latest task",
		Long: `List the workers the queue has seen on a task queue (<provisionerId>/<workerType>).

A worker is online while it asked for work or reclaimed a run within the
long-poll and a minute, or holds a run whose claim lasts; busy counts the
runs it holds, capacity the most tasks it asked for at once since it came
online (docs/history.md, "Workers").

` + authCLIEnvHelp,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !ident.ValidTaskQueueID(args[0]) {
				return usagef("%q is not a task queue id (<provisionerId>/<workerType>)", args[0])
			}
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			var workers []tcclient.QueueWorker
			opts := tcclient.ListOptions{Limit: 1000}
			for {
				page, err := c.ListWorkers(cmd.Context(), args[0], opts)
				if err != nil {
					return authCLIError("listing the workers of "+args[0], err)
				}
				workers = append(workers, page.Workers...)
				if page.ContinuationToken == "" {
					break
				}
				opts.ContinuationToken = page.ContinuationToken
			}
			if asJSON {
				return printAuthJSON(cmd.OutOrStdout(), map[string]any{"workers": workers})
			}
			return printWorkers(cmd.OutOrStdout(), workers, time.Now())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the API's JSON reply instead of text")
	return cmd
}

// printWorkers prints one line a worker: online ones first.
func printWorkers(w io.Writer, workers []tcclient.QueueWorker, now time.Time) error {
	if len(workers) == 0 {
		_, err := fmt.Fprintln(w, "no workers seen on this task queue")
		return err
	}
	t := newTable(w, "WORKER", "STATE", "BUSY", "CAPACITY", "LAST SEEN", "LATEST TASK", "QUARANTINED")
	for _, online := range []bool{true, false} {
		for _, wk := range workers {
			if wk.Online != online {
				continue
			}
			state := "offline"
			if online {
				state = "online"
			}
			capacity := "?"
			if wk.Capacity > 0 {
				capacity = fmt.Sprint(wk.Capacity)
			}
			latest, quarantined := "", ""
			if wk.LatestTask != nil {
				latest = wk.LatestTask.TaskID
			}
			if wk.QuarantineUntil.After(now) {
				quarantined = "until " + wk.QuarantineUntil.Local().Format("2006-01-02 15:04 MST")
			}
			t.row(wk.WorkerGroup+"/"+wk.WorkerID, state, wk.Busy, capacity, ago(wk.LastDateActive.Time, now), latest, quarantined)
		}
	}
	return t.flush()
}

// ago says how long before now t was, to the second.
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String() + " ago"
}
