package cli

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// Default log artifact names (docs/contract/worker.md §3); a task may rename them in
// payload.logs.
const (
	LiveLogName    = "public/logs/live.log"
	BackingLogName = "public/logs/live_backing.log"
)

// LogOptions are the inputs of `task log`.
type LogOptions struct {
	TaskID string
	// Follow streams until the task resolves.
	Follow bool
	// Run selects a run; negative means the latest.
	Run int
}

// logNames are the artifact names of a task's live and backing logs.
type logNames struct{ live, backing string }

// logNamesOf reads payload.logs from the task definition, falling back to
// the defaults when the definition cannot be read (e.g. missing the
// get-task scope) or names nothing.
func (a *app) logNamesOf(ctx context.Context, taskID string) logNames {
	names := logNames{live: LiveLogName, backing: BackingLogName}
	def, err := a.client.Task(ctx, taskID)
	if err != nil {
		return names
	}
	var p struct {
		Logs struct {
			Live    string `json:"live"`
			Backing string `json:"backing"`
		} `json:"logs"`
	}
	if json.Unmarshal(def.Payload, &p) == nil {
		if p.Logs.Live != "" {
			names.live = p.Logs.Live
		}
		if p.Logs.Backing != "" {
			names.backing = p.Logs.Backing
		}
	}
	return names
}

func (a *app) log(ctx context.Context, opts LogOptions) error {
	if err := checkTaskID("taskId", opts.TaskID); err != nil {
		return err
	}
	if opts.Follow {
		if opts.Run >= 0 {
			return usagef("--run cannot be combined with --follow, which follows the latest run")
		}
		_, err := a.follow(ctx, opts.TaskID, a.env.Stdout, true)
		return err
	}
	st, err := a.client.Status(ctx, opts.TaskID)
	if err != nil {
		return failure("getting status of task "+opts.TaskID, err)
	}
	if len(st.Runs) == 0 {
		return &ExitError{Code: ExitFailed, Msg: fmt.Sprintf("task %s has no runs yet (%s): use --follow to wait for it", opts.TaskID, st.State)}
	}
	runID := opts.Run
	if runID < 0 {
		runID = len(st.Runs) - 1
	}
	if runID >= len(st.Runs) {
		return usagef("task %s has no run %d (its runs are 0 to %d)", opts.TaskID, runID, len(st.Runs)-1)
	}
	run := st.Runs[runID]
	names := a.logNamesOf(ctx, opts.TaskID)
	switch run.State {
	case tcclient.StatePending:
		return &ExitError{Code: ExitFailed, Msg: fmt.Sprintf("run %d of task %s has not started yet (pending): use --follow to wait for it", runID, opts.TaskID)}
	case tcclient.StateRunning:
		s := &logStream{a: a, taskID: opts.TaskID, run: runID, names: names, out: a.env.Stdout}
		got, err := s.live(ctx, a.env.liveIdle())
		if err != nil {
			return err
		}
		if !got {
			return &ExitError{Code: ExitFailed, Msg: fmt.Sprintf("the live log of task %s (run %d) is not available yet: use --follow to wait for it", opts.TaskID, runID)}
		}
		if !s.complete {
			fmt.Fprintf(a.env.Stderr, "(task %s is still running; use --follow to keep streaming its log)\n", opts.TaskID)
		}
		return nil
	default:
		s := &logStream{a: a, taskID: opts.TaskID, run: runID, names: names, out: a.env.Stdout}
		return s.backing(ctx)
	}
}

// logStream writes one run's log to out exactly once, however many times
// it is reconnected: the live log replays from the start on every
// connection and the backing log holds the same bytes, so written is the
// offset below which everything read is skipped.
type logStream struct {
	a       *app
	taskID  string
	run     int
	names   logNames
	out     io.Writer
	written int64
	// complete is set once the backing log (the whole log) was copied.
	complete bool
	// unavailable is set when the live log cannot be read (error
	// artifact, missing scope); only the backing log is tried then.
	unavailable bool
}

