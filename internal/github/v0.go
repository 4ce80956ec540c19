package github

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/hopper-ci/hopper/internal/jsone"
)

// Version 0 of `.taskcluster.yml` (deprecated, still honoured): strings
// carry `{{ parameter }}` substitutions from a flat table of the event's
// details, and each task says in extra.github which events (and
// branches) it runs for.

// v0Param matches one `{{ … }}` substitution.
var v0Param = regexp.MustCompile(`\{\{\s*(.*?)\s*\}\}`)

// v0Details is the flat parameter table of an event, as Taskcluster's
// github service builds it for each kind of event.
func v0Details(e *Event) map[string]any {
	b := e.Body
	d := map[string]any{"event.type": e.Type}
	switch e.Kind {
	case KindPush:
		ref := str(b, "ref")
		d["event.base.ref"], d["event.head.ref"] = ref, ref
		d["event.base.repo.name"], d["event.head.repo.name"] = str(b, "repository", "name"), str(b, "repository", "name")
		d["event.base.repo.url"], d["event.head.repo.url"] = str(b, "repository", "clone_url"), str(b, "repository", "clone_url")
		d["event.base.sha"], d["event.head.sha"] = str(b, "before"), str(b, "after")
		d["event.base.user.login"], d["event.head.user.login"] = str(b, "sender", "login"), str(b, "sender", "login")
		d["event.head.user.id"] = lookup(b, "sender", "id")
		if e.Type == "tag" {
			d["event.head.tag"] = e.Tag
		} else {
			d["event.base.repo.branch"], d["event.head.repo.branch"] = e.Branch, e.Branch
		}
	case KindPullRequest:
		for _, side := range []string{"base", "head"} {
			ref := str(b, "pull_request", side, "ref")
			d["event."+side+".ref"] = "refs/heads/" + ref
			d["event."+side+".repo.branch"] = ref
			d["event."+side+".repo.name"] = str(b, "pull_request", side, "repo", "name")
			d["event."+side+".repo.url"] = str(b, "pull_request", side, "repo", "clone_url")
			d["event."+side+".sha"] = str(b, "pull_request", side, "sha")
		}
		d["event.base.user.login"] = str(b, "pull_request", "base", "user", "login")
		d["event.head.user.login"] = str(b, "sender", "login")
		d["event.head.user.id"] = lookup(b, "sender", "id")
		d["event.pullNumber"] = lookup(b, "number")
		d["event.title"] = str(b, "pull_request", "title")
	case KindRelease:
		d["event.base.repo.branch"] = str(b, "release", "target_commitish")
		d["event.head.user.login"] = str(b, "sender", "login")
		d["event.head.user.id"] = lookup(b, "sender", "id")
		d["event.version"] = str(b, "release", "tag_name")
		d["event.name"] = str(b, "release", "name")
		d["event.head.repo.name"] = str(b, "repository", "name")
		d["event.head.repo.url"] = str(b, "repository", "clone_url")
		d["event.release.url"] = str(b, "release", "url")
		d["event.prerelease"] = lookup(b, "release", "prerelease")
		d["event.draft"] = lookup(b, "release", "draft")
		d["event.tar"] = str(b, "release", "tarball_url")
		d["event.zip"] = str(b, "release", "zipball_url")
	}
	if e.SHA != "" {
		d["event.head.sha"] = e.SHA
	}
	d["event.head.user.email"] = str(b, "pusher", "email")
	return d
}

func renderV0(body map[string]any, p RenderParams) (*Rendered, error) {
	e := p.Event
	params := v0Details(e)
	params["organization"], params["repository"] = e.Organization, e.Repository
	params["timestamp"] = p.Now.UnixMilli()
	params["taskcluster.docker.provisionerId"], params["taskcluster.docker.workerType"] = "unknown", "unknown"
	subst, err := v0Substitute(body, params, p)
	if err != nil {
		return nil, err
	}
	cfg := subst.(map[string]any)
	tasks, _ := cfg["tasks"].([]any)
	eventType := e.Type
	branch := stringOf(params["event.base.repo.branch"])
	var defs []map[string]any
	for i, t := range tasks {
		task, ok := t.(map[string]any)
		if !ok {
			return nil, configErrorf("render", "tasks[%d] of .taskcluster.yml must be an object", i)
		}
		gh, _ := lookup(task, "extra", "github").(map[string]any)
		if gh == nil {
			continue
		}
		include, exclude := strings1(gh["branches"]), strings1(gh["excludeBranches"])
		if include != nil && exclude != nil {
			return nil, configErrorf("render", "Cannot specify both `branches` and `excludeBranches` in the same task!")
		}
		match := false
		for _, ev := range strings1(gh["events"]) {
			if !strings.HasPrefix(eventType, strings.TrimRight(ev, "*")) {
				continue
			}
			switch {
			case eventType != "push":
				match = true
			case include != nil:
				match = contains(include, branch)
			case exclude != nil:
				match = !contains(exclude, branch)
			default:
				match = true
			}
			if match {
				break
			}
		}
		if match {
			defs = append(defs, task)
		}
	}
	out := &Rendered{Route: RouteStatus, AutoCancel: true}
	if len(defs) > 0 {
		groupID := p.ID("task:0")
		for i, task := range defs {
			id := p.ID(fmt.Sprintf("task:%d", i))
			routes, _ := task["routes"].([]any)
			if !contains(routes, any(RouteStatus)) {
				routes = append(routes, RouteStatus)
			}
			task["routes"] = routes
			task["taskGroupId"], task["schedulerId"] = groupID, SchedulerID
			if lookup(task, "extra", "github", "env") == true {
				env, _ := lookup(task, "payload", "env").(map[string]any)
				if env == nil {
					env = map[string]any{}
					object(task, "payload")["env"] = env
				}
				for k, v := range v0Env(params) {
					env[k] = v
				}
			}
			out.Tasks = append(out.Tasks, Task{TaskID: id, Definition: task})
		}
	}
	scopes := []string{}
	role := "assume:" + e.Role()
	switch {
	case p.TasksFor == TasksForPullRequest:
		scopes = append(scopes, role+":pull-request")
	case p.TasksFor == TasksForPullRequestUntrusted:
		scopes = append(scopes, role+":pull-request-untrusted")
	case eventType == "push":
		scopes = append(scopes, role+":branch:"+branch)
	case eventType == "release":
		scopes = append(scopes, role+":release:published")
	case eventType == "tag":
		scopes = append(scopes, role+":tag:"+e.Tag)
	}
	out.Scopes = append(scopes, "queue:route:"+RouteStatus, "queue:scheduler-id:"+SchedulerID)
	return out, nil
}

