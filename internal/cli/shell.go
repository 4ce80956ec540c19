package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/interactive"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

func shellCommand(run runFunc) *cobra.Command {
	return &cobra.Command{
		Use:   "shell TASKID",
		Short: "Open a shell inside a running interactive task",
		Long: `Open a shell inside a running interactive task (features.interactive), in
the task's own sandbox: its user, namespaces, limits and working directory.
It needs the scope interactive:open-shell:<taskQueueId>, and is recorded in
the audit log. The shell ends when you exit it or when the task ends; the
command exits with the shell's exit code.

A task run by Taskcluster's generic-worker gets the shell generic-worker
publishes (private/generic-worker/shell.html, read with your credentials),
through its websocktunnel: its secret URL is the key, as in Taskcluster.

A failed task is not interactive: create an interactive copy of it with
"hopper task interactive TASKID" and open a shell in the copy.`,
		Args: args("TASKID"),
		RunE: run(func(ctx context.Context, a *app, got []string) error { return a.shell(ctx, got[0]) }),
	}
}

func interactiveCommand(run runFunc) *cobra.Command {
	var copyOnly bool
	cmd := &cobra.Command{
		Use:   "interactive TASKID",
		Short: "Create an interactive copy of a task, to debug it from inside",
		Long: `Create a copy of a task with features.interactive on: same payload, scopes
and queue, in the same task group, without its routes and dependencies,
with no retries and a new deadline. Open a shell in it with
"hopper task shell NEW_TASKID" once it runs.

When the task's decision task (the task whose taskId is its taskGroupId)
declares a create-interactive action in its public/actions.json (as
taskgraph's decision tasks do for Treeherder), that action is triggered
instead, as Treeherder would: it makes the interactive task its own way.`,
		Args: args("TASKID"),
		RunE: run(func(ctx context.Context, a *app, got []string) error { return a.interactiveCopy(ctx, got[0], copyOnly) }),
	}
	cmd.Flags().BoolVar(&copyOnly, "copy", false, "copy the task even when its decision task declares a create-interactive action")
	return cmd
}

func (a *app) interactiveCopy(ctx context.Context, taskID string, copyOnly bool) error {
	var raw json.RawMessage
	if err := a.client.Do(ctx, http.MethodGet, "/task/"+taskID, nil, nil, &raw); err != nil {
		return failure("reading task "+taskID, err)
	}
	if !copyOnly {
		done, err := a.interactiveByAction(ctx, taskID, raw)
		if done || err != nil {
			return err
		}
	}
	var def map[string]any
	if err := json.Unmarshal(raw, &def); err != nil {
		return fmt.Errorf("reading task %s: %w", taskID, err)
	}
	cp, err := InteractiveCopy(def, a.env.now())
	if err != nil {
		return &ExitError{Code: ExitFailed, Msg: fmt.Sprintf("task %s: %v", taskID, err)}
	}
	newID := ident.NewSlugID()
	if _, err := a.client.CreateTaskDocument(ctx, newID, cp); err != nil {
		return failure("creating the interactive copy of "+taskID, err)
	}
	if a.json {
		return a.printJSON(map[string]string{"taskId": newID, "copyOf": taskID})
	}
	fmt.Fprintf(a.env.Stdout, "%s\n", newID)
	fmt.Fprintf(a.env.Stderr, "Created interactive task %s (a copy of %s); once it runs: hopper task shell %s\n", newID, taskID, newID)
	return nil
}

// InteractiveCopy returns the definition of an interactive copy of the
// task def: features.interactive on, no routes (no index entries, no
// notifications, no forge statuses), no dependencies, no retries, and
// created, deadline and expires from now, keeping the original's spans
// (at least an hour to the deadline).
func InteractiveCopy(def map[string]any, now time.Time) (map[string]any, error) {
	payload, ok := def["payload"].(map[string]any)
	if !ok {
		return nil, errors.New("its payload is not an object")
	}
	cp := make(map[string]any, len(def))
	for k, v := range def {
		cp[k] = v
	}
	pl := make(map[string]any, len(payload))
	for k, v := range payload {
		pl[k] = v
	}
	features := map[string]any{}
	if f, ok := payload["features"].(map[string]any); ok {
		for k, v := range f {
			features[k] = v
		}
	}
	features["interactive"] = true
	pl["features"] = features
	cp["payload"] = pl
	span := func(key string, least time.Duration) time.Duration {
		created, err1 := time.Parse(time.RFC3339, fmt.Sprint(def["created"]))
		at, err2 := time.Parse(time.RFC3339, fmt.Sprint(def[key]))
		if err1 != nil || err2 != nil || at.Sub(created) < least {
			return least
		}
		return at.Sub(created)
	}
	deadline := span("deadline", time.Hour)
	expires := max(span("expires", 24*time.Hour), deadline)
	stamp := func(d time.Duration) string { return now.Add(d).UTC().Format("2006-01-02T15:04:05.000Z") }
	cp["created"], cp["deadline"], cp["expires"] = stamp(0), stamp(deadline), stamp(expires)
	cp["routes"] = []any{}
	cp["dependencies"] = []any{}
	cp["retries"] = 0
	if md, ok := def["metadata"].(map[string]any); ok {
		m := make(map[string]any, len(md))
		for k, v := range md {
			m[k] = v
		}
		if name, _ := md["name"].(string); !strings.HasPrefix(name, "Interactive: ") {
			m["name"] = "Interactive: " + name
		}
		cp["metadata"] = m
	}
	return cp, nil
}

