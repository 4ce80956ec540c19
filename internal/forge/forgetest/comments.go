package forgetest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// comment is a comment on an issue or pull request (on "7") or a commit
// (on "sha:…") of a repository.
type comment struct {
	repo, on string
	id       int
	body     string
	created  time.Time
}

// AddComment adds a comment someone else wrote, now, on an issue or pull
// request (on "7") or a commit (on "sha:…").
func (g *GitHub) AddComment(owner, repo, on, body string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nextID++
	g.comments = append(g.comments, comment{repo: owner + "/" + repo, on: on, id: g.nextID, body: body, created: g.now()})
}

// listComments answers a listing of an issue's or a commit's comments as
// GitHub does: oldest first, those updated at or after since (if given;
// GitHub's times have whole seconds), per_page at a time (30 unless
// asked, at most 100).
func (g *GitHub) listComments(w http.ResponseWriter, r *http.Request, key, on string) {
	q := r.URL.Query()
	var since time.Time
	if v := q.Get("since"); v != "" {
		since, _ = time.Parse(time.RFC3339, v) // checkQuery refused any other
	}
	var all []comment
	for _, c := range g.comments {
		if c.repo == key && c.on == on && !c.created.Truncate(time.Second).Before(since) {
			all = append(all, c)
		}
	}
	if n, _ := strconv.Atoi(q.Get("per_page")); n > 100 {
		q.Set("per_page", "100")
	}
	out := []any{}
	for _, c := range paged(all, q) {
		at := c.created.UTC().Format(time.RFC3339)
		item := map[string]any{"id": c.id, "node_id": fmt.Sprintf("IC_%d", c.id), "body": c.body,
			"user": map[string]any{"login": "someone", "id": 1, "type": "User"}, "created_at": at, "updated_at": at,
			"html_url": fmt.Sprintf("https://github.com/%s#issuecomment-%d", key, c.id), "author_association": "NONE"}
		if sha, ok := strings.CutPrefix(on, "sha:"); ok {
			item["commit_id"] = sha
		}
		out = append(out, item)
	}
	g.reply(w, http.StatusOK, out)
}
