// Package forgetest is a local GitHub for tests: an HTTP server that
// checks every request hopper makes against GitHub's published OpenAPI
// description (npm @octokit/openapi: the operation must exist for the
// method and path, every path and query parameter must be one the
// operation declares and match its schema, the JSON body must match the
// operation's request schema, the Authorization header must carry an
// installation token it issued, or for the App's own calls an RS256 JWT
// of the App's key), and fails the test on anything the description does
// not allow. It answers from fixtures a test sets: files at refs, default
// branches, permissions, pull requests; it records statuses, comments
// and reactions, and lists the comments as GitHub does (since, pages).
package forgetest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// description is GitHub's OpenAPI description, loaded once per test
// binary.
var description struct {
	once  sync.Once
	doc   map[string]any
	paths []pathTemplate
	err   error
	comp  *jsonschema.Compiler
	mu    sync.Mutex
	cache map[string]*jsonschema.Schema
}

type pathTemplate struct {
	template string
	re       *regexp.Regexp
	// names are the template's parameters, in the order re captures them.
	names []string
}

// OpenAPIPath is where e2e/node installs @octokit/openapi.
func OpenAPIPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "e2e", "node", "node_modules", "@octokit", "openapi", "generated", "api.github.com.json")
}

func loadDescription() error {
	description.once.Do(func() {
		raw, err := os.ReadFile(OpenAPIPath())
		if err != nil {
			description.err = err
			return
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			description.err = err
			return
		}
		description.doc = doc
		paths, _ := doc["paths"].(map[string]any)
		param := regexp.MustCompile(`\\\{[^}]+\\\}`)
		name := regexp.MustCompile(`\{([^}]+)\}`)
		for p := range paths {
			re := "^" + param.ReplaceAllString(regexp.QuoteMeta(p), `([^/]+)`) + "$"
			var names []string
			for _, m := range name.FindAllStringSubmatch(p, -1) {
				names = append(names, m[1])
			}
			description.paths = append(description.paths, pathTemplate{template: p, re: regexp.MustCompile(re), names: names})
		}
		c := jsonschema.NewCompiler()
		doc2, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
		if err != nil {
			description.err = err
			return
		}
		if err := c.AddResource("https://openapi.invalid/api.json", doc2); err != nil {
			description.err = err
			return
		}
		description.comp = c
		description.cache = map[string]*jsonschema.Schema{}
	})
	return description.err
}

// operation finds the description's operation for a request: its path
// template (the most specific: fewest parameters) and the operation.
func operation(method, path string) (string, map[string]any) {
	best, bestParams := "", 1<<30
	for _, p := range description.paths {
		if p.re.MatchString(path) {
			n := strings.Count(p.template, "{")
			if n < bestParams {
				best, bestParams = p.template, n
			}
		}
	}
	if best == "" {
		return "", nil
	}
	item, _ := description.doc["paths"].(map[string]any)[best].(map[string]any)
	op, _ := item[strings.ToLower(method)].(map[string]any)
	return best, op
}

// escapePointer escapes a JSON pointer's token.
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// bodySchema compiles the JSON request schema of an operation.
func bodySchema(template, method string) (*jsonschema.Schema, error) {
	return schemaAt("/paths/" + escapePointer(template) + "/" + strings.ToLower(method) + "/requestBody/content/" + escapePointer("application/json") + "/schema")
}

// schemaAt compiles the schema at a JSON pointer of the description.
func schemaAt(ptr string) (*jsonschema.Schema, error) {
	description.mu.Lock()
	defer description.mu.Unlock()
	if s, ok := description.cache[ptr]; ok {
		return s, nil
	}
	loc := "https://openapi.invalid/api.json#" + (&url.URL{Fragment: ptr}).EscapedFragment()
	s, err := description.comp.Compile(loc)
	if err != nil {
		return nil, err
	}
	description.cache[ptr] = s
	return s, nil
}

// Call is a recorded write.
type Call struct {
	Method, Path string
	Body         map[string]any
}

