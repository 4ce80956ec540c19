// Package forge is hopper's client of the forges' REST APIs: GitHub (as a
// GitHub App: app id and private key, RS256 JWTs, installation tokens
// cached and refreshed before they expire), GitHub Enterprise (the same
// at another API URL), and Gitea and Forgejo (with an access token). Only
// the calls the github service makes are here: files at a commit, the
// default branch, a user's permission, pull requests, commit statuses,
// comments (and the lookup of one already posted) and reactions.
//
// Tokens and keys never appear in errors or logs.
package forge

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kinds of forge.
const (
	KindGitHub = "github"
	KindGitea  = "gitea"
)

// Forge is one configured forge.
type Forge struct {
	// Host names the forge (github.com, gitea.example.com): roles are
	// repo:<host>/<owner>/<repo>:…
	Host string
	// Kind is KindGitHub (GitHub, GitHub Enterprise) or KindGitea (Gitea,
	// Forgejo).
	Kind string
	// APIURL is the REST API's base (https://api.github.com,
	// https://gitea.example.com/api/v1).
	APIURL string
	// AppID and PrivateKey authenticate a GitHub App; Token a user or bot
	// of a token forge.
	AppID      int64
	PrivateKey []byte
	Token      string
	// WebhookSecrets are the webhook's secrets: any one matching accepts a
	// delivery (rotation).
	WebhookSecrets [][]byte
	// AppName is the status context's name (default "Taskcluster").
	AppName string
	// HTTP, if set, sends the requests (tests).
	HTTP *http.Client
	// Now, if set, is the clock of tokens (tests).
	Now func() time.Time

	mu     sync.Mutex
	tokens map[int64]installationToken
	key    *rsaKey
}

type installationToken struct {
	token   string
	expires time.Time
}

// Error is a forge API call's failure.
type Error struct {
	Method, Path string
	// Status is the HTTP status (0: no answer).
	Status  int
	Message string
}

func (e *Error) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("%s %s: %s", e.Method, e.Path, e.Message)
	}
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, e.Message)
}

// Temporary reports whether trying again later may succeed: no answer, a
// server error or a rate limit.
func (e *Error) Temporary() bool {
	return e.Status == 0 || e.Status >= 500 || e.Status == http.StatusTooManyRequests ||
		e.Status == http.StatusForbidden && strings.Contains(strings.ToLower(e.Message), "rate limit")
}

// IsStatus reports whether err is a forge answer with this status.
func IsStatus(err error, status int) bool {
	var fe *Error
	return errors.As(err, &fe) && fe.Status == status
}

// Temporary reports whether err may pass if tried again later.
func Temporary(err error) bool {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Temporary()
	}
	return err != nil && !errors.Is(err, context.Canceled)
}

func (f *Forge) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

func (f *Forge) httpClient() *http.Client {
	if f.HTTP != nil {
		return f.HTTP
	}
	return &http.Client{Timeout: 30 * time.Second}
}

// authHeader returns the Authorization header of a call made for an
// installation (GitHub App) or with the forge's token.
func (f *Forge) authHeader(ctx context.Context, installation int64) (string, error) {
	if f.Kind == KindGitea || f.Token != "" && f.AppID == 0 {
		if f.Token == "" {
			return "", fmt.Errorf("forge %s has no token", f.Host)
		}
		return "token " + f.Token, nil
	}
	if installation == 0 {
		return "", fmt.Errorf("the GitHub App is not installed for this repository on %s", f.Host)
	}
	tok, err := f.installationToken(ctx, installation)
	if err != nil {
		return "", err
	}
	return "token " + tok, nil
}

// installationToken returns a cached installation token, or a new one
// when the cached one expires within ten minutes.
func (f *Forge) installationToken(ctx context.Context, installation int64) (string, error) {
	now := f.now()
	f.mu.Lock()
	if t, ok := f.tokens[installation]; ok && now.Add(10*time.Minute).Before(t.expires) {
		f.mu.Unlock()
		return t.token, nil
	}
	f.mu.Unlock()
	jwt, err := f.AppJWT()
	if err != nil {
		return "", err
	}
	var out struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	path := "/app/installations/" + strconv.FormatInt(installation, 10) + "/access_tokens"
	if _, err := f.send(ctx, "Bearer "+jwt, http.MethodPost, path, nil, &out); err != nil {
		return "", err
	}
	if out.Token == "" {
		return "", &Error{Method: http.MethodPost, Path: path, Status: http.StatusOK, Message: "no token in the reply"}
	}
	f.mu.Lock()
	if f.tokens == nil {
		f.tokens = map[int64]installationToken{}
	}
	f.tokens[installation] = installationToken{token: out.Token, expires: out.ExpiresAt}
	f.mu.Unlock()
	return out.Token, nil
}