// shell joins the terminal to a shell in the task until either ends.
func (a *app) shell(ctx context.Context, taskID string) error {
	conn, proto, err := a.openShellWhenRunning(ctx, taskID)
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(interactive.MaxMessage + 1024)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	in := a.env.Stdin
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		old, err := term.MakeRaw(int(f.Fd()))
		if err == nil {
			defer func() { _ = term.Restore(int(f.Fd()), old) }()
		}
		sendSize := func() {
			if cols, rows, err := term.GetSize(int(f.Fd())); err == nil {
				typ, msg := proto.resize(cols, rows)
				_ = conn.Write(ctx, typ, msg)
			}
		}
		sendSize()
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-winch:
					sendSize()
				}
			}
		}()
	}
	if in != nil {
		go func() {
			buf := make([]byte, 4096)
			for {
				n, err := in.Read(buf)
				if n > 0 {
					if werr := conn.Write(ctx, websocket.MessageBinary, proto.input(buf[:n])); werr != nil {
						return
					}
				}
				if err != nil {
					// End of input ends the shell as ^D would.
					if errors.Is(err, io.EOF) {
						_ = conn.Write(ctx, websocket.MessageBinary, proto.input([]byte{4}))
					}
					return
				}
			}
		}()
	}
	for {
		typ, msg, err := conn.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return &ExitError{Code: ExitInterrupted, Msg: "interrupted"}
			}
			if proto.genericWorker {
				return proto.ended(err)
			}
			return &ExitError{Code: ExitFailed, Msg: fmt.Sprintf("the shell's connection ended: %v", err), Err: err}
		}
		if typ == websocket.MessageBinary {
			if _, err := a.env.Stdout.Write(msg); err != nil {
				return err
			}
			continue
		}
		c, err := interactive.ParseControl(msg)
		switch {
		case err != nil:
			continue
		case c.Error != "":
			return &ExitError{Code: ExitFailed, Msg: c.Error}
		case c.Exit != nil:
			_ = conn.Close(websocket.StatusNormalClosure, "")
			if *c.Exit == 0 {
				return nil
			}
			code := *c.Exit
			if code < 0 {
				code = ExitFailed
			}
			return &ExitError{Code: code, Msg: fmt.Sprintf("the shell exited with code %d", *c.Exit)}
		}
	}
}

// openShellWhenRunning opens a shell in taskID, waiting (with a notice)
// while the task is pending or its worker not connected yet: a copy made
// by "task interactive" is opened at once. A task that resolved is an
// error. A running task whose worker is Taskcluster's generic-worker
// (which never connects to hopper's relay) gets the shell generic-worker
// published, through its websocktunnel.
func (a *app) openShellWhenRunning(ctx context.Context, taskID string) (*websocket.Conn, shellProtocol, error) {
	said := false
	for {
		conn, err := a.client.OpenShell(ctx, taskID)
		if err == nil {
			return conn, shellProtocol{}, nil
		}
		// A task that is not interactive will not become so.
		if tcclient.StatusCode(err) != http.StatusConflict || strings.Contains(err.Error(), "not interactive") {
			return nil, shellProtocol{}, failure("opening a shell in task "+taskID, err)
		}
		st, serr := a.client.Status(ctx, taskID)
		if serr != nil || st.State != tcclient.StatePending && st.State != tcclient.StateRunning && st.State != tcclient.StateUnscheduled {
			return nil, shellProtocol{}, failure("opening a shell in task "+taskID, err)
		}
		if st.State == tcclient.StateRunning {
			gw, found, gerr := a.openGenericWorkerShell(ctx, taskID)
			if found || gerr != nil {
				return gw, shellProtocol{genericWorker: true}, gerr
			}
		}
		if !said {
			fmt.Fprintf(a.env.Stderr, "Waiting for task %s to run (%s)\n", taskID, st.State)
			said = true
		}
		if err := tcclient.SleepContext(ctx, a.env.pollInterval()); err != nil {
			return nil, shellProtocol{}, failure("opening a shell in task "+taskID, err)
		}
	}
}

// interactiveByAction triggers the create-interactive action of the
// task's decision task, if it declares one; done reports whether it did.
func (a *app) interactiveByAction(ctx context.Context, taskID string, raw json.RawMessage) (done bool, err error) {
	var task tcclient.TaskDefinition
	if err := json.Unmarshal(raw, &task); err != nil {
		return false, fmt.Errorf("reading task %s: %w", taskID, err)
	}
	if task.TaskGroupID == "" {
		return false, nil
	}
	act, f, err := a.interactiveAction(ctx, &task)
	if errors.Is(err, errNoAction) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	id, err := a.runAction(ctx, act, f, taskID, raw, task.TaskGroupID)
	if err != nil {
		return false, err
	}
	if a.json {
		return true, a.printJSON(map[string]string{"taskId": id, "action": act.Name, "kind": act.Kind, "for": taskID})
	}
	fmt.Fprintf(a.env.Stdout, "%s\n", id)
	fmt.Fprintf(a.env.Stderr, "Triggered the %s action (%s) of decision task %s for %s: task %s makes the interactive task\n",
		act.Name, act.Kind, task.TaskGroupID, taskID, id)
	return true, nil
}
