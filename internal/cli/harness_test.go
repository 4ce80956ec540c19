package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/tcclient/tcclienttest"
)

// harness runs `task` commands in-process against a root URL.
type harness struct {
	env            *Env
	vars           map[string]string
	stdout, stderr *e2e.SyncBuffer
}

func newHarness(t *testing.T, rootURL string, creds *tcclient.Credentials) *harness {
	t.Helper()
	h := &harness{vars: map[string]string{"TASKCLUSTER_ROOT_URL": rootURL, "USER": "tester"},
		stdout: &e2e.SyncBuffer{}, stderr: &e2e.SyncBuffer{}}
	if creds != nil {
		h.vars["TASKCLUSTER_CLIENT_ID"] = creds.ClientID
		h.vars["TASKCLUSTER_ACCESS_TOKEN"] = creds.AccessToken
	}
	h.env = &Env{
		Stdout: h.stdout, Stderr: h.stderr, Stdin: bytes.NewReader(nil),
		Getenv:       func(k string) string { return h.vars[k] },
		PollInterval: 10 * time.Millisecond,
		LiveIdle:     200 * time.Millisecond,
		RetryDelay:   time.Millisecond,
	}
	return h
}

// exec runs `task args...` and returns its error.
func (h *harness) exec(ctx context.Context, args ...string) error {
	cmd := NewTaskCommand(h.env)
	cmd.SetArgs(args)
	cmd.SetOut(h.stderr)
	cmd.SetErr(h.stderr)
	cmd.SilenceUsage = true
	cmd.SilenceErrors = true
	return cmd.ExecuteContext(ctx)
}

// exitCode is what cmd/hopper would exit with for err.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var coded interface{ ExitCode() int }
	if errors.As(err, &coded) {
		return coded.ExitCode()
	}
	return 1
}

// fakeSetup starts the fake queue with a CLI client holding every scope.
func fakeSetup(t *testing.T) (*tcclienttest.Server, *harness) {
	t.Helper()
	fake := tcclienttest.New(tcclienttest.Options{LongPoll: 50 * time.Millisecond})
	t.Cleanup(fake.Close)
	creds := fake.AddClient("cli", "*")
	return fake, newHarness(t, fake.URL, creds)
}

// worker plays a generic worker against the fake queue.
type worker struct {
	t     *testing.T
	queue *tcclient.Client
}

func newWorker(t *testing.T, fake *tcclienttest.Server) *worker {
	creds := fake.AddClient("worker", "queue:claim-work:"+DefaultTaskQueue, "queue:worker-id:*")
	return &worker{t: t, queue: fake.Client(creds)}
}

// claim waits for a task on the default queue and returns the claim and a
// client signed with the run's credentials.
func (w *worker) claim(ctx context.Context) (*tcclient.TaskClaim, *tcclient.Client) {
	for ctx.Err() == nil {
		resp, err := w.queue.ClaimWork(ctx, DefaultTaskQueue, &tcclient.ClaimWorkRequest{WorkerGroup: "g", WorkerID: "w1", Tasks: 1})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			w.t.Errorf("claimWork: %v", err)
			return nil, nil
		}
		if len(resp.Tasks) == 1 {
			c := resp.Tasks[0]
			return &c, w.queue.WithCredentials(&c.Credentials)
		}
	}
	w.t.Errorf("no task claimed: %v", ctx.Err())
	return nil, nil
}

func expiresIn(d time.Duration) tcclient.Time { return tcclient.NewTime(time.Now().Add(d)) }

// publishLive creates the live-log reference artifact. Worker helpers
// return errors rather than failing the test, since they run on their own
// goroutines.
func publishLive(ctx context.Context, c *tcclient.Client, claim *tcclient.TaskClaim, url string) error {
	_, err := c.CreateArtifact(ctx, claim.Status.TaskID, claim.RunID, LiveLogName, &tcclient.CreateArtifactRequest{
		StorageType: tcclient.StorageReference, URL: url, ContentType: "text/plain; charset=utf-8", Expires: expiresIn(time.Hour),
	})
	return err
}

// publishBacking uploads content gzip-encoded as the backing log and
// switches the live log to a link, as the worker does at teardown.
func publishBacking(ctx context.Context, c *tcclient.Client, claim *tcclient.TaskClaim, content string) error {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write([]byte(content)); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	resp, err := c.CreateArtifact(ctx, claim.Status.TaskID, claim.RunID, BackingLogName, &tcclient.CreateArtifactRequest{
		StorageType: tcclient.StorageS3, ContentType: "text/plain; charset=utf-8", Expires: expiresIn(time.Hour),
	})
	if err != nil {
		return err
	}
	if err := tcclient.BytesUpload(resp.PutURL, "text/plain; charset=utf-8", "gzip", gz.Bytes()).Do(ctx); err != nil {
		return err
	}
	_, err = c.CreateArtifact(ctx, claim.Status.TaskID, claim.RunID, LiveLogName, &tcclient.CreateArtifactRequest{
		StorageType: tcclient.StorageLink, Artifact: BackingLogName, Expires: expiresIn(time.Hour),
	})
	return err
}

// liveLog is a live-log server: the first connection gets first, then
// blocks until release and gets second; later connections get the whole
// log at once (the log is closed by then), as tasklog's server replays.
type liveLog struct {
	*httptest.Server
	sentFirst chan struct{}
	release   chan struct{}
	finished  chan struct{}
}

func newLiveLog(t *testing.T, first, second string) *liveLog {
	l := &liveLog{sentFirst: make(chan struct{}), release: make(chan struct{}), finished: make(chan struct{})}
	var once sync.Once
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		isFirst := false
		once.Do(func() { isFirst = true })
		if !isFirst {
			_, _ = w.Write([]byte(first + second))
			return
		}
		defer close(l.finished)
		_, _ = w.Write([]byte(first))
		w.(http.Flusher).Flush()
		close(l.sentFirst)
		select {
		case <-l.release:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte(second))
	}))
	t.Cleanup(l.Close)
	return l
}

// waitFor fails the test unless ch closes within a few seconds.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Errorf("timed out waiting for %s", what)
	}
}
