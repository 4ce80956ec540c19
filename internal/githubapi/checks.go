package githubapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/forge"
	"github.com/hopper-ci/hopper/internal/github"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// ArtifactReader reads an artifact of a task's run for the check runs'
// output (the server reads it from blob storage).
type ArtifactReader interface {
	// ReadArtifact returns the artifact's bytes: all of them in head if
	// there are at most 2*keep, otherwise the first keep in head and the
	// last keep in tail. store.ErrNotFound when the run has no such
	// artifact with stored content.
	ReadArtifact(ctx context.Context, taskID string, runID int, name string, keep int) (head, tail []byte, err error)
}

// The artifacts a check run's output is made of, as in Taskcluster
// (extra.github.customCheckRun.{text,annotations}ArtifactName override the
// custom ones).
const (
	checkLogArtifact         = "public/logs/live_backing.log"
	checkTextArtifact        = "public/github/customCheckRunText.md"
	checkAnnotationsArtifact = "public/github/customCheckRunAnnotations.json"
)

// Bounds of a check run's output. GitHub refuses a text, summary or
// title over 65535 characters (Taskcluster issue #7664) and takes at most
// 50 annotations in one request.
const (
	maxCheckText        = 60000
	maxCheckSummary     = 8000
	maxCheckAnnotations = 50
	checkLogHeadLines   = 20
	checkLogTailLines   = 200
	checkArtifactKeep   = 64 << 10
)

// checkConclusions maps a resolved run (its reasonResolved, else its
// state) to the check run's conclusion, as Taskcluster's github service
// does.
var checkConclusions = map[string]string{
	queue.StateCompleted:   "success",
	queue.StateFailed:      "failure",
	queue.StateException:   "failure",
	"deadline-exceeded":    "timed_out",
	"canceled":             "cancelled",
	"claim-expired":        "failure",
	"worker-shutdown":      "neutral",
	"malformed-payload":    "action_required",
	"resource-unavailable": "failure",
	"internal-error":       "failure",
	"intermittent-task":    "neutral",
}

// checkConclusion is the conclusion of a resolved run. A run the queue
// will retry (worker-shutdown, intermittent-task) is neutral; an
// intermittent task with no retry left failed.
func checkConclusion(r *queue.Run, retriesLeft int) string {
	if r.ReasonResolved == "intermittent-task" && retriesLeft == 0 {
		return "failure"
	}
	if c, ok := checkConclusions[r.ReasonResolved]; ok {
		return c
	}
	if c, ok := checkConclusions[r.State]; ok {
		return c
	}
	return "failure"
}

// checkStatus is GitHub's status of a run's check run.
func checkStatus(r *queue.Run) string {
	switch {
	case r == nil || r.State == queue.StatePending:
		return "queued"
	case r.State == queue.StateRunning:
		return "in_progress"
	}
	return "completed"
}

// usesChecks says whether a build reports with check runs: it asked for
// them and its forge has them (Gitea and Forgejo have statuses only).
func (s *Service) usesChecks(b *store.GithubBuild) bool {
	f := s.Forges[b.Host]
	return b.Reporting == github.ReportingChecks && f != nil && f.Kind == forge.KindGitHub
}

// listGroup lists every task of a task group.
func (s *Service) listGroup(ctx context.Context, taskGroupID string) ([]*queue.TaskState, error) {
	var tasks []*queue.TaskState
	page := store.Page{Limit: 1000}
	for {
		ts, next, err := s.Store.ListTaskGroup(ctx, taskGroupID, page)
		if err != nil {
			return nil, fmt.Errorf("listing task group %s: %w", taskGroupID, err)
		}
		tasks = append(tasks, ts...)
		if next == "" {
			return tasks, nil
		}
		page.ContinuationToken = next
	}
}

