package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// CreateOptions are the inputs of `task create`.
type CreateOptions struct {
	// File is the definition's path, "-" for stdin.
	File string
	// TaskID and TaskQueueID override the file's.
	TaskID, TaskQueueID string
}

// createdOutput is what create and run print with --json.
type createdOutput struct {
	TaskID string              `json:"taskId"`
	Status tcclient.TaskStatus `json:"status"`
}

// maxTaskFile bounds what is read from a task file: the queue refuses
// bodies over 10 MB anyway.
const maxTaskFile = 10 << 20

func (a *app) create(ctx context.Context, opts CreateOptions) error {
	if opts.File == "" {
		return usagef("task create needs -f FILE (a YAML or JSON task definition, - for stdin)")
	}
	data, err := a.readFile(opts.File)
	if err != nil {
		return err
	}
	doc, err := ParseTaskDocument(displayName(opts.File), data)
	if err != nil {
		return err
	}
	if isPipeline(doc) {
		return a.createPipeline(ctx, displayName(opts.File), doc, opts)
	}
	taskID, err := FillDefaults(doc, Defaults{
		TaskID: opts.TaskID, TaskQueueID: opts.TaskQueueID, Now: a.env.now(), RootURL: a.client.RootURL,
		Name:        "hopper task create " + displayName(opts.File),
		Description: "Created with `hopper task create` from " + displayName(opts.File) + ".",
		Owner:       a.owner(),
	})
	if err != nil {
		return err
	}
	warnPayload(a.env.Stderr, doc, "")
	st, err := a.client.CreateTaskDocument(ctx, taskID, doc)
	if err != nil {
		return failure("creating task "+taskID, err)
	}
	if a.json {
		return a.printJSON(createdOutput{TaskID: taskID, Status: *st})
	}
	_, err = fmt.Fprintf(a.env.Stdout, "Task %s created on %s: %s\n%s\n", taskID, st.TaskQueueID,
		a.paint(st.State), taskPageURL(a.client, taskID))
	return err
}

func (a *app) readFile(name string) ([]byte, error) {
	var r io.Reader
	if name == "-" {
		if a.env.Stdin == nil {
			return nil, usagef("cannot read the task definition from stdin: no stdin")
		}
		r = a.env.Stdin
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, usagef("cannot read %s: %v", name, unwrapPathError(err))
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxTaskFile+1))
	if err != nil {
		return nil, usagef("cannot read %s: %v", name, unwrapPathError(err))
	}
	if len(data) > maxTaskFile {
		return nil, usagef("%s is larger than %d MB, the queue's limit for a task definition", name, maxTaskFile>>20)
	}
	return data, nil
}

// unwrapPathError drops the path an *os.PathError repeats, since messages
// name the file already.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// owner is the default metadata.owner: who runs the command.
func (a *app) owner() string {
	for _, v := range []string{"TASKCLUSTER_TASK_OWNER", "EMAIL", "USER", "LOGNAME"} {
		if s := strings.TrimSpace(a.env.getenv(v)); s != "" {
			return s
		}
	}
	return "hopper-cli"
}

func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.env.Stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}

// RunOptions are the inputs of `task run`.
type RunOptions struct {
	// Command is the argv the task runs.
	Command []string
	// TaskQueueID is where the task goes.
	TaskQueueID string
	// MaxRunTime is the payload's maxRunTime (whole seconds).
	MaxRunTime time.Duration
	// Env are K=V pairs for payload.env.
	Env []string
	// Artifacts are file paths the task publishes.
	Artifacts []string
	// Name is metadata.name; empty means the command line.
	Name string
}

// RunPayload builds the generic-worker payload of `task run`.
func RunPayload(opts RunOptions) (map[string]any, error) {
	if len(opts.Command) == 0 || opts.Command[0] == "" {
		return nil, usagef("task run needs a command to run")
	}
	secs := int64((opts.MaxRunTime + time.Second - 1) / time.Second)
	if secs < 1 {
		return nil, usagef("--max-run-time must be at least 1s")
	}
	argv := make([]any, len(opts.Command))
	for i, a := range opts.Command {
		argv[i] = a
	}
	payload := map[string]any{
		"command":    []any{argv},
		"maxRunTime": secs,
	}
	if len(opts.Env) > 0 {
		env := map[string]any{}
		for _, kv := range opts.Env {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" || strings.ContainsAny(k, " \t\n") {
				return nil, usagef("--env %q: expected NAME=VALUE", kv)
			}
			env[k] = v
		}
		payload["env"] = env
	}
	if len(opts.Artifacts) > 0 {
		var arts []any
		seen := map[string]bool{}
		for _, p := range opts.Artifacts {
			name, err := artifactName(p)
			if err != nil {
				return nil, err
			}
			if seen[name] {
				return nil, usagef("--artifact %q: artifact %s is given twice", p, name)
			}
			seen[name] = true
			arts = append(arts, map[string]any{"type": "file", "path": p, "name": name})
		}
		payload["artifacts"] = arts
	}
	return payload, nil
}

