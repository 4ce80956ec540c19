package githubapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/hopper-ci/hopper/internal/forge"
	"github.com/hopper-ci/hopper/internal/github"
)

// defaultBranchConfig reads `.taskcluster.yml` on the repository's
// default branch, where the policies come from; nil when there is none
// or it cannot be used.
func (j *job) defaultBranchConfig(ctx context.Context) (*github.Config, error) {
	e := j.e
	branch, err := j.f.DefaultBranch(ctx, j.installation, e.Organization, e.Repository)
	if err != nil {
		return nil, fmt.Errorf("reading the default branch: %w", err)
	}
	text, found, err := j.f.GetFile(ctx, j.installation, e.Organization, e.Repository, ".taskcluster.yml", branch)
	if err != nil {
		return nil, fmt.Errorf("fetching .taskcluster.yml on %s: %w", branch, err)
	}
	if !found {
		return nil, nil
	}
	cfg, err := github.ParseConfig(j.s.Schemas, text)
	if err != nil {
		return nil, nil
	}
	return cfg, nil
}

// trusted reads a user's permission on the repository.
func (j *job) trusted(ctx context.Context, user string) (bool, error) {
	if user == "" {
		return false, nil
	}
	perm, err := j.f.Permission(ctx, j.installation, j.e.Organization, j.e.Repository, user)
	if err != nil {
		return false, fmt.Errorf("reading %s's permission: %w", user, err)
	}
	return github.Trusted(perm), nil
}

// unreadablePermission turns a permission the forge would not tell into
// an error on the commit (status and comment), in the log and on the
// delivery's record, so that nobody reads it as an untrusted user; other
// errors pass through.
func (j *job) unreadablePermission(err error) error {
	var pe *forge.PermissionError
	if !errors.As(err, &pe) {
		return err
	}
	j.s.Log.Warn("the forge would not tell a permission", "host", pe.Host, "repository", pe.Owner+"/"+pe.Repo, "user", pe.User, "error", pe.Err)
	return j.userError("Taskcluster could not read "+pe.User+"'s permission on this repository", pe)
}

// pullPolicy applies the default branch's pull-request policy: whether
// tasks run, and with which tasks_for.
func (j *job) pullPolicy(ctx context.Context) (bool, string, error) {
	e := j.e
	policy := github.PolicyCollaboratorsQuiet // no .taskcluster.yml on the default branch yet
	cfg, err := j.defaultBranchConfig(ctx)
	if err != nil {
		return false, "", err
	}
	if cfg != nil {
		policy = cfg.PullRequestPolicy()
	}
	openerTrusted, err := j.trusted(ctx, e.Opener)
	if err != nil {
		return false, "", j.unreadablePermission(err)
	}
	headTrusted := openerTrusted
	if e.HeadOwner != e.Opener {
		if headTrusted, err = j.trusted(ctx, e.HeadOwner); err != nil {
			return false, "", j.unreadablePermission(err)
		}
	}
	trusted := github.PullTrust(openerTrusted, headTrusted, e.HeadOwner != "" && e.HeadOwner == e.BaseOwner)
	d := github.DecidePull(policy, trusted, e.Action)
	if !d.Run {
		j.out.summary = fmt.Sprintf("pull request not trusted under policy %s: no tasks", policy)
		if d.Comment {
			j.comment("No Taskcluster jobs started for this pull request",
				"The `policy.pullRequests` setting of this repository (in `.taskcluster.yml` on the default branch) does not allow starting tasks for this pull request.")
		}
	}
	return d.Run, d.TasksFor, nil
}

// commentPolicy applies `policy.allowComments`: the default branch must
// allow comments and the commenter must be trusted.
func (j *job) commentPolicy(ctx context.Context) (bool, error) {
	e := j.e
	cfg, err := j.defaultBranchConfig(ctx)
	if err != nil {
		return false, err
	}
	if cfg == nil {
		j.out.summary = "no usable .taskcluster.yml on the default branch: comments start nothing"
		return false, nil
	}
	if cfg.AllowComments() == "" {
		j.out.summary = "the default branch does not allow comments to start tasks"
		j.comment("No Taskcluster jobs started for comment",
			"The `policy.allowComments` setting of this repository (in `.taskcluster.yml` on the default branch) does not allow starting tasks from comments.")
		j.react("confused")
		return false, nil
	}
	ok, err := j.trusted(ctx, e.Commenter)
	if err != nil {
		return false, j.unreadablePermission(err)
	}
	if !ok {
		j.out.summary = e.Commenter + " may not start tasks with comments"
		j.comment("No Taskcluster jobs started for this pull request",
			fmt.Sprintf("Cannot create tasks from comments. User %q is not a collaborator.", e.Commenter))
		j.react("eyes")
		return false, nil
	}
	j.react("+1")
	return true, nil
}
