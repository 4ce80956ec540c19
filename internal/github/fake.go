package github

import (
	"encoding/json"
	"fmt"
)

// FakeEvent builds a plausible event of a tasks_for kind for rendering a
// `.taskcluster.yml` without a forge (renderTaskclusterYml, `hopper
// github render`); overrides replace the mocked event's top-level
// properties.
func FakeEvent(tasksFor, action, org, repo string, overrides map[string]any) (*Event, error) {
	const sha, before = "0123456789abcdef0123456789abcdef01234567", "fedcba9876543210fedcba9876543210fedcba98"
	user := map[string]any{"login": org, "id": json.Number("1"), "type": "User"}
	repository := map[string]any{"name": repo, "full_name": org + "/" + repo, "owner": map[string]any{"login": org, "name": org, "id": json.Number("1")},
		"html_url": "https://github.com/" + org + "/" + repo, "clone_url": "https://github.com/" + org + "/" + repo + ".git",
		"git_url": "git://github.com/" + org + "/" + repo + ".git", "ssh_url": "git@github.com:" + org + "/" + repo + ".git",
		"url": "https://api.github.com/repos/" + org + "/" + repo, "default_branch": "main", "private": false}
	pull := map[string]any{"number": json.Number("1"), "title": "A pull request", "state": "open", "user": user,
		"html_url": "https://github.com/" + org + "/" + repo + "/pull/1",
		"head":     map[string]any{"ref": "feature", "sha": sha, "label": org + ":feature", "user": user, "repo": repository},
		"base":     map[string]any{"ref": "main", "sha": before, "label": org + ":main", "user": user, "repo": repository}}
	body := map[string]any{"repository": repository, "sender": user}
	name := ""
	switch tasksFor {
	case TasksForPush:
		name = "push"
		body["ref"], body["before"], body["after"] = "refs/heads/main", before, sha
		body["pusher"] = map[string]any{"name": org, "email": org + "@users.noreply.github.com"}
		body["head_commit"] = map[string]any{"id": sha, "message": "A commit"}
		body["commits"] = []any{map[string]any{"id": sha, "message": "A commit"}}
	case TasksForPullRequest, TasksForPullRequestUntrusted:
		name = "pull_request"
		body["action"], body["number"], body["pull_request"] = action, json.Number("1"), pull
	case TasksForRelease:
		name = "release"
		body["action"] = action
		body["release"] = map[string]any{"tag_name": "v1.0.0", "name": "v1.0.0", "target_commitish": "main", "draft": false, "prerelease": false,
			"url": "https://api.github.com/repos/" + org + "/" + repo + "/releases/1", "tarball_url": "", "zipball_url": ""}
	case TasksForIssueComment:
		name = "issue_comment"
		body["action"] = action
		body["issue"] = map[string]any{"number": json.Number("1"), "state": "open", "pull_request": map[string]any{"url": pull["html_url"]}}
		body["comment"] = map[string]any{"id": json.Number("1"), "body": "/taskcluster run", "user": user}
	default:
		return nil, fmt.Errorf("unknown event type %q", tasksFor)
	}
	for k, v := range overrides {
		body[k] = v
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	dec, err := Classify(Delivery{Forge: KindGitHub, Host: "github.com", ID: "fake", Name: name, Body: raw})
	if err != nil {
		return nil, err
	}
	if dec.Event == nil {
		return nil, fmt.Errorf("the mocked event is skipped: %s", dec.Reply)
	}
	e := dec.Event
	if tasksFor == TasksForIssueComment {
		e.Body["pull_request"], e.Body["taskcluster_comment"] = pull, e.Command
		e.SHA = sha
	}
	if tasksFor == TasksForRelease {
		e.SHA = sha
	}
	return e, nil
}
