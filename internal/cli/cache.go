package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// NewCacheCommand is `hopper cache`: ask workers to empty their caches
// through the Purge-Cache API.
func NewCacheCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Purge worker caches: purge, requests",
		Long: `Ask the workers of a worker pool (<provisionerId>/<workerType>, the task
queue they serve) to empty a cache: each worker empties its caches of that
name created before the request, before their next use.

` + authCLIEnvHelp,
		Args: cobra.NoArgs,
	}
	purge := &cobra.Command{
		Use:   "purge WORKER_POOL_ID CACHE_NAME",
		Short: "Ask the pool's workers to empty a cache (needs purge-cache:<workerPoolId>:<cacheName>)",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			if err := c.PurgeCache(cmd.Context(), args[0], args[1]); err != nil {
				return authCLIError("purging cache "+args[1]+" of "+args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "purge requested: workers of %s empty cache %q before its next use\n", args[0], args[1])
			return nil
		},
	}
	var since time.Duration
	requests := &cobra.Command{
		Use:   "requests WORKER_POOL_ID",
		Short: "List a pool's open purge requests (requests are kept a day)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			var from time.Time
			if since > 0 {
				from = time.Now().Add(-since)
			}
			reqs, err := c.PurgeRequests(cmd.Context(), args[0], from)
			if err != nil {
				return authCLIError("listing purge requests of "+args[0], err)
			}
			t := newTable(cmd.OutOrStdout(), "CACHE", "BEFORE")
			for _, r := range reqs {
				t.row(r.CacheName, r.Before)
			}
			return t.flush()
		},
	}
	requests.Flags().DurationVar(&since, "since", 0, "only requests made in this last period (e.g. 1h); default all")
	cmd.AddCommand(purge, requests)
	return cmd
}