// v0Env are the GITHUB_* variables a v0 task with extra.github.env gets.
func v0Env(d map[string]any) map[string]any {
	names := map[string]string{
		"GITHUB_EVENT": "event.type", "GITHUB_BRANCH": "event.base.repo.branch", "GITHUB_PULL_REQUEST": "event.pullNumber",
		"GITHUB_PULL_TITLE": "event.title", "GITHUB_BASE_REPO_NAME": "event.base.repo.name", "GITHUB_BASE_REPO_URL": "event.base.repo.url",
		"GITHUB_BASE_USER": "event.base.user.login", "GITHUB_BASE_SHA": "event.base.sha", "GITHUB_BASE_BRANCH": "event.base.repo.branch",
		"GITHUB_BASE_REF": "event.base.ref", "GITHUB_HEAD_REPO_NAME": "event.head.repo.name", "GITHUB_HEAD_REPO_URL": "event.head.repo.url",
		"GITHUB_HEAD_USER": "event.head.user.login", "GITHUB_HEAD_SHA": "event.head.sha", "GITHUB_HEAD_BRANCH": "event.head.repo.branch",
		"GITHUB_HEAD_TAG": "event.head.tag", "GITHUB_HEAD_REF": "event.head.ref", "GITHUB_HEAD_USER_EMAIL": "event.head.user.email",
	}
	env := map[string]any{}
	for k, key := range names {
		if v, ok := d[key]; ok && v != nil && v != "" {
			env[k] = fmt.Sprint(v)
		}
	}
	return env
}

// v0Substitute replaces `{{ name }}` in every string: a string that is
// one substitution takes the parameter's value as it is, otherwise its
// text. `{{ $fromNow }}` and `{{ '<offset>' | $fromNow }}` give times.
func v0Substitute(v any, params map[string]any, p RenderParams) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			s, err := v0Substitute(e, params, p)
			if err != nil {
				return nil, err
			}
			x[k] = s
		}
		return x, nil
	case []any:
		for i, e := range x {
			s, err := v0Substitute(e, params, p)
			if err != nil {
				return nil, err
			}
			x[i] = s
		}
		return x, nil
	case string:
		if m := v0Param.FindStringSubmatch(x); m != nil && m[0] == x {
			return v0Value(m[1], params, p)
		}
		var ferr error
		out := v0Param.ReplaceAllStringFunc(x, func(s string) string {
			val, err := v0Value(v0Param.FindStringSubmatch(s)[1], params, p)
			if err != nil {
				ferr = err
			}
			if val == nil {
				return ""
			}
			return fmt.Sprint(val)
		})
		return out, ferr
	}
	return v, nil
}

func v0Value(expr string, params map[string]any, p RenderParams) (any, error) {
	if expr == "$fromNow" {
		return jsone.DateJSON(p.Now), nil
	}
	if arg, fn, ok := strings.Cut(expr, "|"); ok && strings.TrimSpace(fn) == "$fromNow" {
		offset := strings.Trim(strings.TrimSpace(arg), `'"`)
		t, err := jsone.RenderAt(map[string]any{"$fromNow": offset}, nil, p.Now)
		if err != nil {
			return nil, configErrorf("render", "%v", err)
		}
		return t, nil
	}
	return params[expr], nil
}

func strings1(v any) []string {
	xs, ok := v.([]any)
	if !ok {
		return nil
	}
	out := []string{}
	for _, x := range xs {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func contains[T comparable](xs []T, x T) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
