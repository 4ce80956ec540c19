package superseding

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// MaxResponseBytes caps how much of a superseder answer is read; a longer
// answer is unusable.
const MaxResponseBytes = 1 << 20

// maxRedirects is how many redirects the superseder request follows.
const maxRedirects = 3

// Artifact names and their content type (docs/contract/worker.md §5.7).
const (
	SupersededByArtifact = "public/superseded-by.json"
	SupersedesArtifact   = "public/supersedes.json"
	artifactContentType  = "application/json"
)

// defaultConcurrency bounds the queue calls in flight while claiming or
// resolving secondaries.
const defaultConcurrency = 8

// finishTimeout bounds resolving the secondaries and creating the
// artifacts once the primary's outcome is known.
const finishTimeout = 2 * time.Minute

// claimTimeout bounds the whole claiming step; each claim call also has the
// client's own retries.
const claimTimeout = 2 * time.Minute

// urlPattern is payload.supersederUrl's schema pattern.
var urlPattern = regexp.MustCompile(`^https?://[\x20-\x7e]*$`)

// TaskRef names one run in the superseding artifacts.
type TaskRef struct {
	TaskID string `json:"taskId"`
	RunID  int    `json:"runId"`
}

// flow is one superseding step for one initial claim.
type flow struct {
	opts Options
	req  Request
	cfg  Settings
	w    Host
	res  Result
}

func (f *flow) info(format string, args ...any) {
	f.res.LogLines = append(f.res.LogLines, fmt.Sprintf(format, args...))
}

func (f *flow) warn(format string, args ...any) {
	f.res.Warnings = append(f.res.Warnings, fmt.Sprintf(format, args...))
}

// alone returns a result that runs the initial task by itself.
func (f *flow) alone() (Result, error) {
	f.res.Primary, f.res.Secondaries = nil, nil
	return f.res, nil
}

func (f *flow) run(ctx context.Context) (Result, error) {
	t0 := f.req.Initial.Ref().TaskID
	rawURL := f.req.SupersederURL
	if key, ok := queueFlowKey(f.req.Initial.Definition().Extra); ok {
		f.info("Superseding: task %s is under the queue's flow control (extra.flow, key %q); the queue supersedes its tasks, so the worker does not.", t0, key)
		return f.alone()
	}
	if err := checkURL(rawURL); err != nil {
		// The payload schema rejects the task as malformed-payload later.
		f.info("Superseding: supersederUrl %q is not an absolute http(s) URL (%v); not calling it.", truncate(rawURL, 200), err)
		return f.alone()
	}
	if !allowed(rawURL, f.cfg.AllowedURLPrefixes) {
		f.warn("Superseding skipped: supersederUrl %s matches none of this worker's allowed superseder URL prefixes; running task %s alone.", rawURL, t0)
		return f.alone()
	}
	body, err := fetch(ctx, f.httpClient(), rawURL, t0, f.cfg.Timeout, f.cfg.UserAgent)
	var list []string
	if err == nil {
		list, err = ParseList(body, t0, f.cfg.MaxTasks)
	}
	if err != nil {
		f.warn("Superseding skipped: the superseder at %s gave no usable answer: %v; running task %s alone.", rawURL, err, t0)
		return f.alone()
	}
	if len(list) == 0 || len(list) == 1 && list[0] == t0 {
		f.info("Superseding: the superseder at %s lists nothing to supersede.", rawURL)
		return f.alone()
	}
	list = Normalize(list, f.cfg.Order)
	received := ""
	if f.cfg.Order == Descending {
		received = " best first (superseding.order descending), reversed here"
	}
	f.info("Superseding: the superseder at %s lists %d tasks%s; each supersedes those before it: %s", rawURL, len(list), received, strings.Join(list, ", "))

	held, notes := f.claimAll(ctx, list)
	for _, n := range notes {
		f.info("Superseding: %s", n)
	}
	if ctx.Err() != nil {
		// Shutdown while claiming (docs/contract/worker.md §6.2 row 14c): the initial
		// task is aborted by the worker; every other claim is released
		// with worker-shutdown so the queue retries it at once.
		others := make([]Claim, 0, len(held))
		for id, c := range held {
			if id != t0 {
				others = append(others, c)
			}
		}
		f.releaseAll(others)
		return Result{}, fmt.Errorf("worker is shutting down: %w", ctx.Err())
	}
	primaryIdx, secIdx := ChoosePrimary(list, func(id string) bool { return held[id] != nil })
	if len(secIdx) == 0 {
		f.info("Superseding: no other listed task could be claimed; running task %s alone.", t0)
		return f.alone()
	}
	primary := held[list[primaryIdx]]
	set := &secondarySet{opts: f.opts, w: f.w}
	var names []string
	for _, i := range secIdx {
		c := held[list[i]]
		set.members = append(set.members, c)
		names = append(names, fmt.Sprintf("%s (run %d)", c.Ref().TaskID, c.Ref().RunID))
	}
	if primary != f.req.Initial {
		f.info("Superseding: the queue handed this worker task %s; task %s (run %d) supersedes it and runs instead.", t0, primary.Ref().TaskID, primary.Ref().RunID)
		f.res.Primary = primary
	}
	f.info("Superseding: primary task %s (run %d) supersedes %s.", primary.Ref().TaskID, primary.Ref().RunID, strings.Join(names, ", "))
	f.res.Secondaries = set
	return f.res, nil
}

