package workere2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/creack/pty"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/interactive"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// shellSession is a test's side of an interactive shell.
type shellSession struct {
	conn *websocket.Conn
	mu   sync.Mutex
	out  strings.Builder
	exit chan int
	// closed is closed when the connection ended.
	closed chan struct{}
}

// openShell opens a shell in taskID as c, waiting while the task is not
// yet running or its worker not yet connected (409).
func openShell(t *testing.T, c *tcclient.Client, taskID string) *shellSession {
	t.Helper()
	var conn *websocket.Conn
	var last error
	t.Cleanup(func() {
		if t.Failed() && last != nil {
			t.Logf("the last refusal of a shell in %s: %v", taskID, last)
		}
	})
	testclock.WaitFor(t, 2*time.Minute, "a shell in "+taskID, func() bool {
		var err error
		conn, err = c.OpenShell(context.Background(), taskID)
		if tcclient.StatusCode(err) == http.StatusConflict {
			last = err
			return false
		}
		require.NoError(t, err)
		return true
	})
	s := &shellSession{conn: conn, exit: make(chan int, 1), closed: make(chan struct{})}
	t.Cleanup(func() { _ = conn.CloseNow() })
	go func() {
		defer close(s.closed)
		for {
			typ, msg, err := conn.Read(context.Background())
			if err != nil {
				return
			}
			if typ == websocket.MessageBinary {
				s.mu.Lock()
				s.out.Write(msg)
				s.mu.Unlock()
				continue
			}
			if ctl, err := interactive.ParseControl(msg); err == nil && ctl.Exit != nil {
				s.exit <- *ctl.Exit
			}
		}
	}()
	return s
}

func (s *shellSession) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

func (s *shellSession) send(t *testing.T, line string) {
	t.Helper()
	require.NoError(t, s.conn.Write(context.Background(), websocket.MessageBinary, []byte(line+"\n")))
}

func (s *shellSession) await(t *testing.T, text string) {
	t.Helper()
	testclock.WaitFor(t, 2*time.Minute, "the shell to print "+text, func() bool { return strings.Contains(s.output(), text) })
}

