package cli

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

func TestRunMirrorsTheResult(t *testing.T) {
	t.Parallel()
	const backing = "line 1\nline 2\n[taskcluster 2024-05-01T12:00:00.000Z] === Task Finished ===\n"
	tests := []struct {
		name     string
		json     bool
		resolve  func(ctx context.Context, c *tcclient.Client, taskID string) error
		wantCode int
		wantMsg  string
	}{
		{
			name: "completed",
			resolve: func(ctx context.Context, c *tcclient.Client, taskID string) error {
				_, err := c.ReportCompleted(ctx, taskID, 0)
				return err
			},
			wantCode: ExitOK,
		},
		{
			name: "failed",
			resolve: func(ctx context.Context, c *tcclient.Client, taskID string) error {
				_, err := c.ReportFailed(ctx, taskID, 0)
				return err
			},
			wantCode: ExitFailed,
			wantMsg:  "failed (run 0)",
		},
		{
			name: "exception",
			resolve: func(ctx context.Context, c *tcclient.Client, taskID string) error {
				_, err := c.ReportException(ctx, taskID, 0, tcclient.ReasonMalformedPayload)
				return err
			},
			wantCode: ExitException,
			wantMsg:  "resolved as exception: malformed-payload (run 0)",
		},
		{
			name: "failed with json",
			json: true,
			resolve: func(ctx context.Context, c *tcclient.Client, taskID string) error {
				_, err := c.ReportFailed(ctx, taskID, 0)
				return err
			},
			wantCode: ExitFailed,
			wantMsg:  "failed (run 0)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake, h := fakeSetup(t)
			w := newWorker(t, fake)
			live := newLiveLog(t, "line 1\n", "line 2\n")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			claims := make(chan *tcclient.TaskClaim, 1)
			workerErr := make(chan error, 1)
			go func() {
				workerErr <- func() error {
					claim, c := w.claim(ctx)
					if claim == nil {
						return errors.New("nothing claimed")
					}
					claims <- claim
					if err := publishLive(ctx, c, claim, live.URL+"/log/token"); err != nil {
						return err
					}
					waitFor(t, live.sentFirst, "the CLI to read the live log")
					close(live.release)
					waitFor(t, live.finished, "the live log to end")
					if err := publishBacking(ctx, c, claim, backing); err != nil {
						return err
					}
					return tt.resolve(ctx, c, claim.Status.TaskID)
				}()
			}()

			args := []string{"run", "--env", "GREETING=hi", "--artifact", "out/r.txt", "--", "echo", "hello world"}
			if tt.json {
				args = append([]string{"--json"}, args...)
			}
			err := h.exec(ctx, args...)
			require.NoError(t, <-workerErr)
			require.Equal(t, tt.wantCode, exitCode(err), "error: %v", err)
			if tt.wantMsg != "" {
				require.ErrorContains(t, err, tt.wantMsg)
			}
			claim := <-claims
			taskID := claim.Status.TaskID

			// The task the CLI created.
			require.JSONEq(t, `{"command":[["echo","hello world"]],"maxRunTime":600,"env":{"GREETING":"hi"},
				"artifacts":[{"type":"file","path":"out/r.txt","name":"public/out/r.txt"}]}`, string(claim.Task.Payload))
			require.Equal(t, DefaultTaskQueue, claim.Task.TaskQueueID)
			require.Equal(t, "hopper task run: echo 'hello world'", claim.Task.Metadata.Name)
			require.Equal(t, "tester", claim.Task.Metadata.Owner)
			require.Equal(t, fake.URL+"/api/queue/v1/task/"+taskID, claim.Task.Metadata.Source)
			require.Equal(t, DefaultDeadline, claim.Task.Deadline.Sub(claim.Task.Created.Time))

			// The taskId and link come first, on stderr.
			require.Regexp(t, `^Task `+taskID+` created on hopper/default\n`+fake.URL+`/ui/#/task/`+taskID+`\n`, h.stderr.String())
			if tt.json {
				// The log goes to stderr and stdout holds only the result.
				require.Contains(t, h.stderr.String(), backing)
				var out struct {
					TaskID string              `json:"taskId"`
					Status tcclient.TaskStatus `json:"status"`
				}
				require.NoError(t, json.Unmarshal([]byte(h.stdout.String()), &out))
				require.Equal(t, taskID, out.TaskID)
				require.Equal(t, tcclient.StateFailed, out.Status.State)
				return
			}
			// Live output and the backing log's rest, each byte once.
			require.Equal(t, backing, h.stdout.String())
			if tt.wantCode == ExitOK {
				require.Contains(t, h.stderr.String(), "Task "+taskID+" completed (run 0")
			}
		})
	}
}