// artifactName publishes a file under public/ so that anyone who can see
// the task can download it: a relative path keeps its directories, an
// absolute one (or one leaving the task directory) only its base name.
func artifactName(p string) (string, error) {
	if strings.TrimSpace(p) == "" {
		return "", usagef("--artifact needs a file path")
	}
	slashed := filepath.ToSlash(p)
	clean := path.Clean(slashed)
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		clean = path.Base(clean)
	}
	if clean == "." || clean == "/" || clean == ".." {
		return "", usagef("--artifact %q does not name a file", p)
	}
	return "public/" + clean, nil
}

func (a *app) run(ctx context.Context, opts RunOptions) error {
	if err := checkTaskQueueID(opts.TaskQueueID); err != nil {
		return err
	}
	payload, err := RunPayload(opts)
	if err != nil {
		return err
	}
	name := opts.Name
	if name == "" {
		name = truncate("hopper task run: "+shellQuote(opts.Command), 255)
	}
	doc := map[string]any{"payload": payload}
	taskID, err := FillDefaults(doc, Defaults{
		TaskQueueID: opts.TaskQueueID, Now: a.env.now(), RootURL: a.client.RootURL,
		Name: name, Description: "Run with `hopper task run`.", Owner: a.owner(),
	})
	if err != nil {
		return err
	}
	st, err := a.client.CreateTaskDocument(ctx, taskID, doc)
	if err != nil {
		return failure("creating task "+taskID, err)
	}
	// Progress goes to stderr so stdout carries only the task's log (or,
	// with --json, only the result).
	fmt.Fprintf(a.env.Stderr, "Task %s created on %s\n%s\n", taskID, st.TaskQueueID, taskPageURL(a.client, taskID))
	logOut := a.env.Stdout
	if a.json {
		logOut = a.env.Stderr
	}
	final, err := a.follow(ctx, taskID, logOut, false)
	if err != nil {
		return err
	}
	if a.json {
		if err := a.printJSON(createdOutput{TaskID: taskID, Status: *final}); err != nil {
			return err
		}
	}
	return a.resultError(final)
}

// ResultExitCode maps a task state to the exit code of `task run`.
func ResultExitCode(state string) int {
	switch state {
	case tcclient.StateCompleted:
		return ExitOK
	case tcclient.StateException:
		return ExitException
	default:
		return ExitFailed
	}
}

// resultError reports a resolved task's outcome: nil (after a notice) for
// completed, an ExitError with the mirrored code otherwise.
func (a *app) resultError(st *tcclient.TaskStatus) error {
	code := ResultExitCode(st.State)
	var last tcclient.Run
	if len(st.Runs) > 0 {
		last = st.Runs[len(st.Runs)-1]
	}
	switch code {
	case ExitOK:
		fmt.Fprintf(a.env.Stderr, "Task %s %s%s\n", st.TaskID, a.paint(st.State), runSuffix(last, a.env))
		return nil
	case ExitException:
		reason := last.ReasonResolved
		if reason == "" {
			reason = "no reason given"
		}
		return &ExitError{Code: code, Msg: fmt.Sprintf("task %s resolved as exception: %s (run %d)", st.TaskID, reason, last.RunID)}
	default:
		return &ExitError{Code: code, Msg: fmt.Sprintf("task %s %s (run %d)", st.TaskID, st.State, last.RunID)}
	}
}

func runSuffix(r tcclient.Run, env *Env) string {
	if d := runDuration(r, env.now()); d > 0 {
		return fmt.Sprintf(" (run %d, %s)", r.RunID, formatDuration(d))
	}
	return fmt.Sprintf(" (run %d)", r.RunID)
}

// shellQuote renders argv the way a POSIX shell would need it typed.
func shellQuote(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
		}) < 0 {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

// truncate shortens s to at most n bytes without splitting a UTF-8
// sequence, marking the cut with an ellipsis.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