// live copies what the run's live log serves. With idle > 0 it stops after
// that long without new output, or after snapshotLimit×idle in all (a
// snapshot of a running task's log);
// otherwise it runs until the stream ends. It reports whether the log was
// reached; a 404 (the worker has not published it yet) is not an error.
// Other failures mark the live log unavailable, leaving the backing log.
func (s *logStream) live(ctx context.Context, idle time.Duration) (bool, error) {
	ref, err := s.a.client.GetArtifact(ctx, s.taskID, s.run, s.names.live)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if tcclient.StatusCode(err) == http.StatusNotFound {
			return false, nil
		}
		s.unavailable = true
		return false, failure(fmt.Sprintf("reading %s of task %s", s.names.live, s.taskID), err)
	}
	if ref.StorageType != tcclient.StorageReference {
		// The live log already links to the backing log: the run's
		// output is complete.
		if err := s.copyURL(ctx, ref.URL, 0, false); err != nil {
			return false, err
		}
		s.complete = true
		return true, nil
	}
	if err := s.copyURL(ctx, ref.URL, idle, true); err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		// The live server goes away when the run ends; the caller falls
		// back to the backing log.
		return false, nil
	}
	return true, nil
}

// backing copies the rest of the run's backing log, trying the backing
// name first and then the live name (which links to it after the run).
func (s *logStream) backing(ctx context.Context) error {
	var lastErr error
	for _, name := range []string{s.names.backing, s.names.live} {
		ref, err := s.a.client.GetArtifact(ctx, s.taskID, s.run, name)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			lastErr = failure(fmt.Sprintf("reading %s of task %s run %d", name, s.taskID, s.run), err)
			continue
		}
		if ref.StorageType == tcclient.StorageReference {
			// A reference after resolution points at a live-log server
			// that no longer exists (the worker died before switching
			// over); there is nothing more to read.
			lastErr = &ExitError{Code: ExitFailed, Msg: fmt.Sprintf("task %s run %d has no backing log (%s is still a live-log reference)", s.taskID, s.run, name)}
			continue
		}
		if err := s.copyURL(ctx, ref.URL, 0, false); err != nil {
			return err
		}
		s.complete = true
		return nil
	}
	return lastErr
}

// snapshotLimit bounds a live-log snapshot to this many idle periods.
const snapshotLimit = 10

// copyURL downloads rawURL and writes the bytes past s.written to s.out;
// resume asks a live log for those bytes only (Range), where a stored log
// is read whole (its bytes may be gzip-encoded).
func (s *logStream) copyURL(ctx context.Context, rawURL string, idle time.Duration, resume bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var timer *time.Timer
	if idle > 0 {
		timer = time.AfterFunc(idle, cancel)
		defer timer.Stop()
		// A task that prints without pause never goes idle; the snapshot
		// still ends, a little after the replay of the log so far.
		hard := time.AfterFunc(snapshotLimit*idle, cancel)
		defer hard.Stop()
	}
	from := int64(0)
	if resume {
		from = s.written
	}
	body, pos, err := s.a.openFrom(ctx, rawURL, from)
	if err != nil {
		if idle > 0 && errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer body.Close()
	buf := make([]byte, 32<<10)
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if timer != nil {
				timer.Reset(idle)
			}
			chunk := buf[:n]
			if skip := s.written - pos; skip > 0 {
				chunk = chunk[min(skip, int64(n)):]
			}
			pos += int64(n)
			if len(chunk) > 0 {
				if _, err := s.out.Write(chunk); err != nil {
					return fmt.Errorf("writing the log: %w", err)
				}
				s.written += int64(len(chunk))
			}
		}
		if errors.Is(rerr, io.EOF) {
			return nil
		}
		if rerr != nil {
			if idle > 0 && ctx.Err() != nil {
				// The idle timer fired: the snapshot is done. A cancel
				// of the parent context is reported by the caller.
				return nil
			}
			return fmt.Errorf("reading the log of task %s: %w", s.taskID, rerr)
		}
	}
}

// open GETs an artifact URL with plain HTTP (artifact URLs carry their own
// authorization) and returns the decoded body. Go's transport decompresses
// gzip only when it asked for it itself; a body that still says
// Content-Encoding: gzip (a custom transport, or a server that compresses
// unasked, as stores of pre-gzipped logs do) is decompressed here.
func (a *app) open(ctx context.Context, rawURL string) (io.ReadCloser, error) {
	body, _, err := a.openFrom(ctx, rawURL, 0)
	return body, err
}