func TestRunFollowsRetries(t *testing.T) {
	t.Parallel()
	fake, h := fakeSetup(t)
	w := newWorker(t, fake)
	live0 := newLiveLog(t, "run 0 starts\n", "run 0 is cut off\n")
	live1 := newLiveLog(t, "run 1 starts\n", "run 1 ends\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	workerErr := make(chan error, 1)
	go func() {
		workerErr <- func() error {
			claim, c := w.claim(ctx)
			if claim == nil {
				return errors.New("nothing claimed")
			}
			if err := publishLive(ctx, c, claim, live0.URL); err != nil {
				return err
			}
			waitFor(t, live0.sentFirst, "the CLI to read run 0's live log")
			close(live0.release)
			waitFor(t, live0.finished, "run 0's live log to end")
			// The worker shuts down without uploading its log: the queue
			// retries the task.
			if _, err := c.ReportException(ctx, claim.Status.TaskID, 0, tcclient.ReasonWorkerShutdown); err != nil {
				return err
			}
			claim, c = w.claim(ctx)
			if claim == nil {
				return errors.New("retry not claimed")
			}
			if claim.RunID != 1 {
				return errors.New("expected run 1")
			}
			if err := publishLive(ctx, c, claim, live1.URL); err != nil {
				return err
			}
			waitFor(t, live1.sentFirst, "the CLI to read run 1's live log")
			close(live1.release)
			waitFor(t, live1.finished, "run 1's live log to end")
			if err := publishBacking(ctx, c, claim, "run 1 starts\nrun 1 ends\n"); err != nil {
				return err
			}
			_, err := c.ReportCompleted(ctx, claim.Status.TaskID, 1)
			return err
		}()
	}()
	err := h.exec(ctx, "run", "true")
	require.NoError(t, <-workerErr)
	require.NoError(t, err)
	require.Equal(t, "run 0 starts\nrun 0 is cut off\nrun 1 starts\nrun 1 ends\n", h.stdout.String())
	require.Contains(t, h.stderr.String(), "cannot show the rest of run 0's log")
	require.Regexp(t, `Run 1 of task \S+: retry`, h.stderr.String())
	require.Contains(t, h.stderr.String(), "completed (run 1")
}

func TestRunEndsWhenCancelledWhileStreaming(t *testing.T) {
	t.Parallel()
	fake, h := fakeSetup(t)
	w := newWorker(t, fake)
	// This live log never ends by itself: the worker has not noticed the
	// cancellation yet.
	live := newLiveLog(t, "working\n", "never sent\n")
	defer close(live.release)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	workerErr := make(chan error, 1)
	go func() {
		workerErr <- func() error {
			claim, c := w.claim(ctx)
			if claim == nil {
				return errors.New("nothing claimed")
			}
			if err := publishLive(ctx, c, claim, live.URL); err != nil {
				return err
			}
			waitFor(t, live.sentFirst, "the CLI to read the live log")
			fake.Cancel(claim.Status.TaskID)
			return nil
		}()
	}()
	start := time.Now()
	err := h.exec(ctx, "run", "sleep", "600")
	require.NoError(t, <-workerErr)
	require.Less(t, time.Since(start), 10*time.Second)
	require.Equal(t, ExitException, exitCode(err), "error: %v", err)
	require.ErrorContains(t, err, "resolved as exception: canceled (run 0)")
	require.Equal(t, "working\n", h.stdout.String())
	require.Contains(t, h.stderr.String(), "still a live-log reference", "no backing log exists for a cancelled run")
}

func TestRunInterrupted(t *testing.T) {
	t.Parallel()
	fake, h := fakeSetup(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.exec(ctx, "run", "--task-queue-id", "nobody/serves-this", "sleep", "1") }()
	// No worker serves the queue: the CLI waits until interrupted. Wait
	// for the notice itself, not for a count of requests: the fake records
	// a request before it answers, so the CLI may not have printed the
	// notice yet when the request that precedes it is counted.
	require.Eventually(t, func() bool {
		return strings.Contains(h.stderr.String(), "Waiting for a worker to claim task")
	}, 10*time.Second, 5*time.Millisecond)
	// And it keeps polling after saying so.
	seen := len(fake.Requests())
	require.Eventually(t, func() bool { return len(fake.Requests()) > seen }, 10*time.Second, 5*time.Millisecond)
	cancel()
	err := <-done
	require.Equal(t, ExitInterrupted, exitCode(err))
	require.ErrorContains(t, err, "hopper task cancel")
}

func TestResultExitCode(t *testing.T) {
	t.Parallel()
	for state, want := range map[string]int{
		tcclient.StateCompleted:   ExitOK,
		tcclient.StateFailed:      ExitFailed,
		tcclient.StateException:   ExitException,
		tcclient.StateRunning:     ExitFailed,
		tcclient.StateUnscheduled: ExitFailed,
	} {
		require.Equal(t, want, ResultExitCode(state), state)
	}
}
