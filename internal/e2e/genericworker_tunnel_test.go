package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// TestGenericWorkerThroughTunnelAcrossReplicas: Taskcluster's own
// generic-worker (and livelog; HOPPER_TEST_WORKER_RUNNER as for
// TestWorkerRunnerGuide) connects its websocktunnel to replica B of two
// sharing one PostgreSQL database, as docs/workers.md configures it; a
// task with features.liveLog and features.interactive streams its live
// log to a reader on replica A, and `hopper task shell`, run against A,
// types `echo $TASK_ID` into generic-worker's shell and sees the task's id.
func TestGenericWorkerThroughTunnelAcrossReplicas(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	bins := taskclusterWorkers(t, "generic-worker", "livelog")
	db := e2e.FreshPostgres(t)
	env := []string{"HOPPER_SECRET_KEY=" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"}
	// generic-worker reclaims 3 minutes before a claim ends.
	args := []string{"--db", db, "--claim-timeout", "5m"}
	a := e2e.StartServer(t, e2e.ServerOptions{Args: args, Env: env})
	b := e2e.StartServer(t, e2e.ServerOptions{Args: args, Env: env})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	root := rootClient(a)
	var cl struct {
		AccessToken string `json:"accessToken"`
	}
	require.NoError(t, root.DoAuth(ctx, http.MethodPut, "/clients/gw/tunnelled", nil, map[string]any{
		"description": "generic-worker behind NAT", "expires": tcclient.NewTime(time.Now().Add(time.Hour)),
		"scopes": []string{"queue:claim-work:proj/gwt", "queue:worker-id:rack/*", "auth:websocktunnel-token:hopper/*", "queue:create-artifact:*"},
	}, &cl))

	machine := t.TempDir()
	key := filepath.Join(machine, "ed25519.key")
	out, err := exec.Command(filepath.Join(bins, "generic-worker"), "new-ed25519-keypair", "--file", key).CombinedOutput()
	require.NoError(t, err, string(out))
	ports := freePortPair(t)
	cfg, err := json.Marshal(map[string]any{
		"rootURL": b.RootURL, "clientId": "gw/tunnelled", "accessToken": cl.AccessToken,
		"provisionerId": "proj", "workerType": "gwt", "workerGroup": "rack", "workerId": "gw-nat",
		"ed25519SigningKeyLocation": key, "livelogExecutable": filepath.Join(bins, "livelog"),
		"tasksDir": filepath.Join(machine, "tasks"), "cachesDir": filepath.Join(machine, "caches"),
		"downloadsDir": filepath.Join(machine, "downloads"),
		// Not the default ports, which another test's generic-worker may hold.
		"livelogPortBase": ports, "interactivePort": freePortPair(t),
		"wstAudience": "hopper", "wstServerURL": b.RootURL + "/websocktunnel",
		"enableTaskclusterProxy": false, "enableChainOfTrust": false, "requiredDiskSpaceMegabytes": 10,
	})
	require.NoError(t, err)
	cfgFile := filepath.Join(machine, "generic-worker.json")
	require.NoError(t, os.WriteFile(cfgFile, cfg, 0o600))
	gw := exec.Command(filepath.Join(bins, "generic-worker"), "run", "--config", cfgFile)
	gw.Dir = machine
	gw.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + machine}
	logs := &e2e.SyncBuffer{}
	gw.Stdout, gw.Stderr = logs, logs
	gw.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, gw.Start())
	done := make(chan struct{})
	go func() { _ = gw.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-gw.Process.Pid, syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("generic-worker output:\n%s", logs.String())
		}
	})

	id := tcclient.NewTaskID()
	payload, err := json.Marshal(map[string]any{
		"command":    [][]string{{"sh", "-c", `echo "first line of $TASK_ID"; for i in $(seq 1 600); do echo "line $i"; sleep 1; done`}},
		"maxRunTime": 900, "features": map[string]any{"liveLog": true, "interactive": true}})
	require.NoError(t, err)
	now := time.Now()
	_, err = root.CreateTask(ctx, id, &tcclient.TaskDefinition{TaskQueueID: "proj/gwt", Created: tcclient.NewTime(now),
		Deadline: tcclient.NewTime(now.Add(time.Hour)), Payload: payload,
		Metadata: tcclient.TaskMetadata{Name: "gw", Description: "tunnelled", Owner: "e2e@example.com", Source: "https://example.com"}})
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = root.CancelTask(context.Background(), id) })

	var live *tcclient.ArtifactRedirect
	testclock.WaitFor(t, 2*time.Minute, "generic-worker to publish the run's live.log", func() bool {
		select {
		case <-done:
			t.Fatalf("generic-worker exited:\n%s", logs.String())
		default:
		}
		live, err = root.GetLatestArtifact(ctx, id, "public/logs/live.log")
		return err == nil
	})
	require.True(t, strings.HasPrefix(live.URL, b.RootURL+"/websocktunnel/rack.gw-nat."), live.URL)
	// The same tunnel, read through the replica the worker is not on.
	res, err := http.Get(a.RootURL + strings.TrimPrefix(live.URL, b.RootURL))
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	// generic-worker's header lines come first, then the command's.
	lines := bufio.NewScanner(res.Body)
	for lines.Scan() && lines.Text() != "first line of "+id {
	}
	require.Equal(t, "first line of "+id, lines.Text(), "the live log through A: %v", lines.Err())
	require.Contains(t, a.Logs(), "forwarded", "A served the live log through B")

	shell := exec.CommandContext(ctx, e2e.Binary(t), "task", "shell", id)
	shell.Env = append(os.Environ(), a.Env()...)
	stdin, err := shell.StdinPipe()
	require.NoError(t, err)
	term := &e2e.SyncBuffer{}
	shell.Stdout, shell.Stderr = term, term
	require.NoError(t, shell.Start())
	_, err = fmt.Fprintln(stdin, `echo "id=$TASK_ID"`)
	require.NoError(t, err)
	testclock.WaitFor(t, time.Minute, "the task's id from generic-worker's shell", func() bool {
		// The terminal echoes what was typed, $TASK_ID unexpanded.
		return strings.Contains(term.String(), "id="+id)
	})
	_, err = fmt.Fprintln(stdin, "exit")
	require.NoError(t, err)
	require.NoError(t, shell.Wait(), term.String())
	st, err := root.Status(ctx, id)
	require.NoError(t, err)
	require.Equal(t, tcclient.StateRunning, st.State, "the shell ended, the task runs on")
	require.Equal(t, "gw-nat", st.Runs[0].WorkerID)
}