// updateChecks moves the check run of every run of the build's tasks to
// the run's state, queueing its body in the outbox. A task with no run
// yet has its run 0 queued; each new run gets a check run of its own (a
// completed one cannot be reopened). Only checks that move are written,
// and the store moves them only forward.
func (s *Service) updateChecks(ctx context.Context, b *store.GithubBuild, tasks []*queue.TaskState) error {
	known, err := s.Store.ListGithubChecks(ctx, b.TaskGroupID)
	if err != nil {
		return err
	}
	states := map[string]string{}
	for _, c := range known {
		states[c.TaskID+"/"+strconv.Itoa(c.RunID)] = c.State
	}
	order := []string{"", "queued", "in_progress", "completed"}
	for _, t := range tasks {
		runs := []*queue.Run{nil}
		if len(t.Runs) > 0 {
			runs = runs[:0]
			for i := range t.Runs {
				runs = append(runs, &t.Runs[i])
			}
		}
		for i, r := range runs {
			want := checkStatus(r)
			if slices.Index(order, states[t.TaskID+"/"+strconv.Itoa(i)]) >= slices.Index(order, want) {
				continue
			}
			body, err := s.checkRunBody(ctx, b, t, i, r)
			if err != nil {
				return err
			}
			c := store.GithubCheck{Host: b.Host, TaskID: t.TaskID, RunID: i, TaskGroupID: b.TaskGroupID, State: want}
			target := t.TaskID + "/" + strconv.Itoa(i)
			entry := store.GithubOutboxEntry{Host: b.Host, Key: "check:" + target, Kind: "check_run", Replace: true,
				Owner: b.Organization, Repo: b.Repository, Target: target, InstallationID: b.InstallationID, Body: body}
			if _, err := s.Store.AdvanceGithubCheck(ctx, c, s.Clock.Now(), &entry); err != nil {
				return err
			}
		}
	}
	return nil
}

// taskURL is the console page of a task.
func (s *Service) taskURL(taskID string) string {
	return s.RootURL + "/ui/#/task/" + taskID
}

// checkOutput is a check run's output.
type checkOutput struct {
	Title       string            `json:"title"`
	Summary     string            `json:"summary"`
	Text        string            `json:"text,omitempty"`
	Annotations []json.RawMessage `json:"annotations,omitempty"`
}

// checkRunBody is GitHub's create-check-run body for a task's run in its
// current state (head_sha is dropped when it updates a check run).
func (s *Service) checkRunBody(ctx context.Context, b *store.GithubBuild, t *queue.TaskState, runID int, r *queue.Run) ([]byte, error) {
	name := t.Task.Metadata.Name
	if name == "" {
		name = t.TaskID
	}
	status := checkStatus(r)
	body := map[string]any{"name": clip(name, 200), "head_sha": b.SHA, "external_id": t.TaskID,
		"details_url": s.taskURL(t.TaskID), "status": status}
	var summary strings.Builder
	fmt.Fprintf(&summary, "[View task in hopper](%s) · [task group](%s)\n\n", s.taskURL(t.TaskID), s.groupURL(b.TaskGroupID))
	out := checkOutput{}
	switch status {
	case "queued":
		out.Title = name + ": pending"
		fmt.Fprintf(&summary, "Run %d is waiting for a worker.\n", runID)
	case "in_progress":
		out.Title = name + ": running"
		body["started_at"] = r.Started.UTC().Format(time.RFC3339)
		fmt.Fprintf(&summary, "Run %d started at %s on worker %s/%s.\n", runID, r.Started.UTC().Format(time.RFC3339), r.WorkerGroup, r.WorkerID)
	default:
		conclusion := checkConclusion(r, t.RetriesLeft)
		body["conclusion"] = conclusion
		resolved := s.Clock.Now()
		if r.Resolved != nil {
			resolved = r.Resolved.Time
		}
		body["completed_at"] = resolved.UTC().Format(time.RFC3339)
		if r.Started != nil {
			body["started_at"] = r.Started.UTC().Format(time.RFC3339)
		}
		out.Title = name + ": " + conclusion
		fmt.Fprintf(&summary, "Run %d resolved as **%s**", runID, r.State)
		if r.ReasonResolved != "" && r.ReasonResolved != r.State {
			fmt.Fprintf(&summary, " (%s)", r.ReasonResolved)
		}
		fmt.Fprintf(&summary, " at %s.\n", resolved.UTC().Format(time.RFC3339))
		text, annotations, err := s.checkArtifacts(ctx, t, runID)
		if err != nil {
			return nil, err
		}
		out.Text, out.Annotations = text, annotations
	}
	out.Title = clip(out.Title, 200)
	out.Summary = clip(summary.String(), maxCheckSummary)
	body["output"] = out
	return json.Marshal(body)
}

