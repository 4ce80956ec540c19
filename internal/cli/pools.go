package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// NewPoolCommand is `hopper pool`: manage worker pools and their static
// workers through the Worker Manager API.
func NewPoolCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pool",
		Short: "Manage worker pools: create, update, list, show, remove, add-worker, remove-worker",
		Long: `Manage worker pools (the Worker Manager). A pool is defined in a YAML or
JSON file with providerId, description, owner, emailOnError and config; its
task queue is its id, <provisionerId>/<workerType>. A machine joins a static
pool with one secret: "hopper pool add-worker" makes it and writes it to a
file for the machine, which runs "hopper worker --worker-pool POOL
--static-secret-file FILE" or Taskcluster's worker-runner (docs/worker-pools.md).

` + authCLIEnvHelp,
		Args: cobra.NoArgs,
	}
	var asJSON bool
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print the API's JSON reply instead of text")
	cmd.AddCommand(poolDefineCommand(&asJSON, "create"), poolDefineCommand(&asJSON, "update"), poolListCommand(&asJSON), poolShowCommand(&asJSON),
		poolRemoveCommand(&asJSON), poolAddWorkerCommand(&asJSON), poolRemoveWorkerCommand(&asJSON))
	return cmd
}

// poolDefineCommand is `hopper pool create` or `update` (verb): the pool
// read from a file.
func poolDefineCommand(asJSON *bool, verb string) *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:   verb + " WORKER_POOL_ID -f FILE",
		Short: map[string]string{"create": "Create", "update": "Replace"}[verb] + " a worker pool from a YAML or JSON file (- reads standard input)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			def, err := readPoolFile(file, cmd.InOrStdin())
			if err != nil {
				return err
			}
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			call := c.CreateWorkerPool
			if verb == "update" {
				call = c.UpdateWorkerPool
			}
			p, err := call(cmd.Context(), args[0], def)
			if err != nil {
				return authCLIError(verb+" worker pool "+args[0], err)
			}
			return printReply(cmd, *asJSON, p, func(w io.Writer) error { return printPool(w, p, nil, nil) })
		},
	}
	c.Flags().StringVarP(&file, "file", "f", "", "the pool definition (YAML or JSON; - for standard input)")
	_ = c.MarkFlagRequired("file")
	return c
}

// poolListCommand is `hopper pool list`.
func poolListCommand(asJSON *bool) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the worker pools with their capacity",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			pools, err := c.AllWorkerPools(cmd.Context())
			if err != nil {
				return authCLIError("listing worker pools", err)
			}
			if pools == nil {
				pools = []tcclient.WorkerPool{}
			}
			return printReply(cmd, *asJSON, map[string]any{"workerPools": pools}, func(w io.Writer) error {
				t := newTable(w, "POOL", "PROVIDER", "REQUESTED", "RUNNING", "STOPPING", "CAPACITY")
				for _, p := range pools {
					t.row(p.WorkerPoolID, p.ProviderID, p.RequestedCount, p.RunningCount, p.StoppingCount, p.CurrentCapacity)
				}
				return t.flush()
			})
		},
	}
}

// poolShowCommand is `hopper pool show`: a pool, its workers and its latest errors.
func poolShowCommand(asJSON *bool) *cobra.Command {
	return &cobra.Command{
		Use:   "show WORKER_POOL_ID",
		Short: "Show a pool, its workers and its latest errors",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			p, err := c.GetWorkerPool(cmd.Context(), args[0])
			if err != nil {
				return authCLIError("reading worker pool "+args[0], err)
			}
			workers, err := c.AllPoolWorkers(cmd.Context(), args[0])
			if err != nil {
				return authCLIError("listing the workers of "+args[0], err)
			}
			errs, err := c.ListWorkerPoolErrors(cmd.Context(), args[0], 10)
			if err != nil {
				return authCLIError("listing the errors of "+args[0], err)
			}
			return printReply(cmd, *asJSON, map[string]any{"workerPool": p, "workers": workers, "errors": errs}, func(w io.Writer) error {
				return printPool(w, p, workers, errs)
			})
		},
	}
}

// poolRemoveCommand is `hopper pool remove`.
func poolRemoveCommand(asJSON *bool) *cobra.Command {
	return &cobra.Command{
		Use:   "remove WORKER_POOL_ID",
		Short: "Delete a pool (it goes once its workers are gone)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			p, err := c.DeleteWorkerPool(cmd.Context(), args[0])
			if err != nil {
				return authCLIError("deleting worker pool "+args[0], err)
			}
			return printReply(cmd, *asJSON, p, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "worker pool %s deleted (its provider is now %s)\n", args[0], p.ProviderID)
				return err
			})
		},
	}
}