// openFrom is open resuming at byte from (Range: bytes=from-, when from >
// 0): it returns where the body starts, from when the server answered
// 206 (a live log resumed, nothing repeated), 0 when it sent the whole
// thing (the caller skips what it has).
func (a *app) openFrom(ctx context.Context, rawURL string, from int64) (io.ReadCloser, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("building request for %s: %w", redactURL(rawURL), err)
	}
	if from > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", from))
		// A range of the compressed bytes is not one of the log's.
		req.Header.Set("Accept-Encoding", "identity")
	}
	resp, err := a.env.httpClient().Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("downloading %s: %w", redactURL(rawURL), err)
	}
	start := int64(0)
	switch {
	case resp.StatusCode == http.StatusPartialContent && from > 0 && rangeStartsAt(resp.Header.Get("Content-Range"), from):
		start = from
	case resp.StatusCode != http.StatusOK:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, 0, &ExitError{Code: ExitFailed, Msg: oneLine(fmt.Sprintf("downloading %s: HTTP %d: %s",
			redactURL(rawURL), resp.StatusCode, firstLine(string(msg))))}
	}
	if !resp.Uncompressed && strings.EqualFold(strings.TrimSpace(resp.Header.Get("Content-Encoding")), "gzip") {
		if start > 0 {
			resp.Body.Close()
			return nil, 0, fmt.Errorf("downloading %s: a range of gzip-encoded bytes", redactURL(rawURL))
		}
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			resp.Body.Close()
			return nil, 0, fmt.Errorf("decompressing %s: %w", redactURL(rawURL), err)
		}
		return struct {
			io.Reader
			io.Closer
		}{zr, resp.Body}, 0, nil
	}
	return resp.Body, start, nil
}

// rangeStartsAt reports whether a 206's Content-Range starts at from; a
// live log still growing sends none (its length is unknown), and its 206
// alone says it starts where asked.
func rangeStartsAt(contentRange string, from int64) bool {
	if contentRange == "" {
		return true
	}
	var first, last int64
	var total string
	n, _ := fmt.Sscanf(contentRange, "bytes %d-%d/%s", &first, &last, &total)
	return n >= 2 && first == from
}

// redactURL drops the query of a URL for messages: signed URLs carry their
// credentials there.
func redactURL(raw string) string {
	if i := strings.IndexByte(raw, '?'); i >= 0 {
		return raw[:i]
	}
	return raw
}

// follow waits for a task to resolve while streaming the log of each run as
// it happens, on out, with progress notices on stderr. It returns the final
// status. logRequired makes an unreadable log an error (for `log
// --follow`); `run` carries on and reports the result regardless.
func (a *app) follow(ctx context.Context, taskID string, out io.Writer, logRequired bool) (*tcclient.TaskStatus, error) {
	f := &follower{a: a, taskID: taskID, out: out, logRequired: logRequired}
	for {
		st, err := a.client.Status(ctx, taskID)
		if err != nil {
			if ctx.Err() != nil {
				return nil, f.interrupted(ctx)
			}
			return nil, failure("getting status of task "+taskID, err)
		}
		if len(st.Runs) == 0 {
			f.notice(fmt.Sprintf("Waiting: task %s is %s (its dependencies have not resolved)", taskID, st.State))
			if err := tcclient.SleepContext(ctx, a.env.pollInterval()); err != nil {
				return nil, f.interrupted(ctx)
			}
			continue
		}
		last := st.Runs[len(st.Runs)-1]
		f.streamRun(ctx, last)
		switch last.State {
		case tcclient.StatePending:
			f.notice(fmt.Sprintf("Waiting for a worker to claim task %s on %s", taskID, st.TaskQueueID))
		case tcclient.StateRunning:
			progressed, err := f.live(ctx, last.RunID)
			if err != nil {
				return nil, err
			}
			if progressed {
				// Re-check the status at once: the stream ended because
				// the run did (or the connection dropped). Without
				// progress, wait instead, so a live-log server that
				// keeps hanging up is not hammered.
				continue
			}
		default:
			if err := f.finish(ctx); err != nil {
				return nil, err
			}
			return st, nil
		}
		if err := tcclient.SleepContext(ctx, a.env.pollInterval()); err != nil {
			return nil, f.interrupted(ctx)
		}
	}
}

