package githubapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/forge"
	"github.com/hopper-ci/hopper/internal/github"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

func inputError(format string, args ...any) error {
	return &api.Error{Code: api.CodeInputError, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &api.Error{Code: api.CodeResourceNotFound, Message: fmt.Sprintf(format, args...)}
}

// forgeFor picks the forge a route without a host addresses: github.com
// when configured, else the only forge.
func (s *Service) forgeFor() (*forge.Forge, error) {
	if f, ok := s.Forges["github.com"]; ok {
		return f, nil
	}
	if len(s.Forges) == 1 {
		for _, f := range s.Forges {
			return f, nil
		}
	}
	return nil, notFound("no forge is configured for this method (github.com, or a single forge)")
}

// installation returns the installation a call about owner/repo is made
// for (0 on token forges); a 404 when the GitHub App is not installed.
func (s *Service) installation(c *api.Call, f *forge.Forge, owner, repo string) (int64, error) {
	if f.Kind != forge.KindGitHub || f.AppID == 0 {
		return 0, nil
	}
	id, err := s.Store.GetGithubInstallation(c.Context(), f.Host, owner)
	if err != nil {
		return 0, err
	}
	if id == 0 {
		if id, err = f.RepositoryInstallation(c.Context(), owner, repo); err != nil {
			return 0, err
		}
	}
	if id == 0 {
		return 0, notFound("The GitHub App is not installed for %s/%s", owner, repo)
	}
	return id, nil
}

// buildJSON is a build as the builds method lists it: Taskcluster's
// fields, and hopper's host and forgeUrl (the commit on the forge, for
// the console).
func (s *Service) buildJSON(b store.GithubBuild) map[string]any {
	out := map[string]any{"organization": b.Organization, "repository": b.Repository, "sha": b.SHA, "state": b.State,
		"taskGroupId": b.TaskGroupID, "eventType": b.EventType, "eventId": b.EventID,
		"created": queue.NewTime(b.Created).String(), "updated": queue.NewTime(b.Updated).String(), "host": b.Host}
	if b.PullRequestNumber != 0 {
		out["pullRequestNumber"] = b.PullRequestNumber
	}
	if f := s.Forges[b.Host]; f != nil {
		out["forgeUrl"] = f.WebURL() + "/" + b.Organization + "/" + b.Repository + "/commit/" + b.SHA
	}
	return out
}

func (s *Service) builds(c *api.Call) (any, error) {
	q := c.R.URL.Query()
	f := store.GithubBuildFilter{Organization: q.Get("organization"), Repository: q.Get("repository"), SHA: q.Get("sha")}
	switch {
	case f.Repository != "" && f.Organization == "":
		return nil, inputError("Must provide `organization` if querying `repository`")
	case f.SHA != "" && f.Repository == "":
		return nil, inputError("Must provide `repository` if querying `sha`")
	case q.Get("pullRequest") != "" && f.Repository == "":
		return nil, inputError("Must provide `repository` if querying `pullRequest`")
	}
	if pr := q.Get("pullRequest"); pr != "" {
		n, err := strconv.Atoi(pr)
		if err != nil || n < 0 {
			return nil, inputError("pullRequest must be a number")
		}
		f.PullRequestNumber = n
	}
	builds, next, err := s.Store.ListGithubBuilds(c.Context(), f, c.Page())
	if errors.Is(err, store.ErrBadContinuationToken) {
		return nil, inputError("invalid continuationToken")
	}
	if err != nil {
		return nil, err
	}
	out := map[string]any{"builds": []any{}}
	list := make([]any, 0, len(builds))
	for _, b := range builds {
		list = append(list, s.buildJSON(b))
	}
	out["builds"] = list
	if next != "" {
		out["continuationToken"] = next
	}
	return out, nil
}

// cancelBuilds seals and cancels the task groups of a repository's
// pending builds (of a commit or a pull request), with the repository's
// own role, and marks them cancelled.
func (s *Service) cancelBuilds(c *api.Call) (any, error) {
	owner, repo := c.Params["owner"], c.Params["repo"]
	q := c.R.URL.Query()
	f := store.GithubBuildFilter{Organization: owner, Repository: repo, SHA: q.Get("sha"), State: github.StatePending}
	if pr := q.Get("pullRequest"); pr != "" {
		// A pull request's number is an integer column: a larger one
		// names none, and PostgreSQL refuses it (a 500).
		n, err := strconv.ParseInt(pr, 10, 32)
		if err != nil || n < 1 {
			return nil, inputError("pullRequest must be a number from 1 to 2147483647")
		}
		f.PullRequestNumber = int(n)
	}
	builds, _, err := s.Store.ListGithubBuilds(c.Context(), f, store.Page{Limit: 1000})
	if err != nil {
		return nil, err
	}
	if len(builds) == 0 {
		return nil, notFound("No cancellable builds found for %s/%s", owner, repo)
	}
	out := []any{}
	for _, b := range builds {
		if err := s.cancelBuild(c.Context(), &b, c.Now); err != nil {
			return nil, err
		}
		b.State = github.StateCancelled
		out = append(out, s.buildJSON(b))
	}
	return map[string]any{"builds": out}, nil
}

// cancelBuild cancels one build's group and marks it cancelled.
func (s *Service) cancelBuild(ctx context.Context, b *store.GithubBuild, now time.Time) error {
	if err := s.cancelGroup(ctx, b, now); err != nil {
		return err
	}
	var status *store.GithubOutboxEntry
	if f := s.Forges[b.Host]; f != nil {
		e := s.statusEntry(f, b.Organization, b.Repository, b.SHA, b.TaskGroupID, b.EventType, github.StateCancelled, b.InstallationID)
		status = &e
	}
	if _, err := s.Store.AdvanceGithubBuild(ctx, store.AdvanceGithubBuildParams{TaskGroupID: b.TaskGroupID,
		From:  []string{github.StatePending, github.StateSuccess, github.StateFailure},
		State: github.StateCancelled, Now: now, Status: status}); err != nil {
		return err
	}
	s.kick()
	return nil
}

// cancelGroup seals and cancels a build's task group, with the scopes
// Taskcluster uses: the repository's role, and sealing and cancelling
// the service's own groups.
func (s *Service) cancelGroup(ctx context.Context, b *store.GithubBuild, now time.Time) error {
	expander, err := s.Roles.Expander(ctx)
	if err != nil {
		return err
	}
	role := "assume:repo:" + b.Host + "/" + b.Organization + "/" + b.Repository + ":*"
	scopes := expander.Expand([]string{role, "queue:seal-task-group:" + github.SchedulerID + "/*", "queue:cancel-task-group:" + github.SchedulerID + "/*"})
	g, err := s.Store.GetTaskGroup(ctx, b.TaskGroupID)
	if err == nil {
		for _, need := range []string{"queue:seal-task-group:" + g.SchedulerID + "/" + b.TaskGroupID, "queue:cancel-task-group:" + g.SchedulerID + "/" + b.TaskGroupID} {
			if !satisfies(scopes, need) {
				return &api.Error{Code: api.CodeInsufficientScopes, Message: "the repository's role cannot " + need}
			}
		}
		if _, err := s.Store.SealTaskGroup(ctx, b.TaskGroupID, now); err != nil {
			return err
		}
		res, err := s.Store.CancelTaskGroup(ctx, b.TaskGroupID, now)
		if err != nil {
			return err
		}
		if s.Changes != nil {
			s.Changes.Publish(ctx, res.Changes)
		}
		if s.usesChecks(b) {
			// A cancelled build is no longer looked at by the reporter:
			// its check runs are completed (cancelled) now.
			tasks, err := s.listGroup(ctx, b.TaskGroupID)
			if err != nil {
				return err
			}
			if err := s.updateChecks(ctx, b, tasks); err != nil {
				return err
			}
			s.kick()
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// satisfies reports whether a scope set grants one scope (with
// Taskcluster's trailing-star rule).
func satisfies(have []string, need string) bool {
	for _, h := range have {
		if h == need || strings.HasSuffix(h, "*") && strings.HasPrefix(need, strings.TrimSuffix(h, "*")) {
			return true
		}
	}
	return false
}

func (s *Service) repository(c *api.Call) (any, error) {
	f, err := s.forgeFor()
	if err != nil {
		return nil, err
	}
	owner, repo := c.Params["owner"], c.Params["repo"]
	if f.Kind == forge.KindGitHub && f.AppID != 0 {
		id, err := f.RepositoryInstallation(c.Context(), owner, repo)
		if err != nil {
			return nil, err
		}
		return map[string]any{"installed": id != 0}, nil
	}
	_, err = f.Repository(c.Context(), 0, owner, repo)
	if forge.IsStatus(err, http.StatusNotFound) {
		return map[string]any{"installed": false}, nil
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"installed": true}, nil
}

// forwardToForge makes a proxied call (createStatus, createComment) and
// turns the forge's refusals into Taskcluster's errors.
func forwardError(err error) error {
	var fe *forge.Error
	if errors.As(err, &fe) {
		switch {
		case fe.Status == http.StatusForbidden:
			return &api.Error{Code: "ForbiddenByGithub", Message: "The forge refused: " + fe.Message}
		case fe.Status == http.StatusNotFound:
			return notFound("The forge answered 404: %s", fe.Message)
		case fe.Status >= 400 && fe.Status < 500:
			return inputError("The forge refused: %s", fe.Message)
		}
	}
	return err
}

func (s *Service) createStatus(c *api.Call) (any, error) {
	f, err := s.forgeFor()
	if err != nil {
		return nil, err
	}
	owner, repo := c.Params["owner"], c.Params["repo"]
	var body map[string]any
	if err := c.Decode(&body); err != nil {
		return nil, err
	}
	if _, ok := body["context"]; !ok {
		body["context"] = "default"
	}
	inst, err := s.installation(c, f, owner, repo)
	if err != nil {
		return nil, err
	}
	raw, _ := json.Marshal(body)
	if err := f.CreateStatus(c.Context(), inst, owner, repo, c.Params["sha"], raw); err != nil {
		return nil, forwardError(err)
	}
	return &api.Response{Status: http.StatusNoContent}, nil
}

func (s *Service) createComment(c *api.Call) (any, error) {
	f, err := s.forgeFor()
	if err != nil {
		return nil, err
	}
	owner, repo := c.Params["owner"], c.Params["repo"]
	n, err := strconv.Atoi(c.Params["number"])
	if err != nil || n <= 0 {
		return nil, inputError("number must be a positive integer")
	}
	inst, err := s.installation(c, f, owner, repo)
	if err != nil {
		return nil, err
	}
	if err := f.CreateComment(c.Context(), inst, owner, repo, n, c.Input); err != nil {
		return nil, forwardError(err)
	}
	return &api.Response{Status: http.StatusNoContent}, nil
}

// ourReports returns what this service reported on a branch's head: its
// statuses, newest (highest id) first, and (for a GitHub App) its check
// runs, oldest first.
func (s *Service) ourReports(c *api.Call) (statuses, checks []map[string]any, err error) {
	f, err := s.forgeFor()
	if err != nil {
		return nil, nil, err
	}
	owner, repo, branch := c.Params["owner"], c.Params["repo"], c.Params["branch"]
	inst, err := s.installation(c, f, owner, repo)
	if err != nil {
		return nil, nil, err
	}
	all, err := f.Statuses(c.Context(), inst, owner, repo, branch)
	if err != nil {
		return nil, nil, err
	}
	for _, st := range all {
		if ctx, _ := st["context"].(string); strings.HasPrefix(ctx, f.Name()+" (") {
			statuses = append(statuses, st)
		}
	}
	sort.SliceStable(statuses, func(i, j int) bool { return idOf(statuses[i]) > idOf(statuses[j]) })
	checks, err = f.CheckRuns(c.Context(), inst, owner, repo, branch)
	if err != nil {
		return nil, nil, err
	}
	sort.SliceStable(checks, func(i, j int) bool { return idOf(checks[i]) < idOf(checks[j]) })
	return statuses, checks, nil
}

func idOf(m map[string]any) float64 {
	f, _ := m["id"].(float64)
	return f
}

// latest redirects to the newest status's page, or (a build reporting
// with check runs) to its first check run's, as Taskcluster does.
func (s *Service) latest(c *api.Call) (any, error) {
	statuses, checks, err := s.ourReports(c)
	if err != nil {
		return nil, forwardError(err)
	}
	for _, st := range statuses {
		if u, _ := st["target_url"].(string); u != "" {
			return &api.Response{Status: http.StatusSeeOther, Header: http.Header{"Location": {u}}}, nil
		}
	}
	for _, ch := range checks {
		if u, _ := ch["html_url"].(string); u != "" {
			return &api.Response{Status: http.StatusSeeOther, Header: http.Header{"Location": {u}}}, nil
		}
	}
	return nil, notFound("No status of this service on %s/%s %s", c.Params["owner"], c.Params["repo"], c.Params["branch"])
}

func (s *Service) badge(c *api.Call) (any, error) {
	state := "newrepo"
	statuses, checks, err := s.ourReports(c)
	var fe *forge.Error
	switch {
	case errors.As(err, &fe) && fe.Status >= 400 && fe.Status < 500:
		state = "error"
	case err != nil:
		var ae *api.Error
		if !errors.As(err, &ae) {
			return nil, err
		}
	default:
		state = badgeState(statuses, checks)
	}
	return &api.Response{Status: http.StatusOK, Header: http.Header{"Content-Type": {"image/svg+xml"}, "X-Taskcluster-Status": {state}},
		RawBody: []byte(badgeSVG(state))}, nil
}

// badgeState combines a branch's reports: the newest status of each
// context and every check run; any failure wins, then anything not done
// (a pending status, a check run in progress or with a soft conclusion),
// else success; nothing reported is "newrepo".
func badgeState(statuses, checks []map[string]any) string {
	if len(statuses) == 0 && len(checks) == 0 {
		return "newrepo"
	}
	state := "success"
	worse := func(s string) {
		if s == "failure" || state == "success" {
			state = s
		}
	}
	seen := map[string]bool{}
	for _, st := range statuses {
		ctx, _ := st["context"].(string)
		if seen[ctx] {
			continue
		}
		seen[ctx] = true
		switch firstOf(st, "state", "status") {
		case "failure", "error":
			worse("failure")
		case "pending":
			worse("pending")
		}
	}
	for _, ch := range checks {
		switch conclusion, _ := ch["conclusion"].(string); conclusion {
		case "success":
		case "failure":
			worse("failure")
		default: // queued or in progress, or timed_out, cancelled, neutral, action_required…
			worse("pending")
		}
	}
	return state
}

// firstOf reads the first key present (Gitea says `status` where GitHub
// says `state`).
func firstOf(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if v, ok := m[k].(string); ok && v != "" {
			return v
		}
	}
	return ""
}

var badgeColours = map[string]string{"success": "#4c1", "failure": "#e05d44", "pending": "#dfb317", "error": "#9f9f9f", "newrepo": "#9f9f9f"}

func badgeSVG(state string) string {
	label := map[string]string{"success": "passing", "failure": "failing", "pending": "pending", "error": "error", "newrepo": "no builds"}[state]
	return `<svg xmlns="http://www.w3.org/2000/svg" width="150" height="20" role="img" aria-label="taskcluster: ` + label + `">` +
		`<rect width="80" height="20" fill="#555"/><rect x="80" width="70" height="20" fill="` + badgeColours[state] + `"/>` +
		`<g fill="#fff" font-family="Verdana,sans-serif" font-size="11"><text x="6" y="14">taskcluster</text><text x="86" y="14">` + label + `</text></g></svg>`
}