// checkURL applies the payload pattern and requires an absolute URL.
func checkURL(raw string) error {
	if !urlPattern.MatchString(raw) {
		return errors.New(`it does not match ^https?://[\x20-\x7e]*$`)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("parsing it: %w", err)
	}
	if u.Host == "" {
		return errors.New("it has no host")
	}
	return nil
}

// allowed applies superseding.allowedUrlPrefixes (empty: any URL).
func allowed(raw string, prefixes []string) bool {
	if len(prefixes) == 0 {
		return true
	}
	for _, p := range prefixes {
		if strings.HasPrefix(raw, p) {
			return true
		}
	}
	return false
}

// httpClient returns the client for the superseder request: at most three
// redirects, each target also subject to the allow-list, no cookies, no
// credentials.
func (f *flow) httpClient() *http.Client {
	prefixes := f.cfg.AllowedURLPrefixes
	return &http.Client{
		Transport: f.opts.Transport,
		CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			if !allowed(r.URL.String(), prefixes) {
				return fmt.Errorf("redirect to %s is outside the allowed superseder URL prefixes", r.URL.Redacted())
			}
			return nil
		},
	}
}

// RequestURL adds taskId=<initial> to the superseder URL, keeping any
// existing query (a taskId already there is replaced).
func RequestURL(raw, initial string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parsing superseder URL: %w", err)
	}
	u.Fragment, u.RawFragment = "", ""
	q, qerr := url.ParseQuery(u.RawQuery)
	switch {
	case qerr == nil && q.Has("taskId"):
		q.Set("taskId", initial)
		u.RawQuery = q.Encode()
	case u.RawQuery == "":
		u.RawQuery = "taskId=" + url.QueryEscape(initial)
	default:
		u.RawQuery += "&taskId=" + url.QueryEscape(initial)
	}
	return u.String(), nil
}

// fetch makes the one superseder request (docs/contract/worker.md §5.2 step 2) and
// returns the body of a 200 answer; anything else is an *UnusableError.
func fetch(ctx context.Context, hc *http.Client, raw, initial string, timeout time.Duration, userAgent string) ([]byte, error) {
	target, err := RequestURL(raw, initial)
	if err != nil {
		return nil, unusable("%v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, unusable("building the request: %v", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	resp, err := hc.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, unusable("no answer within %s", timeout)
		}
		return nil, unusable("request failed: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, unusable("it answered HTTP %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, unusable("the answer was not complete within %s", timeout)
		}
		return nil, unusable("reading the answer: %v", err)
	}
	if len(body) > MaxResponseBytes {
		return nil, unusable("the answer is larger than %d bytes", MaxResponseBytes)
	}
	return body, nil
}