// checkArtifacts builds a resolved run's output text (the custom text,
// then an excerpt of its log) and annotations from its artifacts.
func (s *Service) checkArtifacts(ctx context.Context, t *queue.TaskState, runID int) (string, []json.RawMessage, error) {
	if s.Artifacts == nil {
		return "", nil, nil
	}
	textName, annotationsName := checkTextArtifact, checkAnnotationsArtifact
	var extra struct {
		Github struct {
			CustomCheckRun struct {
				TextArtifactName        string `json:"textArtifactName"`
				AnnotationsArtifactName string `json:"annotationsArtifactName"`
			} `json:"customCheckRun"`
		} `json:"github"`
	}
	if json.Unmarshal(t.Task.Extra, &extra) == nil {
		if n := extra.Github.CustomCheckRun.TextArtifactName; n != "" {
			textName = n
		}
		if n := extra.Github.CustomCheckRun.AnnotationsArtifactName; n != "" {
			annotationsName = n
		}
	}
	read := func(name string) ([]byte, []byte, error) {
		head, tail, err := s.Artifacts.ReadArtifact(ctx, t.TaskID, runID, name, checkArtifactKeep)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, nil
		}
		if err != nil {
			// An artifact that cannot be read leaves the output without
			// it rather than holding the check run back.
			s.Log.Info("reading an artifact for a check run failed", "taskId", t.TaskID, "runId", runID, "name", name, "error", err)
			return nil, nil, nil
		}
		return head, tail, nil
	}
	var text strings.Builder
	if head, tail, _ := read(textName); head != nil {
		custom := string(head)
		if tail != nil {
			custom += "\n…\n"
		}
		text.WriteString(clip(custom, maxCheckText/2))
		text.WriteString("\n\n")
	}
	var annotations []json.RawMessage
	if head, tail, _ := read(annotationsName); head != nil {
		var list []json.RawMessage
		if tail != nil || json.Unmarshal(head, &list) != nil {
			text.WriteString("_" + annotationsName + " is not a JSON array of annotations: it was left out._\n\n")
		} else {
			for _, a := range list {
				var one map[string]any
				if json.Unmarshal(a, &one) == nil && one != nil && len(annotations) < maxCheckAnnotations {
					annotations = append(annotations, a)
				}
			}
		}
	}
	if head, tail, _ := read(checkLogArtifact); head != nil {
		budget := maxCheckText - text.Len() - 200
		if excerpt := logExcerpt(head, tail, budget); excerpt != "" {
			fence := "````"
			fmt.Fprintf(&text, "Log excerpt (%s):\n\n%s\n%s\n%s\n", checkLogArtifact, fence, excerpt, fence)
		}
	}
	return clip(text.String(), maxCheckText), annotations, nil
}

