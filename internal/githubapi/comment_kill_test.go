package githubapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/forge"
	"github.com/hopper-ci/hopper/internal/store"
)

// killedBeforeRecord is a replica's store whose process dies right after
// the forge took what it sent: the outbox message's outcome is never
// recorded, and its lease runs out.
type killedBeforeRecord struct {
	store.Store
}

func (killedBeforeRecord) FinishOutbox(context.Context, *store.OutboxMessage, store.OutboxOutcome) (bool, error) {
	return true, nil
}

// commentTargets are the places a comment goes: a pull request and a
// commit on GitHub (whose listings are paged), a pull request on Gitea
// (whose listing comes in one answer; the local GitHub stands in for it,
// so fewer comments than its default page).
var commentTargets = []struct {
	name, host, owner, repo, target string
	gitea                           bool
	others                          int
}{
	{name: "github pull request", host: "github.com", owner: "Codertocat", repo: "Hello-World", target: "2", others: 150},
	{name: "github commit", host: "github.com", owner: "Codertocat", repo: "Hello-World", target: "sha:0123456789abcdef0123456789abcdef01234567", others: 150},
	{name: "gitea pull request", host: "127.0.0.1:3000", owner: "alice", repo: "demo", target: "3", gitea: true, others: 5},
}

// commentPath is where the comments of a target are.
func commentPath(owner, repo, target string) string {
	if sha, ok := strings.CutPrefix(target, "sha:"); ok {
		return "/repos/" + owner + "/" + repo + "/commits/" + sha + "/comments"
	}
	return "/repos/" + owner + "/" + repo + "/issues/" + target + "/comments"
}

// TestSenderKilledAfterPostingComment: a replica's sender posted a
// comment and was killed before recording it. When the message's lease
// runs out another replica's sender claims it, looks for the comment's
// hidden marker among the target's comments (a failed look is tried
// again later, not taken for "none"), finds it past other people's
// comments, and does not post it again: one comment, on both drivers,
// for each kind of target.
func TestSenderKilledAfterPostingComment(t *testing.T) {
	t.Parallel()
	for _, driver := range apitest.Drivers() {
		for _, tc := range commentTargets {
			t.Run(driver+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				db, _ := apitest.OpenStore(t, driver)
				b := setupOn(t, db)
				b.gh.Now = b.clock.Now
				installation := int64(1)
				if tc.gitea {
					installation = 9
					b.svc.Forges[tc.host] = &forge.Forge{Host: tc.host, Kind: forge.KindGitea, APIURL: b.gh.Server.URL, Token: b.gh.IssueToken(installation)}
				}
				b.gh.Install(tc.owner, tc.repo, installation)
				ctx := context.Background()
				queued := b.clock.Now()
				key := "comment:" + strings.Repeat("ab", 32)
				require.NoError(t, b.store.QueueGithubOutbox(ctx, []store.GithubOutboxEntry{{Host: tc.host, Key: key, Kind: "comment",
					Owner: tc.owner, Repo: tc.repo, Target: tc.target, InstallationID: installation, Body: []byte(`{"body":"Taskcluster could not start"}`)}}, queued))
				b.clock.Advance(time.Minute)
				for i := range tc.others {
					b.gh.AddComment(tc.owner, tc.repo, tc.target, fmt.Sprintf("someone's comment %d", i))
				}

				killed := *b.svc
				killed.Store = killedBeforeRecord{b.store}
				n, err := killed.SendDue(ctx)
				require.NoError(t, err)
				require.Equal(t, 1, n)
				path := commentPath(tc.owner, tc.repo, tc.target)
				posted := b.gh.Calls(path)
				require.Len(t, posted, 1, "posted, not recorded")
				require.Equal(t, http.MethodPost, posted[0].Method)
				text := posted[0].Body["body"].(string)
				require.True(t, strings.HasPrefix(text, "Taskcluster could not start\n\n"), text)
				require.True(t, strings.HasSuffix(text, "<!-- hopper:"+key+" -->"), text)
				require.Empty(t, b.gh.Reads(path), "a first attempt posts without looking")

				b.clock.Advance(time.Second)
				n, err = b.svc.SendDue(ctx)
				require.NoError(t, err)
				require.Zero(t, n, "held by the killed replica")

				// The lease runs out; the next sender's look fails.
				b.clock.Advance(30 * time.Second)
				b.gh.FailReads(1)
				n, err = b.svc.SendDue(ctx)
				require.NoError(t, err)
				require.Zero(t, n)
				e, err := b.store.GetGithubOutbox(ctx, tc.host, key)
				require.NoError(t, err)
				require.Equal(t, "pending", e.State)
				require.Equal(t, 2, e.Attempts)
				require.Contains(t, e.LastError, "looking for an earlier attempt's comment")
				require.Len(t, b.gh.Calls(path), 1, "not posted when the look failed")

				// Its retry finds the comment and records it as sent.
				b.clock.Advance(time.Minute)
				n, err = b.svc.SendDue(ctx)
				require.NoError(t, err)
				require.Equal(t, 1, n)
				require.Len(t, b.gh.Calls(path), 1, "one comment")
				e, err = b.store.GetGithubOutbox(ctx, tc.host, key)
				require.NoError(t, err)
				require.Equal(t, "sent", e.State)
				require.Equal(t, 3, e.Attempts)

				reads := b.gh.Reads(path)
				require.NotEmpty(t, reads)
				for _, r := range reads {
					u, err := url.Parse(r)
					require.NoError(t, err)
					q := u.Query()
					if strings.HasPrefix(tc.target, "sha:") {
						require.False(t, q.Has("since"), "commit comments have no since")
					} else {
						require.Equal(t, queued.Add(-time.Hour).UTC().Format(time.RFC3339), q.Get("since"))
					}
					if tc.gitea {
						require.False(t, q.Has("page") || q.Has("per_page"), "Gitea lists an issue's comments in one answer: %s", r)
					} else {
						require.Equal(t, "100", q.Get("per_page"))
					}
				}
				if tc.others >= 100 {
					require.Len(t, reads, 2, "the marker is on the second page: %v", reads)
				}
			})
		}
	}
}

// TestCommentRetriedAfterFailedPost: a comment whose post the forge
// answered 502 to is posted on the next attempt, once: the look finds no
// marker (the failed post made nothing).
func TestCommentRetriedAfterFailedPost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.gh.Now = b.clock.Now
	b.gh.Install("Codertocat", "Hello-World", 1)
	ctx := context.Background()
	key := "comment:" + strings.Repeat("cd", 32)
	require.NoError(t, b.store.QueueGithubOutbox(ctx, []store.GithubOutboxEntry{{Host: "github.com", Key: key, Kind: "comment",
		Owner: "Codertocat", Repo: "Hello-World", Target: "2", InstallationID: 1, Body: []byte(`{"body":"hi"}`)}}, b.clock.Now()))
	b.gh.AddComment("Codertocat", "Hello-World", "2", "someone else's, quoting <!-- hopper:comment:other -->")
	b.gh.FailWrites(1)
	n, err := b.svc.SendDue(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Empty(t, b.gh.Calls("/comments"))
	b.clock.Advance(time.Minute)
	n, err = b.svc.SendDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	path := "/repos/Codertocat/Hello-World/issues/2/comments"
	require.Len(t, b.gh.Reads(path), 1, "the retry looked")
	posted := b.gh.Calls(path)
	require.Len(t, posted, 1)
	require.Equal(t, "hi\n\n<!-- hopper:"+key+" -->", posted[0].Body["body"])
}
