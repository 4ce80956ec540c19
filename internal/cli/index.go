package cli

import (
	"encoding/json"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// printIndexedTask prints an index entry for humans.
func printIndexedTask(w io.Writer, e *tcclient.IndexedTask) error {
	t := newTable(w)
	t.row("namespace:", e.Namespace)
	t.row("taskId:", e.TaskID)
	t.row("rank:", formatRank(e.Rank))
	t.row("expires:", e.Expires)
	t.row("data:", string(e.Data))
	return t.flush()
}

// NewIndexCommand is `hopper index`: find, browse and insert entries of the
// Index service.
func NewIndexCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "index",
		Short: "Find, list and insert indexed tasks",
		Long: `Use the Index service. A task that completes with a route
"index.<path>" is indexed at <path> (rank from extra.index.rank, expiry
from extra.index.expires or the task's); "hopper index find <path>" names
the task found there.

` + authCLIEnvHelp,
		Args: cobra.NoArgs,
	}
	var asJSON bool
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print the API's JSON reply instead of text")
	cmd.AddCommand(indexFindCommand(&asJSON), indexListCommand(&asJSON), indexInsertCommand(&asJSON))
	return cmd
}

// indexFindCommand is `hopper index find`.
func indexFindCommand(asJSON *bool) *cobra.Command {
	return &cobra.Command{
		Use:   "find PATH",
		Short: "Show the task indexed at a path",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			e, err := c.FindIndexedTask(cmd.Context(), args[0])
			if err != nil {
				return authCLIError("finding "+args[0], err)
			}
			if *asJSON {
				return printAuthJSON(cmd.OutOrStdout(), e)
			}
			return printIndexedTask(cmd.OutOrStdout(), e)
		},
	}
}

// indexListCommand is `hopper index list`: the namespaces and entries
// directly under a namespace.
func indexListCommand(asJSON *bool) *cobra.Command {
	return &cobra.Command{
		Use:   "list [NAMESPACE]",
		Short: "List the namespaces and entries directly under a namespace (default: the root)",
		Args:  atMostArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns := ""
			if len(args) == 1 {
				ns = args[0]
			}
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			namespaces, err := c.AllIndexNamespaces(cmd.Context(), ns)
			if err != nil {
				return authCLIError("listing namespace "+quoteRoot(ns), err)
			}
			tasks, err := c.AllIndexedTasks(cmd.Context(), ns)
			if err != nil {
				return authCLIError("listing namespace "+quoteRoot(ns), err)
			}
			// Empty lists print as [] in JSON, not null.
			if namespaces == nil {
				namespaces = []tcclient.IndexNamespace{}
			}
			if tasks == nil {
				tasks = []tcclient.IndexedTask{}
			}
			if *asJSON {
				return printAuthJSON(cmd.OutOrStdout(), map[string]any{"namespaces": namespaces, "tasks": tasks})
			}
			t := newTable(cmd.OutOrStdout(), "PATH", "TASK ID", "RANK", "EXPIRES")
			for _, n := range namespaces {
				t.row(n.Namespace+".", "-", "-", n.Expires)
			}
			for _, task := range tasks {
				t.row(task.Namespace, task.TaskID, formatRank(task.Rank), task.Expires)
			}
			return t.flush()
		},
	}
}

// indexInsertCommand is `hopper index insert`.
func indexInsertCommand(asJSON *bool) *cobra.Command {
	var (
		rank          float64
		expires, data string
	)
	insert := &cobra.Command{
		Use:   "insert PATH TASK_ID",
		Short: "Index a task at a path (kept unless an entry of higher rank is there)",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			until, err := parseClientExpiry(expires, time.Now())
			if err != nil {
				return usagef("%v", err)
			}
			if !json.Valid([]byte(data)) || len(data) == 0 || data[0] != '{' {
				return usagef("--data must be a JSON object")
			}
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			e, err := c.InsertIndexedTask(cmd.Context(), args[0], &tcclient.InsertIndexedTaskRequest{
				TaskID: args[1], Rank: rank, Data: json.RawMessage(data), Expires: tcclient.NewTime(until)})
			if err != nil {
				return authCLIError("indexing "+args[1]+" at "+args[0], err)
			}
			if *asJSON {
				return printAuthJSON(cmd.OutOrStdout(), e)
			}
			return printIndexedTask(cmd.OutOrStdout(), e)
		},
	}
	insert.Flags().Float64Var(&rank, "rank", 0, "the entry's rank: an entry of higher rank at the path is kept")
	insert.Flags().StringVar(&expires, "expires", "1y", "when the entry expires: a date-time or a duration from now (90d, 1y, 36h)")
	insert.Flags().StringVar(&data, "data", "{}", "JSON object stored with the entry")
	return insert
}

// formatRank prints a rank as its digits (1700000000, not 1.7e+09).
func formatRank(r float64) string { return strconv.FormatFloat(r, 'f', -1, 64) }

// quoteRoot names a namespace in messages, the root included.
func quoteRoot(ns string) string {
	if ns == "" {
		return "(root)"
	}
	return ns
}