var ansiEscapes = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`)

// logExcerpt is the first checkLogHeadLines and the last
// checkLogTailLines lines of a log, ANSI escapes removed, within budget
// bytes (the tail is kept whole first: the end of a log says why it
// failed).
func logExcerpt(head, tail []byte, budget int) string {
	if budget <= 0 {
		return ""
	}
	clean := func(b []byte) []string {
		s := ansiEscapes.ReplaceAllString(strings.ToValidUTF8(string(b), "\uFFFD"), "")
		return strings.Split(strings.TrimRight(s, "\n"), "\n")
	}
	first := clean(head)
	var last []string
	if tail != nil {
		last = clean(tail)
		if len(last) > 1 {
			last = last[1:] // a partial line
		}
	} else if len(first) > checkLogHeadLines+checkLogTailLines {
		last = first[checkLogHeadLines:]
		first = first[:checkLogHeadLines]
	}
	if len(first) > checkLogHeadLines {
		first = first[:checkLogHeadLines]
	}
	skipped := tail != nil || len(last) > checkLogTailLines
	if len(last) > checkLogTailLines {
		last = last[len(last)-checkLogTailLines:]
	}
	end := strings.Join(last, "\n")
	if len(end) > budget {
		end = end[len(end)-budget:]
		for len(end) > 0 && !utf8.RuneStart(end[0]) {
			end = end[1:]
		}
		return "…\n" + end
	}
	start := clip(strings.Join(first, "\n"), budget-len(end)-8)
	if !skipped {
		if end == "" {
			return start
		}
		return start + "\n" + end
	}
	return start + "\n…\n" + end
}

// clip cuts s to at most n bytes on a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// sendCheckRun creates a run's check run (recording its id) or, once it
// exists, updates it with the entry's body.
func (s *Service) sendCheckRun(ctx context.Context, f *forge.Forge, e *store.GithubOutboxEntry) error {
	taskID, run, _ := strings.Cut(e.Target, "/")
	runID, err := strconv.Atoi(run)
	if err != nil {
		return fmt.Errorf("check run target %q: %w", e.Target, err)
	}
	c, err := s.Store.GetGithubCheck(ctx, e.Host, taskID, runID)
	if err != nil {
		return err
	}
	var body map[string]any
	if err := json.Unmarshal(e.Body, &body); err != nil {
		return fmt.Errorf("check run body of %s: %w", e.Target, err)
	}
	if c.CheckRunID == store.GithubCheckCreating {
		// An earlier attempt sent the create and died before recording
		// the id: the check run is found rather than made twice.
		if c.CheckRunID, err = s.findCheckRun(ctx, f, e, taskID, body); err != nil {
			return err
		}
		if c.CheckRunID != 0 {
			if err := s.Store.SetGithubCheckRunID(ctx, store.SetGithubCheckRunIDParams{Host: e.Host, TaskID: taskID, RunID: runID, CheckRunID: c.CheckRunID}); err != nil {
				return err
			}
		}
	}
	if c.CheckRunID == 0 {
		// Recorded before the create is sent, so that whoever sends this
		// entry next knows to look for what this attempt made.
		if err := s.Store.SetGithubCheckRunID(ctx, store.SetGithubCheckRunIDParams{Host: e.Host, TaskID: taskID, RunID: runID, CheckRunID: store.GithubCheckCreating}); err != nil {
			return err
		}
		id, err := f.CreateCheckRun(ctx, e.InstallationID, e.Owner, e.Repo, json.RawMessage(e.Body))
		if err != nil {
			return err
		}
		return s.Store.SetGithubCheckRunID(ctx, store.SetGithubCheckRunIDParams{Host: e.Host, TaskID: taskID, RunID: runID, CheckRunID: id})
	}
	delete(body, "head_sha")
	update, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return f.UpdateCheckRun(ctx, e.InstallationID, e.Owner, e.Repo, c.CheckRunID, update)
}

// findCheckRun finds a check run of the task on the entry's commit, made
// by this forge's App under the entry's name, that no run's check has
// recorded (one an earlier attempt created and did not record); 0 if
// there is none.
func (s *Service) findCheckRun(ctx context.Context, f *forge.Forge, e *store.GithubOutboxEntry, taskID string, body map[string]any) (int64, error) {
	sha, _ := body["head_sha"].(string)
	runs, err := f.CheckRuns(ctx, e.InstallationID, e.Owner, e.Repo, sha)
	if err != nil {
		return 0, err
	}
	for _, r := range runs {
		id, _ := r["id"].(float64)
		if r["external_id"] != taskID || r["name"] != body["name"] || id <= 0 {
			continue
		}
		_, err := s.Store.FindGithubCheck(ctx, e.Host, int64(id))
		if errors.Is(err, store.ErrNotFound) {
			return int64(id), nil
		}
		if err != nil {
			return 0, err
		}
	}
	return 0, nil
}

// rerun reruns the task of a check run a user asked to run again
// (check_run rerequested; the webhook already left out bots), with only
// the repository's :rerun role, and puts its build back to pending so the
// reporter follows the new run (whose check run is a new one). A refusal
// becomes a comment, as in Taskcluster.
func (j *job) rerun(ctx context.Context) error {
	e := j.e
	if j.s.Reruns == nil {
		j.out.summary = "this hopper does not rerun tasks for check runs"
		return nil
	}
	c, err := j.s.Store.FindGithubCheck(ctx, e.Host, e.CheckRunID)
	if errors.Is(err, store.ErrNotFound) {
		j.out.summary = fmt.Sprintf("check run %d is not one of hopper's: nothing to rerun", e.CheckRunID)
		return nil
	}
	if err != nil {
		return err
	}
	expander, err := j.s.Roles.Expander(ctx)
	if err != nil {
		return err
	}
	scopes := expander.Expand([]string{"assume:repo:" + e.Host + "/" + e.Organization + "/" + e.Repository + ":rerun"})
	if _, err := j.s.Reruns.RerunTaskAs(ctx, c.TaskID, ClientID, scopes); err != nil {
		apiErr := api.AsError(err)
		if apiErr == nil {
			return err
		}
		j.comment(fmt.Sprintf("Taskcluster could not rerun task %s", c.TaskID), apiErr.Message)
		j.out.summary = "rerun refused: " + apiErr.Message
		return nil
	}
	moved, err := j.s.Store.AdvanceGithubBuild(ctx, store.AdvanceGithubBuildParams{TaskGroupID: c.TaskGroupID,
		From: []string{github.StateSuccess, github.StateFailure, github.StateError}, State: github.StatePending, Now: j.s.Clock.Now()})
	if err != nil {
		return err
	}
	j.out.summary = fmt.Sprintf("reran task %s (check run %d); build back to pending: %v", c.TaskID, e.CheckRunID, moved)
	j.s.kick()
	return nil
}
