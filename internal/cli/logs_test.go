package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/tcclient/tcclienttest"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// createTask creates a task on the default queue through the CLI, then
// forgets the output.
func createTask(t *testing.T, h *harness, taskID, payload string) {
	t.Helper()
	file := writeFile(t, "task.json", `{"taskId": "`+taskID+`", "payload": `+payload+`}`)
	require.NoError(t, h.exec(context.Background(), "create", "-f", file))
	h.resetOutput()
}

// resetOutput forgets what commands printed so far.
func (h *harness) resetOutput() {
	h.stdout.Reset()
	h.stderr.Reset()
}

// finishedTask creates a task, runs it with the given backing log and
// resolves it completed.
func finishedTask(t *testing.T, fake *tcclienttest.Server, h *harness, taskID, log string) {
	t.Helper()
	createTask(t, h, taskID, `{}`)
	ctx := context.Background()
	claim, c := newWorker(t, fake).claim(ctx)
	require.NotNil(t, claim)
	require.NoError(t, publishBacking(ctx, c, claim, log))
	_, err := c.ReportCompleted(ctx, taskID, 0)
	require.NoError(t, err)
	h.resetOutput()
}

func TestLogOfResolvedTask(t *testing.T) {
	t.Parallel()
	const log = "[taskcluster 2024-05-01T12:00:00.000Z] Task ID: x\nhello\nworld\n"
	tests := []struct {
		name   string
		client *http.Client
	}{
		// Go's transport asks for gzip and decompresses by itself.
		{name: "transparent gzip", client: nil},
		// Without that, the CLI must decode Content-Encoding: gzip.
		{name: "explicit gzip", client: &http.Client{Transport: &http.Transport{DisableCompression: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake, h := fakeSetup(t)
			h.env.HTTPClient = tt.client
			finishedTask(t, fake, h, taskA, log)
			require.NoError(t, h.exec(context.Background(), "log", taskA))
			require.Equal(t, log, h.stdout.String())
			h.resetOutput()
			require.NoError(t, h.exec(context.Background(), "log", "--run", "0", taskA))
			require.Equal(t, log, h.stdout.String())
		})
	}
}

func TestLogOfRunningTaskIsASnapshot(t *testing.T) {
	t.Parallel()
	fake, h := fakeSetup(t)
	createTask(t, h, taskA, `{}`)
	ctx := context.Background()
	claim, c := newWorker(t, fake).claim(ctx)
	require.NotNil(t, claim)

	// Nothing published yet.
	err := h.exec(ctx, "log", taskA)
	require.Equal(t, ExitFailed, exitCode(err))
	require.ErrorContains(t, err, "live log of task "+taskA+" (run 0) is not available yet")

	live := newLiveLog(t, "so far\n", "later\n")
	defer close(live.release)
	require.NoError(t, publishLive(ctx, c, claim, live.URL))
	start := time.Now()
	require.NoError(t, h.exec(ctx, "log", taskA))
	require.Less(t, time.Since(start), 5*time.Second, "the snapshot ends when the live log goes quiet")
	require.Equal(t, "so far\n", h.stdout.String())
	require.Contains(t, h.stderr.String(), "still running; use --follow")
}

func TestLogErrors(t *testing.T) {
	t.Parallel()
	fake, h := fakeSetup(t)
	ctx := context.Background()
	createTask(t, h, taskA, `{}`)

	err := h.exec(ctx, "log", taskA)
	require.Equal(t, ExitFailed, exitCode(err))
	require.EqualError(t, err, "run 0 of task "+taskA+" has not started yet (pending): use --follow to wait for it")

	err = h.exec(ctx, "log", "--run", "3", taskA)
	require.Equal(t, ExitUsage, exitCode(err))
	require.EqualError(t, err, "task "+taskA+" has no run 3 (its runs are 0 to 0)")

	// Cancelled before any worker started it: there is no log at all.
	fake.Cancel(taskA)
	err = h.exec(ctx, "log", taskA)
	require.Equal(t, ExitFailed, exitCode(err))
	require.EqualError(t, err, "reading "+LiveLogName+" of task "+taskA+" run 0: ResourceNotFound (HTTP 404): artifact "+LiveLogName+" not found")
}

func TestLogUsesThePayloadsLogNames(t *testing.T) {
	t.Parallel()
	fake, h := fakeSetup(t)
	ctx := context.Background()
	createTask(t, h, taskA, `{"logs": {"backing": "public/build/output.log"}}`)
	claim, c := newWorker(t, fake).claim(ctx)
	require.NotNil(t, claim)
	resp, err := c.CreateArtifact(ctx, taskA, 0, "public/build/output.log", &tcclient.CreateArtifactRequest{
		StorageType: tcclient.StorageS3, ContentType: "text/plain", Expires: expiresIn(time.Hour),
	})
	require.NoError(t, err)
	require.NoError(t, tcclient.BytesUpload(resp.PutURL, "text/plain", "", []byte("custom\n")).Do(ctx))
	_, err = c.ReportFailed(ctx, taskA, 0)
	require.NoError(t, err)

	h.resetOutput()
	require.NoError(t, h.exec(ctx, "log", taskA))
	require.Equal(t, "custom\n", h.stdout.String())
}

func TestLogFollow(t *testing.T) {
	t.Parallel()
	fake, h := fakeSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createTask(t, h, taskA, `{}`)
	h.resetOutput()

	live := newLiveLog(t, "one\n", "two\n")
	w := newWorker(t, fake)
	workerErr := make(chan error, 1)
	go func() {
		workerErr <- func() error {
			// Claim once the CLI has seen the pending state.
			if err := testclock.Poll(ctx, time.Minute, func() bool {
				return strings.Contains(h.stderr.String(), "Waiting for a worker to claim task "+taskA)
			}); err != nil {
				return fmt.Errorf("the CLI never said it waits for a worker: %w", err)
			}
			claim, c := w.claim(ctx)
			if claim == nil {
				return errors.New("nothing claimed")
			}
			if err := publishLive(ctx, c, claim, live.URL); err != nil {
				return err
			}
			waitFor(t, live.sentFirst, "the CLI to connect")
			close(live.release)
			waitFor(t, live.finished, "the live log to end")
			if err := publishBacking(ctx, c, claim, "one\ntwo\nthree\n"); err != nil {
				return err
			}
			_, err := c.ReportFailed(ctx, taskA, 0)
			return err
		}()
	}()
	err := h.exec(ctx, "log", "--follow", taskA)
	require.NoError(t, <-workerErr)
	require.NoError(t, err, "log --follow succeeds whatever the task's result")
	require.Equal(t, "one\ntwo\nthree\n", h.stdout.String())
	require.Contains(t, h.stderr.String(), "Waiting for a worker to claim task "+taskA+" on hopper/default\n")
}

func TestLogFollowNeedsALog(t *testing.T) {
	t.Parallel()
	fake, h := fakeSetup(t)
	createTask(t, h, taskA, `{}`)
	fake.Cancel(taskA)
	err := h.exec(context.Background(), "log", "-F", taskA)
	require.Equal(t, ExitFailed, exitCode(err))
	require.ErrorContains(t, err, "ResourceNotFound (HTTP 404)")

	// `run` reports the result even when there is no log to show.
	createTask(t, h, taskB, `{}`)
	fake.Cancel(taskB)
	h.resetOutput()
	a, err := newApp(h.env, false)
	require.NoError(t, err)
	st, err := a.follow(context.Background(), taskB, h.stdout, false)
	require.NoError(t, err)
	require.Equal(t, tcclient.StateException, st.State)
	require.Contains(t, h.stderr.String(), "(cannot show the log: ")
}

func TestLogSnapshotOfAChattyTaskEnds(t *testing.T) {
	t.Parallel()
	fake, h := fakeSetup(t)
	// The idle period is twenty times the writer's interval so that a
	// scheduling pause on a loaded machine does not pass for idleness.
	h.env.LiveIdle = 200 * time.Millisecond
	createTask(t, h, taskA, `{}`)
	ctx := context.Background()
	claim, c := newWorker(t, fake).claim(ctx)
	require.NotNil(t, claim)
	// Output every 10 ms, never idle, never ending.
	chatty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(w, "line %d\n", i); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}))
	defer chatty.Close()
	require.NoError(t, publishLive(ctx, c, claim, chatty.URL))
	// A snapshot that never ended would run into this deadline and fail;
	// no upper bound on its duration is asserted, so a loaded machine
	// cannot fail the test.
	execCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	start := time.Now()
	require.NoError(t, h.exec(execCtx, "log", taskA))
	elapsed := time.Since(start)
	require.GreaterOrEqual(t, elapsed, snapshotLimit*h.env.LiveIdle)
	require.True(t, strings.HasPrefix(h.stdout.String(), "line 0\nline 1\n"), h.stdout.String())
	require.Contains(t, h.stderr.String(), "still running")
}