// GitHub is the local GitHub.
type GitHub struct {
	t      testing.TB
	Server *httptest.Server
	// AppID and Key are the App's; PEM is its private key as GitHub hands
	// it out.
	AppID int64
	Key   *rsa.PrivateKey
	PEM   []byte
	// Now, if set, is this GitHub's clock (tokens' expiry, JWTs' times).
	Now func() time.Time

	mu            sync.Mutex
	tokens        map[string]int64 // token → installation
	TokensIssued  int
	installations map[string]int64 // owner/repo → installation
	files         map[string]string
	branches      map[string]string
	permissions   map[string]string
	pulls         map[string]map[string]any
	commits       map[string]string
	calls         []Call
	reads         []string
	failWrites    int
	failReads     int
	nextID        int
	// checkRuns are the ids of the check runs created, per repository:
	// an update of any other is refused, as GitHub answers 404.
	checkRuns map[string]bool
	// runBodies are the check runs as created and updated, for listing.
	runBodies []checkRun
	// comments are the comments on issues and commits, oldest first.
	comments []comment
}

type checkRun struct {
	repo string
	run  map[string]any
}

// Start starts a local GitHub; the test skips when @octokit/openapi is
// not installed (npm ci --prefix e2e/node).
func Start(t testing.TB) *GitHub {
	t.Helper()
	if err := loadDescription(); err != nil {
		t.Skipf("GitHub's OpenAPI description is not installed (npm ci --prefix e2e/node): %v", err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	g := &GitHub{t: t, AppID: 4242, Key: key, tokens: map[string]int64{}, installations: map[string]int64{},
		files: map[string]string{}, branches: map[string]string{}, permissions: map[string]string{},
		pulls: map[string]map[string]any{}, commits: map[string]string{}}
	g.PEM = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	g.Server = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.Server.Close)
	return g
}

// Install installs the App on a repository.
func (g *GitHub) Install(owner, repo string, installation int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.installations[owner+"/"+repo] = installation
}

// SetFile puts a file at a ref (a SHA or a branch).
func (g *GitHub) SetFile(owner, repo, ref, path, content string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.files[owner+"/"+repo+"@"+ref+":"+path] = content
}

// SetDefaultBranch sets a repository's default branch.
func (g *GitHub) SetDefaultBranch(owner, repo, branch string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.branches[owner+"/"+repo] = branch
}

// Forbidden, as a permission, makes the permission lookup answer 403, as
// Gitea does when the bot does not administer the repository.
const Forbidden = "<403>"

// SetPermission sets a user's permission on a repository (Forbidden: the
// lookup is refused).
func (g *GitHub) SetPermission(owner, repo, user, permission string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.permissions[owner+"/"+repo+":"+user] = permission
}

// SetPull sets a pull request.
func (g *GitHub) SetPull(owner, repo string, number int, pr map[string]any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pulls[owner+"/"+repo+"#"+strconv.Itoa(number)] = pr
}

// SetCommit makes a ref resolve to a SHA.
func (g *GitHub) SetCommit(owner, repo, ref, sha string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.commits[owner+"/"+repo+"@"+ref] = sha
}

// FailWrites makes the next n writes answer 502.
func (g *GitHub) FailWrites(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.failWrites = n
}

// FailReads makes the next n reads (GETs with an installation's token)
// answer 502.
func (g *GitHub) FailReads(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.failReads = n
}

// Reads returns the reads (paths and queries) made so far whose path
// contains part.
func (g *GitHub) Reads(part string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, r := range g.reads {
		if p, _, _ := strings.Cut(r, "?"); strings.Contains(p, part) {
			out = append(out, r)
		}
	}
	return out
}

// Calls returns the writes made so far whose path contains part.
func (g *GitHub) Calls(part string) []Call {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Call
	for _, c := range g.calls {
		if strings.Contains(c.Path, part) {
			out = append(out, c)
		}
	}
	return out
}

func (g *GitHub) reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (g *GitHub) refuse(w http.ResponseWriter, r *http.Request, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	g.t.Errorf("forgetest: %s %s refused: %s", r.Method, r.URL.Path, msg)
	g.reply(w, http.StatusBadRequest, map[string]string{"message": msg})
}

func (g *GitHub) serve(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	template, op := operation(r.Method, path)
	if op == nil {
		g.refuse(w, r, "GitHub's OpenAPI description has no such operation")
		return
	}
	if err := checkPath(template, op, path); err != nil {
		g.refuse(w, r, "%v", err)
		return
	}
	if err := checkQuery(op, r.URL.Query()); err != nil {
		g.refuse(w, r, "%v", err)
		return
	}
	var body map[string]any
	rb, _ := op["requestBody"].(map[string]any)
	data, _ := io.ReadAll(r.Body)
	if rb == nil && len(data) > 0 {
		g.refuse(w, r, "the operation takes no body")
		return
	}
	if rb != nil && (len(data) > 0 || rb["required"] == true) {
		var raw any
		if err := json.Unmarshal(data, &raw); err != nil {
			g.refuse(w, r, "the body is not JSON: %v", err)
			return
		}
		s, err := bodySchema(template, r.Method)
		if err != nil {
			g.refuse(w, r, "compiling the request schema of %s: %v", template, err)
			return
		}
		if err := s.Validate(raw); err != nil {
			g.refuse(w, r, "the body does not match %s %s's request schema: %v", r.Method, template, err)
			return
		}
		body, _ = raw.(map[string]any)
	}
	auth := r.Header.Get("Authorization")
	if template == "/app/installations/{installation_id}/access_tokens" || template == "/repos/{owner}/{repo}/installation" || template == "/app/installations" {
		if err := g.checkJWT(strings.TrimPrefix(auth, "Bearer ")); err != nil || !strings.HasPrefix(auth, "Bearer ") {
			g.refuse(w, r, "the App's call needs a valid RS256 JWT: %v", err)
			return
		}
		g.app(w, r, template)
		return
	}
	g.mu.Lock()
	installation, ok := g.tokens[strings.TrimPrefix(auth, "token ")]
	g.mu.Unlock()
	if !ok || !strings.HasPrefix(auth, "token ") {
		g.refuse(w, r, "no installation token this GitHub issued")
		return
	}
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	owner, repo := parts[1], parts[2]
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.installations[owner+"/"+repo] != installation {
		g.reply(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	if r.Method != http.MethodGet {
		if g.failWrites > 0 {
			g.failWrites--
			g.reply(w, http.StatusBadGateway, map[string]string{"message": "Server Error"})
			return
		}
		if template == "/repos/{owner}/{repo}/check-runs/{check_run_id}" && !g.checkRuns[owner+"/"+repo+"/"+parts[4]] {
			g.refuse(w, r, "no check run %s was created on %s/%s", parts[4], owner, repo)
			return
		}
		g.calls = append(g.calls, Call{Method: r.Method, Path: path, Body: body})
		g.nextID++
		switch template {
		case "/repos/{owner}/{repo}/issues/{issue_number}/comments", "/repos/{owner}/{repo}/commits/{commit_sha}/comments":
			on := parts[4]
			if parts[3] == "commits" {
				on = "sha:" + on
			}
			text, _ := body["body"].(string)
			g.comments = append(g.comments, comment{repo: owner + "/" + repo, on: on, id: g.nextID, body: text, created: g.now()})
		}
		if template == "/repos/{owner}/{repo}/check-runs" {
			if g.checkRuns == nil {
				g.checkRuns = map[string]bool{}
			}
			g.checkRuns[fmt.Sprintf("%s/%s/%d", owner, repo, g.nextID)] = true
			run := map[string]any{"id": g.nextID, "app": map[string]any{"id": g.AppID},
				"html_url": fmt.Sprintf("https://github.com/%s/%s/runs/%d", owner, repo, g.nextID), "conclusion": nil}
			for k, v := range body {
				run[k] = v
			}
			g.runBodies = append(g.runBodies, checkRun{owner + "/" + repo, run})
		}
		if template == "/repos/{owner}/{repo}/check-runs/{check_run_id}" {
			for _, cr := range g.runBodies {
				if cr.repo == owner+"/"+repo && fmt.Sprint(cr.run["id"]) == parts[4] {
					for k, v := range body {
						cr.run[k] = v
					}
				}
			}
		}
		g.reply(w, http.StatusCreated, map[string]any{"id": g.nextID})
		return
	}
	if g.failReads > 0 {
		g.failReads--
		g.reply(w, http.StatusBadGateway, map[string]string{"message": "Server Error"})
		return
	}
	g.reads = append(g.reads, r.URL.RequestURI())
	g.read(w, r, template, owner, repo, parts)
}

// read answers the GETs hopper makes from the fixtures.
func (g *GitHub) read(w http.ResponseWriter, r *http.Request, template, owner, repo string, parts []string) {
	key := owner + "/" + repo
	notFound := func() { g.reply(w, http.StatusNotFound, map[string]string{"message": "Not Found"}) }
	switch template {
	case "/repos/{owner}/{repo}":
		branch := g.branches[key]
		if branch == "" {
			branch = "main"
		}
		g.reply(w, http.StatusOK, map[string]any{"name": repo, "full_name": key, "default_branch": branch})
	case "/repos/{owner}/{repo}/contents/{path}":
		p, _ := url.PathUnescape(parts[4])
		content, ok := g.files[key+"@"+r.URL.Query().Get("ref")+":"+p]
		if !ok {
			notFound()
			return
		}
		g.reply(w, http.StatusOK, map[string]any{"type": "file", "encoding": "base64", "name": p, "path": p,
			"content": base64.StdEncoding.EncodeToString([]byte(content))})
	case "/repos/{owner}/{repo}/collaborators/{username}/permission":
		perm, ok := g.permissions[key+":"+parts[4]]
		if !ok {
			notFound()
			return
		}
		if perm == Forbidden {
			g.reply(w, http.StatusForbidden, map[string]string{"message": "Resource not accessible by integration"})
			return
		}
		g.reply(w, http.StatusOK, map[string]any{"permission": perm, "user": map[string]any{"login": parts[4]}})
	case "/repos/{owner}/{repo}/pulls/{pull_number}":
		pr, ok := g.pulls[key+"#"+parts[4]]
		if !ok {
			notFound()
			return
		}
		g.reply(w, http.StatusOK, pr)
	case "/repos/{owner}/{repo}/commits/{ref}":
		sha, ok := g.commits[key+"@"+parts[4]]
		if !ok {
			notFound()
			return
		}
		g.reply(w, http.StatusOK, map[string]any{"sha": sha})
	case "/repos/{owner}/{repo}/commits/{ref}/check-runs":
		sha := parts[4]
		if c, ok := g.commits[key+"@"+parts[4]]; ok {
			sha = c
		}
		runs := []any{}
		for _, cr := range g.runBodies {
			if cr.repo == key && cr.run["head_sha"] == sha {
				runs = append(runs, cr.run)
			}
		}
		g.reply(w, http.StatusOK, map[string]any{"total_count": len(runs), "check_runs": runs})
	case "/repos/{owner}/{repo}/commits/{ref}/statuses":
		var out []any
		for i := len(g.calls) - 1; i >= 0; i-- {
			c := g.calls[i]
			if strings.HasPrefix(c.Path, "/repos/"+key+"/statuses/") {
				st := map[string]any{"id": i + 1}
				for k, v := range c.Body {
					st[k] = v
				}
				out = append(out, st)
			}
		}
		g.reply(w, http.StatusOK, out)
	case "/repos/{owner}/{repo}/issues/{issue_number}/comments":
		g.listComments(w, r, key, parts[4])
	case "/repos/{owner}/{repo}/commits/{commit_sha}/comments":
		g.listComments(w, r, key, "sha:"+parts[4])
	default:
		g.refuse(w, r, "this local GitHub does not answer %s", template)
	}
}

func (g *GitHub) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}