// claimAll claims every listed task other than the initial one (docs/contract/worker.md
// §5.3) with bounded concurrency and returns the held claims by taskId (the
// initial claim included) and one note per entry for the task log. Calls
// already started finish even if ctx ends; no new ones start after.
func (f *flow) claimAll(ctx context.Context, list []string) (map[string]Claim, []string) {
	held := map[string]Claim{f.req.Initial.Ref().TaskID: f.req.Initial}
	notes := make([]string, len(list))
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
	defer cancel()
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, f.opts.Concurrency)
	)
	for i, id := range list {
		if id == f.req.Initial.Ref().TaskID {
			continue
		}
		if ctx.Err() != nil {
			notes[i] = fmt.Sprintf("%s not claimed: the worker is shutting down", id)
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			notes[i] = fmt.Sprintf("%s not claimed: the worker is shutting down", id)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, note := f.claimOne(callCtx, id)
			mu.Lock()
			defer mu.Unlock()
			notes[i] = note
			if c != nil {
				held[id] = c
			}
		}()
	}
	wg.Wait()
	out := notes[:0]
	for _, n := range notes {
		if n != "" {
			out = append(out, n)
		}
	}
	return held, out
}

// claimOne checks and claims one listed task. A claim is held (its
// reclaimer running) from the moment it is returned.
func (f *flow) claimOne(ctx context.Context, id string) (Claim, string) {
	q, cfg := f.w.Queue(), f.cfg
	// Hardening (docs/contract/worker.md §5.3 step 1): only tasks this worker could
	// run and that name the same superseder.
	def, err := q.Task(ctx, id)
	if err != nil {
		return nil, fmt.Sprintf("%s skipped: reading its definition failed: %v", id, err)
	}
	tq := def.TaskQueueID
	if tq == "" {
		tq = def.ProvisionerID + "/" + def.WorkerType
	}
	if tq != cfg.TaskQueueID {
		return nil, fmt.Sprintf("%s skipped: it belongs to task queue %s, not %s", id, tq, cfg.TaskQueueID)
	}
	if u := PayloadURL(def.Payload); u != f.req.SupersederURL {
		return nil, fmt.Sprintf("%s skipped: its supersederUrl differs from this task's", id)
	}
	if _, ok := queueFlowKey(def.Extra); ok {
		return nil, fmt.Sprintf("%s skipped: it is under the queue's flow control, which decides when it runs", id)
	}
	// Claim the last run, and only while it is pending (docs/contract/worker.md §5.3
	// step 2). The status is read even with runIdZeroOnly, so a run that
	// is already running is skipped without a refused claim.
	st, err := q.Status(ctx, id)
	if err != nil {
		return nil, fmt.Sprintf("%s skipped: reading its status failed: %v", id, err)
	}
	if len(st.Runs) == 0 {
		return nil, fmt.Sprintf("%s skipped: it has no run (state %s)", id, st.State)
	}
	last := st.Runs[len(st.Runs)-1]
	if last.State != tcclient.StatePending {
		return nil, fmt.Sprintf("%s skipped: its run %d is %s, not pending", id, last.RunID, last.State)
	}
	runID := last.RunID
	if f.cfg.RunIDZeroOnly && runID != 0 {
		return nil, fmt.Sprintf("%s skipped: its pending run is run %d and superseding.runIdZeroOnly is set", id, runID)
	}
	tc, err := q.ClaimTask(ctx, id, runID, &tcclient.ClaimTaskRequest{WorkerGroup: cfg.WorkerGroup, WorkerID: cfg.WorkerID})
	if err != nil {
		return nil, fmt.Sprintf("%s not claimed: %v", id, err)
	}
	if err := f.w.CheckClaim(tc); err != nil {
		// E.g. the empty answer a quarantined worker may get.
		return nil, fmt.Sprintf("%s not claimed: the queue's answer is not a usable claim: %v", id, err)
	}
	if tc.Status.TaskID != id || tc.RunID != runID {
		return nil, fmt.Sprintf("%s not claimed: the queue answered a claim for %s run %d", id, tc.Status.TaskID, tc.RunID)
	}
	c, err := f.w.HoldClaim(*tc)
	if err != nil {
		return nil, fmt.Sprintf("%s not claimed: the queue's answer is not a usable claim: %v", id, err)
	}
	return c, fmt.Sprintf("claimed %s run %d", id, runID)
}

// releaseAll resolves claims the worker will not run with worker-shutdown,
// so the queue retries them at once instead of after claim expiry.
func (f *flow) releaseAll(claims []Claim) {
	set := &secondarySet{opts: f.opts, w: f.w, members: claims}
	set.resolveAll(context.Background(), nil, Outcome{State: tcclient.StateException, Reason: tcclient.ReasonWorkerShutdown, Aborted: true})
}
