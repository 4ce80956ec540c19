package github

import "strings"

// giteaActions maps Gitea's pull-request and release action names onto
// GitHub's, so templates filtering on GitHub's names see Gitea's events
// (Gitea says "synchronized" where GitHub says "synchronize": without
// this, new pushes to a pull request would silently run nothing).
var giteaActions = map[string]string{
	"synchronized":  "synchronize",
	"label_updated": "labeled",
	"label_cleared": "unlabeled",
	"updated":       "edited",
}

// normaliseGitea rewrites a Gitea or Forgejo delivery's body in place
// into GitHub's shape, adding what GitHub sends and Gitea does not (and
// templates read): pusher.name, repository.owner.name, git_url, the head
// and base owners of a pull request, an owner-qualified head label. The
// fields Gitea sends are kept; event.forge says which forge and action
// the delivery really had.
func normaliseGitea(name, host string, body map[string]any) {
	forge := map[string]any{"kind": KindGitea, "host": host, "event": name}
	if a, ok := body["action"].(string); ok {
		forge["action"] = a
		if gh, ok := giteaActions[a]; ok {
			body["action"] = gh
		}
	}
	body["forge"] = forge
	if repo, ok := body["repository"].(map[string]any); ok {
		normaliseRepo(repo)
	}
	switch name {
	case "push":
		if pusher, ok := body["pusher"].(map[string]any); ok {
			if _, has := pusher["name"]; !has {
				pusher["name"] = firstString(pusher, "login", "username")
			}
		}
		if _, has := body["compare"]; !has {
			body["compare"] = body["compare_url"]
		}
		before, after := str(body, "before"), str(body, "after")
		setDefault(body, "created", isZeroSHA(before))
		setDefault(body, "deleted", isZeroSHA(after))
		setDefault(body, "forced", false)
		if ref := str(body, "ref"); strings.HasPrefix(ref, "refs/heads/") {
			setDefault(body, "base_ref", nil)
		}
	case "pull_request", "issue_comment":
		if pr, ok := body["pull_request"].(map[string]any); ok {
			normalisePull(pr)
			setDefault(body, "number", pr["number"])
		}
	}
}

// normaliseRepo adds GitHub's repository fields a Gitea repository lacks.
func normaliseRepo(repo map[string]any) {
	if owner, ok := repo["owner"].(map[string]any); ok {
		if _, has := owner["name"]; !has {
			owner["name"] = firstString(owner, "login", "username")
		}
	}
	if clone, ok := repo["clone_url"].(string); ok {
		setDefault(repo, "git_url", clone)
		setDefault(repo, "svn_url", repo["html_url"])
	}
	setDefault(repo, "url", repo["html_url"])
}

// normalisePull gives a Gitea pull request's head and base the owner
// (`user`) GitHub puts there, and GitHub's `owner:branch` head label.
func normalisePull(pr map[string]any) {
	for _, side := range []string{"head", "base"} {
		s, ok := pr[side].(map[string]any)
		if !ok {
			continue
		}
		repo, _ := s["repo"].(map[string]any)
		if repo != nil {
			normaliseRepo(repo)
		}
		if _, has := s["user"]; !has && repo != nil {
			if owner, ok := repo["owner"].(map[string]any); ok {
				s["user"] = owner
			}
		}
		login := str(s, "user", "login")
		if label, _ := s["label"].(string); login != "" && !strings.Contains(label, ":") {
			s["label"] = login + ":" + str(s, "ref")
		}
	}
}

func setDefault(m map[string]any, key string, v any) {
	if _, has := m[key]; !has {
		m[key] = v
	}
}

func firstString(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := m[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// NormaliseGiteaPull rewrites a pull request from Gitea's or Forgejo's
// API (as a comment's processing fetches it) into GitHub's shape.
func NormaliseGiteaPull(pr map[string]any) { normalisePull(pr) }
