package githubapi

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/github"
	"github.com/hopper-ci/hopper/internal/store"
)

// IdentityStore is where the service records what it vouches for about
// the tasks it creates: their identity tokens' forge claims
// (store.IdentityStore, docs/identity.md).
type IdentityStore interface {
	PutTaskIdentity(ctx context.Context, id *store.TaskIdentity) error
	DeleteTaskIdentity(ctx context.Context, taskID string) error
}

// taskIdentityLifetime bounds a record when the task's definition names
// no expiry the service can read (the queue's default is a year).
const taskIdentityLifetime = 366 * 24 * time.Hour

// forgeClaims are the claims of the event's tasks. The subject is the
// role their scopes came from (the first assume:repo:… scope the render
// gave them), so a fork's pull request, rendered with the
// pull-request-untrusted role, can never carry a branch's subject.
func forgeClaims(e *github.Event, scopes []string) *auth.ForgeClaims {
	f := &auth.ForgeClaims{Host: e.Host, Repository: e.Organization + "/" + e.Repository, SHA: e.SHA, Event: e.Type, PullRequest: e.PullNumber}
	prefix := "assume:" + e.Role() + ":"
	for _, s := range scopes {
		if strings.HasPrefix(s, prefix) {
			f.Role = strings.TrimPrefix(s, "assume:")
			break
		}
	}
	if f.Role == "" {
		// No role of the repository: the subject names nothing a policy
		// could mistake for a branch.
		f.Role = e.Role() + ":unknown"
	}
	f.Untrusted = strings.HasSuffix(f.Role, ":pull-request-untrusted")
	switch {
	case e.PullNumber != 0:
		f.Ref = "refs/pull/" + strconv.Itoa(e.PullNumber) + "/head"
	case e.Tag != "":
		f.Ref = "refs/tags/" + e.Tag
	case e.Branch != "":
		f.Ref = "refs/heads/" + e.Branch
	}
	return f
}

// recordIdentity records the forge claims of a task before it is
// created, so its run can never ask for a token before the record exists.
func (j *job) recordIdentity(ctx context.Context, taskID string, def map[string]any, claims string) error {
	if j.s.Identities == nil {
		return nil
	}
	expires := j.s.Clock.Now().Add(taskIdentityLifetime)
	if s, ok := def["expires"].(string); ok {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			expires = t
		}
	}
	if err := j.s.Identities.PutTaskIdentity(ctx, &store.TaskIdentity{TaskID: taskID, Claims: claims, Expires: expires}); err != nil {
		return fmt.Errorf("recording the identity of task %s: %w", taskID, err)
	}
	return nil
}
