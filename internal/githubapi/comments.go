package githubapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/forge"
	"github.com/hopper-ci/hopper/internal/store"
)

// commentLookback widens the search for a comment an earlier attempt
// posted: the forge dates the comment by its own clock, which may be
// behind the one that dated the message.
const commentLookback = time.Hour

// maxCommentBody is the longest comment body GitHub takes (characters;
// bytes are counted, which is stricter).
const maxCommentBody = 65536

// markerKey is what a key may be to stand in a marker as it is: nothing
// that could end an HTML comment.
var markerKey = regexp.MustCompile(`^[A-Za-z0-9:._/]+$`)

// commentMarker is the hidden mark of the comment sent under an outbox
// key: an HTML comment, which GitHub's and Gitea's renderers leave out
// of the page. It names the key (a digest of where the comment goes and
// what it says, nothing secret), or a digest of it if the key holds
// characters an HTML comment cannot.
func commentMarker(key string) string {
	if !markerKey.MatchString(key) {
		sum := sha256.Sum256([]byte(key))
		key = "comment:" + hex.EncodeToString(sum[:])
	}
	return "<!-- hopper:" + key + " -->"
}

// markComment appends the marker to a create-comment body (once), clipping
// the text so that the whole stays within GitHub's bound.
func markComment(body []byte, marker string) ([]byte, error) {
	var b map[string]any
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("comment body: %w", err)
	}
	text, _ := b["body"].(string)
	if strings.Contains(text, marker) {
		return body, nil
	}
	suffix := "\n\n" + marker
	b["body"] = clip(text, maxCommentBody-len(suffix)) + suffix
	return json.Marshal(b)
}

// temporary is a failure tried again later whatever the forge answered.
type temporary struct{ error }

func (t temporary) Unwrap() error { return t.error }

// sendComment posts a comment carrying its marker. An attempt that is
// not the message's first looks for the marker first: an earlier one may
// have posted the comment and died (or lost its lease) before recording
// it, and the comment is not posted twice. A failed look is tried again
// later rather than risk a second comment.
func (s *Service) sendComment(ctx context.Context, f *forge.Forge, e *store.GithubOutboxEntry) error {
	sha, onCommit := strings.CutPrefix(e.Target, "sha:")
	number := 0
	if onCommit {
		if f.Kind == forge.KindGitea {
			return refusal{errors.New("gitea and forgejo have no commit comments: the error is on the status's page")}
		}
	} else {
		n, err := strconv.Atoi(e.Target)
		if err != nil {
			return refusal{fmt.Errorf("comment target %q: %w", e.Target, err)}
		}
		number = n
	}
	marker := commentMarker(e.Key)
	body, err := markComment(e.Body, marker)
	if err != nil {
		return refusal{err}
	}
	if e.Attempts > 1 {
		var found bool
		if onCommit {
			found, err = f.FindCommitComment(ctx, e.InstallationID, e.Owner, e.Repo, sha, marker)
		} else {
			found, err = f.FindIssueComment(ctx, e.InstallationID, e.Owner, e.Repo, number, e.Created.Add(-commentLookback), marker)
		}
		switch {
		case errors.Is(err, forge.ErrTooManyComments):
			// Not found where an earlier attempt's comment would be (the
			// first pages since the message was queued): a second comment
			// is likelier lost than posted.
			s.Log.Warn("looking for an earlier attempt's comment read too many comments; posting", "host", e.Host, "key", e.Key, "error", err)
		case err != nil:
			return temporary{fmt.Errorf("looking for an earlier attempt's comment: %w", err)}
		case found:
			s.Log.Info("an earlier attempt posted this comment; not posting it again", "host", e.Host, "key", e.Key)
			return nil
		}
	}
	if onCommit {
		return f.CreateCommitComment(ctx, e.InstallationID, e.Owner, e.Repo, sha, json.RawMessage(body))
	}
	return f.CreateComment(ctx, e.InstallationID, e.Owner, e.Repo, number, json.RawMessage(body))
}