// call makes an API call for an installation; out, if not nil, receives
// the JSON reply.
func (f *Forge) call(ctx context.Context, installation int64, method, path string, body, out any) (int, error) {
	auth, err := f.authHeader(ctx, installation)
	if err != nil {
		return 0, err
	}
	return f.send(ctx, auth, method, path, body, out)
}

func (f *Forge) send(ctx context.Context, auth, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("encoding %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(f.APIURL, "/")+path, rd)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("User-Agent", "hopper-github")
	if f.Kind == KindGitHub {
		req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := f.httpClient().Do(req)
	if err != nil {
		// The error names the URL, never the headers.
		return 0, &Error{Method: method, Path: path, Message: err.Error()}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return resp.StatusCode, &Error{Method: method, Path: path, Message: "reading the reply: " + err.Error()}
	}
	if resp.StatusCode >= 300 {
		var msg struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(data, &msg)
		if msg.Message == "" {
			msg.Message = http.StatusText(resp.StatusCode)
		}
		return resp.StatusCode, &Error{Method: method, Path: path, Status: resp.StatusCode, Message: msg.Message}
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, &Error{Method: method, Path: path, Status: resp.StatusCode, Message: "decoding the reply: " + err.Error()}
		}
	}
	return resp.StatusCode, nil
}

func repoPath(owner, repo string) string {
	return "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(repo)
}

// GetFile returns a file's content at a commit; false when there is no
// such file.
func (f *Forge) GetFile(ctx context.Context, installation int64, owner, repo, path, ref string) ([]byte, bool, error) {
	var out struct {
		Type     string `json:"type"`
		Content  string `json:"content"`
		Encoding string `json:"encoding"`
	}
	_, err := f.call(ctx, installation, http.MethodGet, repoPath(owner, repo)+"/contents/"+url.PathEscape(path)+"?ref="+url.QueryEscape(ref), nil, &out)
	if IsStatus(err, http.StatusNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if out.Type != "" && out.Type != "file" {
		return nil, false, nil
	}
	if out.Encoding != "base64" {
		return []byte(out.Content), true, nil
	}
	b, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(out.Content, "\n", ""))
	if err != nil {
		return nil, false, fmt.Errorf("decoding %s of %s/%s at %s: %w", path, owner, repo, ref, err)
	}
	return b, true, nil
}

// Repository returns a repository's description (default_branch, …).
func (f *Forge) Repository(ctx context.Context, installation int64, owner, repo string) (map[string]any, error) {
	var out map[string]any
	_, err := f.call(ctx, installation, http.MethodGet, repoPath(owner, repo), nil, &out)
	return out, err
}

// DefaultBranch returns a repository's default branch.
func (f *Forge) DefaultBranch(ctx context.Context, installation int64, owner, repo string) (string, error) {
	r, err := f.Repository(ctx, installation, owner, repo)
	if err != nil {
		return "", err
	}
	b, _ := r["default_branch"].(string)
	if b == "" {
		return "", fmt.Errorf("%s/%s on %s has no default branch", owner, repo, f.Host)
	}
	return b, nil
}

// PermissionError is a permission the forge would not tell: the bot's
// account may not read collaborators' permissions (Gitea and Forgejo
// answer 403 unless it administers the repository). It is not "none":
// the user may well be trusted.
type PermissionError struct {
	Host, Owner, Repo, User string
	Err                     error
}

func (e *PermissionError) Error() string {
	return fmt.Sprintf("%s would not tell %s's permission on %s/%s (%v): the bot's account must be allowed to read collaborators' permissions (on Gitea and Forgejo, an administrator of the repository)",
		e.Host, e.User, e.Owner, e.Repo, e.Err)
}

func (e *PermissionError) Unwrap() error { return e.Err }

// Permission returns a user's permission on a repository ("admin",
// "write", "read", "none"; Gitea also says "owner"). A user the forge
// does not know has "none"; a permission the forge refuses to tell is a
// *PermissionError.
func (f *Forge) Permission(ctx context.Context, installation int64, owner, repo, user string) (string, error) {
	var out struct {
		Permission string `json:"permission"`
	}
	_, err := f.call(ctx, installation, http.MethodGet, repoPath(owner, repo)+"/collaborators/"+url.PathEscape(user)+"/permission", nil, &out)
	if IsStatus(err, http.StatusNotFound) {
		return "none", nil
	}
	if IsStatus(err, http.StatusForbidden) && !Temporary(err) {
		return "", &PermissionError{Host: f.Host, Owner: owner, Repo: repo, User: user, Err: err}
	}
	if err != nil {
		return "", err
	}
	return out.Permission, nil
}

// PullRequest returns a pull request.
func (f *Forge) PullRequest(ctx context.Context, installation int64, owner, repo string, number int) (map[string]any, error) {
	var out map[string]any
	_, err := f.call(ctx, installation, http.MethodGet, repoPath(owner, repo)+"/pulls/"+strconv.Itoa(number), nil, &out)
	return out, err
}

// CommitSHA resolves a ref (a branch, a tag) to its commit's SHA.
func (f *Forge) CommitSHA(ctx context.Context, installation int64, owner, repo, ref string) (string, error) {
	var out struct {
		SHA string `json:"sha"`
	}
	_, err := f.call(ctx, installation, http.MethodGet, repoPath(owner, repo)+"/commits/"+url.PathEscape(ref), nil, &out)
	if err == nil && out.SHA == "" {
		err = fmt.Errorf("%s of %s/%s resolves to no commit", ref, owner, repo)
	}
	return out.SHA, err
}

// CreateStatus sets a commit status; body is GitHub's create-status body.
func (f *Forge) CreateStatus(ctx context.Context, installation int64, owner, repo, sha string, body json.RawMessage) error {
	_, err := f.call(ctx, installation, http.MethodPost, repoPath(owner, repo)+"/statuses/"+url.PathEscape(sha), body, nil)
	return err
}

// CreateCheckRun creates a check run (GitHub only) and returns its id;
// body is GitHub's create-check-run body.
func (f *Forge) CreateCheckRun(ctx context.Context, installation int64, owner, repo string, body json.RawMessage) (int64, error) {
	var out struct {
		ID int64 `json:"id"`
	}
	_, err := f.call(ctx, installation, http.MethodPost, repoPath(owner, repo)+"/check-runs", body, &out)
	if err == nil && out.ID == 0 {
		err = fmt.Errorf("creating a check run on %s/%s: the answer has no id", owner, repo)
	}
	return out.ID, err
}

// UpdateCheckRun updates a check run; body is GitHub's update-check-run
// body.
func (f *Forge) UpdateCheckRun(ctx context.Context, installation int64, owner, repo string, id int64, body json.RawMessage) error {
	_, err := f.call(ctx, installation, http.MethodPatch, repoPath(owner, repo)+"/check-runs/"+strconv.FormatInt(id, 10), body, nil)
	return err
}

// CreateComment comments on an issue or pull request.
func (f *Forge) CreateComment(ctx context.Context, installation int64, owner, repo string, number int, body json.RawMessage) error {
	_, err := f.call(ctx, installation, http.MethodPost, repoPath(owner, repo)+"/issues/"+strconv.Itoa(number)+"/comments", body, nil)
	return err
}

// CreateCommitComment comments on a commit (GitHub only; Gitea has no
// commit comments, so a comment without a pull request goes nowhere
// there).
func (f *Forge) CreateCommitComment(ctx context.Context, installation int64, owner, repo, sha string, body json.RawMessage) error {
	_, err := f.call(ctx, installation, http.MethodPost, repoPath(owner, repo)+"/commits/"+url.PathEscape(sha)+"/comments", body, nil)
	return err
}

// Bounds of a search for a comment: pages of commentPage comments, at
// most maxCommentPages of them.
const (
	commentPage     = 100
	maxCommentPages = 10
)

// ErrTooManyComments is a search for a comment that read its pages'
// bound without finding it: the comment may be further on.
var ErrTooManyComments = errors.New("more comments than a search reads")

// FindIssueComment reports whether a comment on an issue or pull request
// updated at or after since contains marker. GitHub's listing is read a
// page at a time (at most maxCommentPages); Gitea's and Forgejo's,
// which take no page size, in one answer. ErrTooManyComments when the
// pages ran out before the listing did.
func (f *Forge) FindIssueComment(ctx context.Context, installation int64, owner, repo string, number int, since time.Time, marker string) (bool, error) {
	q := url.Values{"since": {since.UTC().Format(time.RFC3339)}}
	return f.findComment(ctx, installation, repoPath(owner, repo)+"/issues/"+strconv.Itoa(number)+"/comments", q, marker)
}

// FindCommitComment reports whether a comment on a commit contains
// marker (GitHub only: Gitea has no commit comments), read as
// FindIssueComment reads (the listing has no since).
func (f *Forge) FindCommitComment(ctx context.Context, installation int64, owner, repo, sha, marker string) (bool, error) {
	return f.findComment(ctx, installation, repoPath(owner, repo)+"/commits/"+url.PathEscape(sha)+"/comments", url.Values{}, marker)
}

// findComment reads a listing of comments until one contains marker.
func (f *Forge) findComment(ctx context.Context, installation int64, path string, q url.Values, marker string) (bool, error) {
	paged := f.Kind != KindGitea
	for page := 1; page <= maxCommentPages; page++ {
		if paged {
			q.Set("per_page", strconv.Itoa(commentPage))
			q.Set("page", strconv.Itoa(page))
		}
		var out []struct {
			Body string `json:"body"`
		}
		if _, err := f.call(ctx, installation, http.MethodGet, path+"?"+q.Encode(), nil, &out); err != nil {
			return false, err
		}
		for _, c := range out {
			if strings.Contains(c.Body, marker) {
				return true, nil
			}
		}
		if !paged || len(out) < commentPage {
			return false, nil
		}
	}
	return false, fmt.Errorf("listing %s: %w", path, ErrTooManyComments)
}

// CreateReaction reacts to an issue comment.
func (f *Forge) CreateReaction(ctx context.Context, installation int64, owner, repo string, commentID int64, body json.RawMessage) error {
	_, err := f.call(ctx, installation, http.MethodPost, repoPath(owner, repo)+"/issues/comments/"+strconv.FormatInt(commentID, 10)+"/reactions", body, nil)
	return err
}

// Statuses lists the statuses of a ref, newest first on GitHub (Gitea
// lists them oldest first: callers must not rely on the order).
func (f *Forge) Statuses(ctx context.Context, installation int64, owner, repo, ref string) ([]map[string]any, error) {
	var out []map[string]any
	_, err := f.call(ctx, installation, http.MethodGet, repoPath(owner, repo)+"/commits/"+url.PathEscape(ref)+"/statuses", nil, &out)
	return out, err
}

// CheckRuns returns the check runs of a ref made by this forge's GitHub
// App (none on Gitea and Forgejo, which have no checks API, nor for a
// token forge, whose check runs cannot be told from others').
func (f *Forge) CheckRuns(ctx context.Context, installation int64, owner, repo, ref string) ([]map[string]any, error) {
	if f.Kind != KindGitHub || f.AppID == 0 {
		return nil, nil
	}
	var out struct {
		CheckRuns []map[string]any `json:"check_runs"`
	}
	_, err := f.call(ctx, installation, http.MethodGet, repoPath(owner, repo)+"/commits/"+url.PathEscape(ref)+"/check-runs?per_page=100", nil, &out)
	if err != nil {
		return nil, err
	}
	var ours []map[string]any
	for _, c := range out.CheckRuns {
		if app, _ := c["app"].(map[string]any); app != nil {
			if id, _ := app["id"].(float64); int64(id) == f.AppID {
				ours = append(ours, c)
			}
		}
	}
	return ours, nil
}

// AppInstallation is where the GitHub App is installed: an account and
// the installation's id.
type AppInstallation struct {
	Owner string
	ID    int64
}

// Installations lists the GitHub App's installations (nil for a token
// forge), a hundred a page.
func (f *Forge) Installations(ctx context.Context) ([]AppInstallation, error) {
	if f.AppID == 0 {
		return nil, nil
	}
	var all []AppInstallation
	for page := 1; ; page++ {
		jwt, err := f.AppJWT()
		if err != nil {
			return nil, err
		}
		var out []struct {
			ID      int64 `json:"id"`
			Account struct {
				Login string `json:"login"`
			} `json:"account"`
		}
		if _, err := f.send(ctx, "Bearer "+jwt, http.MethodGet, fmt.Sprintf("/app/installations?per_page=100&page=%d", page), nil, &out); err != nil {
			return nil, err
		}
		for _, i := range out {
			if i.Account.Login != "" && i.ID != 0 {
				all = append(all, AppInstallation{Owner: i.Account.Login, ID: i.ID})
			}
		}
		if len(out) < 100 || page >= 100 {
			return all, nil
		}
	}
}

// RepositoryInstallation returns the GitHub App's installation on a
// repository (0 when the App is not installed there).
func (f *Forge) RepositoryInstallation(ctx context.Context, owner, repo string) (int64, error) {
	jwt, err := f.AppJWT()
	if err != nil {
		return 0, err
	}
	var out struct {
		ID int64 `json:"id"`
	}
	_, err = f.send(ctx, "Bearer "+jwt, http.MethodGet, repoPath(owner, repo)+"/installation", nil, &out)
	if IsStatus(err, http.StatusNotFound) {
		return 0, nil
	}
	return out.ID, err
}