// TestInteractiveShell: a shell opened through hopper runs in the failed
// task's sandbox (its user, its environment and directory, after its
// command ended); the sandbox's escapes still fail from it; the task stays
// alive while it is attached and ends when it exits; opening one takes
// interactive:open-shell:<taskQueueId> (anonymous and scopeless callers
// get 403) and is in the audit log.
func TestInteractiveShell(t *testing.T) {
	t.Parallel()
	needStrictSandbox(t)
	queue := uniqueQueue("shell")
	w := strictWorker(t, queue, "shell", 1, nil)
	id := createTaskWith(t, queue, map[string]any{
		"command": [][]string{{"sh", "-c", `echo waiting for a shell; until [ -f shell-was-here ]; do sleep 0.1; done; echo "the shell was here"; exit 3`}},
		"env": map[string]string{"WORKER_PID": strconv.Itoa(w.cmd.Process.Pid), "WORKER_CONFIG": w.configFile,
			"TOKEN_A": shared.token[:8], "TOKEN_B": shared.token[8:16]},
		"features":    map[string]bool{"interactive": true},
		"interactive": map[string]int{"keepAlive": 0},
		"maxRunTime":  120,
	}, nil)
	ctx := context.Background()

	// Who may open it.
	anonymous := &tcclient.Client{RootURL: shared.rootURL}
	clientID := "e2e/" + strings.ReplaceAll(queue, "/", "-")
	mk := func(name string, scopes []string) *tcclient.Client {
		cl, err := shared.admin.CreateClient(ctx, clientID+name, &tcclient.ClientRequest{
			Expires: tcclient.NewTime(time.Now().Add(time.Hour)), Description: "shell e2e", Scopes: scopes})
		require.NoError(t, err)
		return &tcclient.Client{RootURL: shared.rootURL, Credentials: &tcclient.Credentials{ClientID: cl.ClientID, AccessToken: cl.AccessToken}}
	}
	without := mk("-none", []string{"queue:get-artifact:*"})
	with := mk("-shell", []string{interactive.ShellScope(queue)})
	waitLiveLog(t, id, "waiting for a shell")
	for name, c := range map[string]*tcclient.Client{"anonymous": anonymous, "without the scope": without} {
		_, err := c.OpenShell(ctx, id)
		require.Equal(t, http.StatusForbidden, tcclient.StatusCode(err), "%s: %v", name, err)
	}

	sh := openShell(t, with, id)
	sh.send(t, `echo "task=$TASK_ID user=$(id -un) dir=$(pwd)"; touch shell-was-here`)
	sh.await(t, "task="+id+" user=hopper-task-1 dir=")
	waitLiveLog(t, id, "the task stays alive")

	// The escapes of the sandbox tests, from the shell.
	sh.send(t, `if cat "/proc/$WORKER_PID/environ" >/dev/null 2>&1; then echo WORKER""-ENVIRON-READ; fi
if [ -e "/proc/$WORKER_PID" ]; then echo WORKER""-VISIBLE; fi
head="$TOKEN_A$TOKEN_B"
if grep -q "$head" "$WORKER_CONFIG" 2>/dev/null; then echo WORKER""-CONFIG-READ; fi
for f in /proc/[0-9]*/environ; do grep -l "$head" "$f" 2>/dev/null; done | grep -q . && echo TOKEN""-FOUND
if unshare -U true 2>/dev/null; then echo USERNS""-MADE; fi
grep NoNewPrivs /proc/self/status
echo "escapes ""tried"`)
	sh.await(t, "escapes tried")
	require.Regexp(t, `NoNewPrivs:\s+1`, sh.output())
	for _, bad := range []string{"WORKER-ENVIRON-READ", "WORKER-VISIBLE", "WORKER-CONFIG-READ", "TOKEN-FOUND", "USERNS-MADE"} {
		require.NotContains(t, sh.output(), bad)
	}
	require.Equal(t, tcclient.StateRunning, status(t, id).State, "the shell keeps the task alive after its command")

	sh.send(t, "exit 5")
	select {
	case code := <-sh.exit:
		require.Equal(t, 5, code)
	case <-time.After(2 * time.Minute):
		t.Fatalf("the shell did not end; output: %s", sh.output())
	}
	require.Equal(t, 0, w.wait(t, 2*time.Minute))
	require.Equal(t, tcclient.StateFailed, status(t, id).State, "the task resolves as its command did")
	log := backingLog(t, id, 0)
	require.Contains(t, log, "the shell was here")
	require.Contains(t, log, "hopper task shell "+id)

	// The audit log names who opened a shell in which task, and when.
	signed, err := shared.admin.SignedURL(shared.rootURL+"/api/auth/v1/clients/"+tcclient.EscapePathParam(clientID+"-shell")+"/audit", time.Minute)
	require.NoError(t, err)
	resp, err := http.Get(signed)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var audit struct {
		AuditHistory []struct {
			ClientID, EntityID, EntityType, ActionType string
			Created                                    time.Time
		} `json:"auditHistory"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&audit))
	require.Len(t, audit.AuditHistory, 1)
	e := audit.AuditHistory[0]
	require.Equal(t, []string{clientID + "-shell", id, "task", "interactive shell opened in run 0"}, []string{e.ClientID, e.EntityID, e.EntityType, e.ActionType})
	require.WithinDuration(t, time.Now(), e.Created, 5*time.Minute)
}

// cliEnv is the environment of a `hopper task` command as the root client.
func cliEnv() []string {
	return append(os.Environ(), "TASKCLUSTER_ROOT_URL="+shared.rootURL, "TASKCLUSTER_CLIENT_ID="+rootClientID,
		"TASKCLUSTER_ACCESS_TOKEN="+shared.token)
}

// TestInteractiveCopyAndShellFromATerminal: `hopper task interactive`
// copies a failed task with features.interactive on; `hopper task shell`,
// run on a real terminal (both as docs/interactive.md writes them), opens a shell in the copy, where typing
// echo $TASK_ID shows the copy's id; cancelling the copy ends the shell
// and the command.
func TestInteractiveCopyAndShellFromATerminal(t *testing.T) {
	t.Parallel()
	needStrictSandbox(t)
	queue := uniqueQueue("shellcli")
	w := strictWorker(t, queue, "shellcli", 2, nil)
	failed := createTaskWith(t, queue, map[string]any{
		"command": [][]string{{"sh", "-c", "echo broken; exit 1"}}, "maxRunTime": 60,
	}, nil)
	testclock.WaitFor(t, 2*time.Minute, "the task to fail", func() bool { return status(t, failed).State == tcclient.StateFailed })

	// docs/interactive.md's two lines, as written but for the ids, with
	// hopper on the PATH.
	lines := strings.Split(strings.TrimSpace(e2e.DocExample(t, "interactive-from-terminal").Text), "\n")
	require.Len(t, lines, 2, "the guide's interactive, then shell")
	binDir := t.TempDir()
	require.NoError(t, os.Symlink(shared.bin, filepath.Join(binDir, "hopper")))
	env := append(cliEnv(), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	require.Contains(t, lines[0], "FAILED_TASKID")
	cmd := exec.Command("bash", "-c", strings.ReplaceAll(lines[0], "FAILED_TASKID", failed))
	cmd.Env = env
	out, err := cmd.Output()
	require.NoError(t, err)
	copyID := strings.TrimSpace(string(out))
	require.Contains(t, lines[1], "NEW_TASKID")
	def, err := shared.admin.Task(context.Background(), copyID)
	require.NoError(t, err)
	require.JSONEq(t, `{"command":[["sh","-c","echo broken; exit 1"]],"maxRunTime":60,"features":{"interactive":true}}`, string(def.Payload))
	require.Equal(t, "Interactive: e2e", def.Metadata.Name)
	waitLiveLog(t, copyID, "hopper task shell "+copyID)

	var term *os.File
	var screen e2e.SyncBuffer
	var shell *exec.Cmd
	done := make(chan error, 1)
	testclock.WaitFor(t, 2*time.Minute, "hopper task shell to connect", func() bool {
		screen.Reset()
		shell = exec.Command("bash", "-c", strings.ReplaceAll(lines[1], "NEW_TASKID", copyID))
		shell.Env = env
		var err error
		term, err = pty.StartWithSize(shell, &pty.Winsize{Cols: 100, Rows: 30})
		require.NoError(t, err)
		copied := make(chan struct{})
		go func() {
			defer close(copied)
			_, _ = io.Copy(&screen, term)
		}()
		_, err = io.WriteString(term, "echo \"in $TASK_ID cols=$(tput cols 2>/dev/null || stty size)\"\n")
		require.NoError(t, err)
		ended := make(chan error, 1)
		go func() { ended <- shell.Wait() }()
		for {
			select {
			case err := <-ended:
				// Refused (the worker not connected yet): try again.
				term.Close()
				<-copied
				require.Contains(t, screen.String(), "not connected", "hopper task shell: %v", err)
				return false
			case <-time.After(50 * time.Millisecond):
				if strings.Contains(screen.String(), "in "+copyID) {
					go func() { done <- <-ended }()
					return true
				}
			}
		}
	})
	defer term.Close()
	_, err = shared.admin.CancelTask(context.Background(), copyID)
	require.NoError(t, err)
	select {
	case err := <-done:
		var exitErr *exec.ExitError
		require.ErrorAs(t, err, &exitErr, "the shell's end ends the command with the shell's failure")
	case <-time.After(2 * time.Minute):
		t.Fatalf("hopper task shell outlived the task; screen: %s", screen.String())
	}
	require.Equal(t, 0, w.wait(t, 2*time.Minute))
	require.Equal(t, tcclient.StateException, status(t, copyID).State)
}

// TestInteractiveShellAfterServerRestart: when hopper restarts, the open
// shell drops, the worker connects again on its own, and a new shell
// opens in the same still-running task.
func TestInteractiveShellAfterServerRestart(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	srv, stop, err := launchServer(shared.bin, dataDir, "20m")
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stop()
		}
	})
	queue := uniqueQueue("shellrestart")
	startWorkerWith(t, queue, workerOpts{id: "shellrestart", tasks: 1, server: srv})
	id := createTaskOn(t, srv, queue, map[string]any{
		"command": [][]string{{"true"}}, "features": map[string]bool{"interactive": true}, "maxRunTime": 60,
	}, nil)
	sh := openShell(t, srv.admin, id)
	sh.send(t, `echo "before=$TASK_ID"`)
	sh.await(t, "before="+id)

	stop()
	stopped = true
	select {
	case <-sh.closed:
	case <-time.After(time.Minute):
		t.Fatal("the shell outlived the server's stop")
	}
	again, stopAgain, err := launchServerAt(shared.bin, dataDir, "20m", strings.TrimPrefix(srv.rootURL, "http://"), srv.token)
	require.NoError(t, err)
	t.Cleanup(stopAgain)
	sh2 := openShell(t, again.admin, id)
	sh2.send(t, `echo "after=$TASK_ID"`)
	sh2.await(t, "after="+id)
	st, err := again.admin.Status(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, tcclient.StateRunning, st.State, "the task ran on across the restart")
	_, err = again.admin.CancelTask(context.Background(), id)
	require.NoError(t, err)
}

// TestInteractiveGuidePayload: docs/interactive.md's payload, as written:
// its command fails (no Makefile here), and the task stays alive for the
// keep-alive the payload gives, where a shell opens; cancelling it ends
// it.
func TestInteractiveGuidePayload(t *testing.T) {
	t.Parallel()
	needStrictSandbox(t)
	var doc struct {
		Payload map[string]any `yaml:"payload"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(e2e.DocExample(t, "interactive-payload").Text), &doc))
	queue := uniqueQueue("guidepayload")
	w := strictWorker(t, queue, "guidepayload", 1, nil)
	id := createTaskWith(t, queue, doc.Payload, nil)
	waitLiveLog(t, id, "Commands ended; the task stays alive for 30m0s")
	require.Equal(t, tcclient.StateRunning, status(t, id).State)
	sh := openShell(t, shared.admin, id)
	sh.send(t, `echo "shell in $TASK_ID"`)
	sh.await(t, "shell in "+id)
	_, err := shared.admin.CancelTask(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, 0, w.wait(t, 2*time.Minute))
	require.Equal(t, tcclient.StateException, status(t, id).State)
}
