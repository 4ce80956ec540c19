// Package forgetest is a local GitHub for tests: an HTTP server that
// checks every request hopper makes against GitHub's published OpenAPI
// description (npm @octokit/openapi: the operation must exist for the
// method and path, the JSON body must match the operation's request
// schema, the Authorization header must carry an installation token it
// issued, or for the App's own calls an RS256 JWT of the App's key), and
// fails the test on anything the description does not allow. It answers
// from fixtures a test sets: files at refs, default branches,
// permissions, pull requests; it records statuses, comments and
// reactions.
package forgetest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
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
	"sort"
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
		for p := range paths {
			re := "^" + param.ReplaceAllString(regexp.QuoteMeta(p), `[^/]+`) + "$"
			description.paths = append(description.paths, pathTemplate{template: p, re: regexp.MustCompile(re)})
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

// bodySchema compiles the JSON request schema of an operation.
func bodySchema(template, method string) (*jsonschema.Schema, error) {
	escape := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1") }
	ptr := "/paths/" + escape(template) + "/" + strings.ToLower(method) + "/requestBody/content/" + escape("application/json") + "/schema"
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
	failWrites    int
	nextID        int
	// checkRuns are the ids of the check runs created, per repository:
	// an update of any other is refused, as GitHub answers 404.
	checkRuns map[string]bool
	// runBodies are the check runs as created and updated, for listing.
	runBodies []checkRun
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
	default:
		g.refuse(w, r, "this local GitHub does not answer %s", template)
	}
}

// app answers the App's own calls.
func (g *GitHub) app(w http.ResponseWriter, r *http.Request, template string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch template {
	case "/app/installations/{installation_id}/access_tokens":
		id, _ := strconv.ParseInt(parts[2], 10, 64)
		tok := make([]byte, 20)
		_, _ = rand.Read(tok)
		token := "ghs_" + base64.RawURLEncoding.EncodeToString(tok)
		g.tokens[token] = id
		g.TokensIssued++
		g.reply(w, http.StatusCreated, map[string]any{"token": token, "expires_at": g.now().Add(time.Hour).UTC().Format(time.RFC3339)})
	case "/app/installations":
		// One installation per account, as GitHub has; no second page.
		seen := map[string]bool{}
		out := []any{}
		if r.URL.Query().Get("page") == "1" {
			keys := make([]string, 0, len(g.installations))
			for k := range g.installations {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				owner, _, _ := strings.Cut(k, "/")
				if !seen[owner] {
					seen[owner] = true
					out = append(out, map[string]any{"id": g.installations[k], "account": map[string]any{"login": owner}})
				}
			}
		}
		g.reply(w, http.StatusOK, out)
	default:
		id, ok := g.installations[parts[1]+"/"+parts[2]]
		if !ok {
			g.reply(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
			return
		}
		g.reply(w, http.StatusOK, map[string]any{"id": id})
	}
}

// checkJWT verifies an App JWT: RS256 with the App's key, issued by the
// App, not expired, at most ten minutes long.
func (g *GitHub) checkJWT(token string) error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return fmt.Errorf("not a JWT")
	}
	var header struct{ Alg string }
	hb, _ := base64.RawURLEncoding.DecodeString(parts[0])
	if json.Unmarshal(hb, &header) != nil || header.Alg != "RS256" {
		return fmt.Errorf("alg must be RS256")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&g.Key.PublicKey, crypto.SHA256, sum[:], sig); err != nil {
		return fmt.Errorf("bad signature: %w", err)
	}
	var claims struct {
		Iat, Exp int64
		Iss      string
	}
	cb, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if err := json.Unmarshal(cb, &claims); err != nil {
		return err
	}
	now := g.now().Unix()
	if claims.Iss != strconv.FormatInt(g.AppID, 10) || claims.Exp < now || claims.Iat > now+60 || claims.Exp-claims.Iat > 600 {
		return fmt.Errorf("claims %+v are not valid now", claims)
	}
	return nil
}

// IssueToken issues a token for a token forge (a Gitea bot's access
// token) that acts like the installation's.
func (g *GitHub) IssueToken(installation int64) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	tok := make([]byte, 20)
	_, _ = rand.Read(tok)
	token := "gta_" + base64.RawURLEncoding.EncodeToString(tok)
	g.tokens[token] = installation
	return token
}

func (g *GitHub) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}