// follower is one follow's state: the stream of the run it shows and the
// last notice it gave (each is said once).
type follower struct {
	a           *app
	taskID      string
	out         io.Writer
	logRequired bool
	names       *logNames
	stream      *logStream
	said        string
}

func (f *follower) notice(msg string) {
	if msg != f.said {
		fmt.Fprintln(f.a.env.Stderr, msg)
		f.said = msg
	}
}

func (f *follower) interrupted(ctx context.Context) error {
	msg := "interrupted"
	if !f.logRequired {
		// `run` created the task: say that it outlives the command.
		msg = fmt.Sprintf("interrupted; task %s carries on without you (hopper task cancel %s stops it)", f.taskID, f.taskID)
	}
	return &ExitError{Code: ExitInterrupted, Err: ctx.Err(), Msg: msg}
}

// streamRun makes the stream follow run last, once the previous run's log
// is finished.
func (f *follower) streamRun(ctx context.Context, last tcclient.Run) {
	if f.names == nil {
		n := f.a.logNamesOf(ctx, f.taskID)
		f.names = &n
	}
	if f.stream != nil && f.stream.run == last.RunID {
		return
	}
	if f.stream != nil && !f.stream.complete && f.stream.written > 0 {
		// The previous run ended while we streamed it: finish its log
		// before moving on (best effort).
		if err := f.stream.backing(ctx); err != nil && ctx.Err() == nil {
			f.notice(fmt.Sprintf("(cannot show the rest of run %d's log: %v)", f.stream.run, err))
		}
	}
	if f.stream != nil {
		f.notice(fmt.Sprintf("Run %d of task %s: %s", last.RunID, f.taskID, last.ReasonCreated))
	}
	f.stream = &logStream{a: f.a, taskID: f.taskID, run: last.RunID, names: *f.names, out: f.out}
}

// live streams the running run's live log until it ends or the queue says
// the run is over, and reports whether it showed anything new.
func (f *follower) live(ctx context.Context, runID int) (progressed bool, err error) {
	if f.stream.complete || f.stream.unavailable {
		return false, nil
	}
	before := f.stream.written
	// A live log can hang open long after the run is resolved (a
	// cancelled task keeps its worker busy until its next reclaim), so a
	// watcher ends the stream once the queue says the run is over.
	streamCtx, stopStream := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		f.a.watchRun(streamCtx, f.taskID, runID, stopStream)
	}()
	_, err = f.stream.live(streamCtx, 0)
	stopStream()
	<-watched
	if err != nil {
		if ctx.Err() != nil {
			return false, f.interrupted(ctx)
		}
		if !errors.Is(err, context.Canceled) {
			f.notice(fmt.Sprintf("(live log unavailable: %v; the log is shown once the run ends)", err))
		}
	}
	return f.stream.written > before, nil
}

// finish shows the resolved run's whole log, unless the stream already
// did. A log that cannot be read is an error only when logRequired.
func (f *follower) finish(ctx context.Context) error {
	if f.stream.complete {
		return nil
	}
	err := f.stream.backing(ctx)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return f.interrupted(ctx)
	case f.logRequired:
		return err
	}
	f.notice(fmt.Sprintf("(cannot show the log: %v)", err))
	return nil
}

// watchRun polls the task until run runID is resolved or superseded by a
// newer run, then, after a short grace period for the live log's last
// bytes, calls stop. It returns when ctx ends.
func (a *app) watchRun(ctx context.Context, taskID string, runID int, stop context.CancelFunc) {
	for tcclient.SleepContext(ctx, a.env.pollInterval()) == nil {
		st, err := a.client.Status(ctx, taskID)
		if err != nil {
			// The main loop reports persistent failures; a watcher only
			// ever shortens a stream.
			continue
		}
		if len(st.Runs)-1 != runID || isResolved(st.Runs[runID].State) {
			if tcclient.SleepContext(ctx, 2*a.env.pollInterval()) == nil {
				stop()
			}
			return
		}
	}
}