// poolAddWorkerCommand is `hopper pool add-worker`: a static worker, its
// secret written to a file for the machine.
func poolAddWorkerCommand(asJSON *bool) *cobra.Command {
	var (
		secretFile, expires string
		capacity            int
	)
	addWorker := &cobra.Command{
		Use:   "add-worker WORKER_POOL_ID WORKER_GROUP WORKER_ID --secret-file FILE",
		Short: "Add a machine to a static pool: make its secret, write it to FILE (mode 0600) and declare the worker",
		Args:  exactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			until, err := parseClientExpiry(expires, time.Now())
			if err != nil {
				return usagef("%v", err)
			}
			secret, err := newStaticSecret()
			if err != nil {
				return err
			}
			f, err := os.OpenFile(secretFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return usagef("writing the secret: %v (the file must not exist yet)", err)
			}
			if _, err := f.WriteString(secret + "\n"); err != nil {
				f.Close()
				return fmt.Errorf("writing the secret: %w", err)
			}
			if err := f.Close(); err != nil {
				return fmt.Errorf("writing the secret: %w", err)
			}
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("capacity") {
				// What the pool tells the worker to run with, so that the
				// pool counts the machine as it works.
				if capacity, err = poolWorkerCapacity(cmd.Context(), c, args[0]); err != nil {
					_ = os.Remove(secretFile)
					return authCLIError("reading pool "+args[0], err)
				}
			}
			w, err := c.CreateStaticWorker(cmd.Context(), args[0], args[1], args[2], tcclient.NewTime(until), capacity, secret)
			if err != nil {
				_ = os.Remove(secretFile)
				return authCLIError("adding worker "+args[1]+"/"+args[2]+" to "+args[0], err)
			}
			return printReply(cmd, *asJSON, w, func(out io.Writer) error {
				_, err := fmt.Fprintf(out, "worker %s/%s added to %s (expires %s); its secret is in %s: copy it to the machine and run\n"+
					"  hopper worker --root-url %s --worker-pool %s --worker-group %s --worker-id %s --static-secret-file FILE\n",
					args[1], args[2], args[0], w.Expires, secretFile, c.RootURL, args[0], args[1], args[2])
				return err
			})
		},
	}
	addWorker.Flags().StringVar(&secretFile, "secret-file", "", "where to write the worker's new secret (must not exist)")
	addWorker.Flags().StringVar(&expires, "expires", "1y", "when the worker expires: a date-time or a duration from now")
	addWorker.Flags().IntVar(&capacity, "capacity", 1, "tasks the machine runs at once (default: the pool's workerConfig.hopperWorker.capacity, else 1)")
	_ = addWorker.MarkFlagRequired("secret-file")
	return addWorker
}

// poolRemoveWorkerCommand is `hopper pool remove-worker`.
func poolRemoveWorkerCommand(asJSON *bool) *cobra.Command {
	return &cobra.Command{
		Use:   "remove-worker WORKER_POOL_ID WORKER_GROUP WORKER_ID",
		Short: "Remove a worker: it stops, and the tasks it had claimed go back to pending at once",
		Args:  exactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			if err := c.RemoveWorker(cmd.Context(), args[0], args[1], args[2]); err != nil {
				return authCLIError("removing worker "+args[1]+"/"+args[2], err)
			}
			return printReply(cmd, *asJSON, map[string]any{}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "worker %s/%s removed from %s\n", args[1], args[2], args[0])
				return err
			})
		},
	}
}

// newStaticSecret makes a static secret: 33 random bytes, base64url, 44
// characters (the pattern Taskcluster's schema asks).
func newStaticSecret() (string, error) {
	var b [33]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("making a secret: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

func readPoolFile(path string, stdin io.Reader) (*tcclient.WorkerPoolDefinition, error) {
	data, name, err := readInput(path, stdin)
	if err != nil {
		return nil, err
	}
	doc, err := parseDocument(name, data, "a worker pool definition")
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", name, err)
	}
	var def tcclient.WorkerPoolDefinition
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&def); err != nil {
		return nil, usagef("%s: not a worker pool definition: %v", name, err)
	}
	if len(def.Config) == 0 {
		def.Config = json.RawMessage(`{}`)
	}
	return &def, nil
}

func printPool(w io.Writer, p *tcclient.WorkerPool, workers []tcclient.PoolWorker, errs []tcclient.PoolError) error {
	t := newTable(w)
	t.row("pool:", p.WorkerPoolID)
	t.row("provider:", p.ProviderID)
	t.row("owner:", p.Owner)
	t.row("workers:", fmt.Sprintf("%d requested, %d running, %d stopping, %d stopped (capacity %d)",
		p.RequestedCount, p.RunningCount, p.StoppingCount, p.StoppedCount, p.CurrentCapacity))
	if err := t.flush(); err != nil {
		return err
	}
	if len(workers) > 0 {
		fmt.Fprintln(w)
		t = newTable(w, "WORKER", "STATE", "CAPACITY", "EXPIRES")
		for _, wk := range workers {
			t.row(wk.WorkerGroup+"/"+wk.WorkerID, wk.State, wk.Capacity, wk.Expires)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(errs) > 0 {
		fmt.Fprintln(w)
		for _, e := range errs {
			fmt.Fprintf(w, "%s  %s: %s\n", e.Reported, e.Kind, e.Title)
		}
	}
	return nil
}

// poolWorkerCapacity is the capacity a pool's workerConfig gives hopper's
// worker (workerConfig.hopperWorker.capacity), or 1.
func poolWorkerCapacity(ctx context.Context, c *tcclient.Client, poolID string) (int, error) {
	p, err := c.GetWorkerPool(ctx, poolID)
	if err != nil {
		return 0, err
	}
	var cfg struct {
		WorkerConfig struct {
			HopperWorker struct {
				Capacity int `json:"capacity"`
			} `json:"hopperWorker"`
		} `json:"workerConfig"`
	}
	if json.Unmarshal(p.Config, &cfg) == nil && cfg.WorkerConfig.HopperWorker.Capacity > 0 {
		return cfg.WorkerConfig.HopperWorker.Capacity, nil
	}
	return 1, nil
}
