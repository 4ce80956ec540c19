package forgetest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Users is a local GitHub (or GitHub Enterprise Server: its API under
// /api/v3) for signing people in, as an OAuth App sees it. Its web flow
// follows GitHub's documentation of OAuth Apps (authorize with client_id,
// the registered redirect_uri, state and an S256 PKCE challenge; the code
// traded once, within ten minutes, with the client secret and the
// verifier; errors answered 200 with an error field, as GitHub does). Its
// API checks every request against GitHub's published OpenAPI description
// (the operation must exist, every query parameter must be one it
// declares, with a value of its type), wants a User-Agent as GitHub does,
// and answers only tokens it issued; anything else fails the test.
type Users struct {
	t      testing.TB
	Server *httptest.Server
	// ClientID, Secret and Redirect are the OAuth App's registration.
	ClientID, Secret, Redirect string
	// Now, if set, is this GitHub's clock (codes expire).
	Now func() time.Time

	mu     sync.Mutex
	users  map[string]*User // by login
	next   string           // the login of whoever is at the browser
	codes  map[string]code
	tokens map[string]string // token → login
	down   bool
	// Calls counts the API calls answered, by operation path.
	calls map[string]int
}

// User is a GitHub account.
type User struct {
	ID    int64
	Login string
	// Teams are "<org>/<team-slug>"; Admin the organizations the user
	// administers; Member those they are a plain member of.
	Teams, Admin, Member []string
	// Email is their primary address; Verified says whether GitHub
	// verified it.
	Email    string
	Verified bool
}

type code struct {
	login, challenge, redirect string
	expires                    time.Time
}

// StartUsers starts a local GitHub for sign-in with an OAuth App of the
// given id and secret; the test skips when @octokit/openapi is not
// installed (npm ci --prefix e2e/node).
func StartUsers(t testing.TB, clientID, secret string) *Users {
	t.Helper()
	if err := loadDescription(); err != nil {
		t.Skipf("GitHub's OpenAPI description is not installed (npm ci --prefix e2e/node): %v", err)
	}
	g := &Users{t: t, ClientID: clientID, Secret: secret, users: map[string]*User{}, codes: map[string]code{},
		tokens: map[string]string{}, calls: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login/oauth/authorize", g.authorize)
	mux.HandleFunc("POST /login/oauth/access_token", g.accessToken)
	mux.HandleFunc("/api/v3/", g.api)
	g.Server = httptest.NewServer(mux)
	t.Cleanup(g.Server.Close)
	return g
}

// Put adds or replaces an account (a copy is kept).
func (g *Users) Put(u User) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.users[u.Login] = &u
}

// Delete deletes an account: its tokens stop working and its profile is
// gone.
func (g *Users) Delete(login string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.users, login)
	for tok, l := range g.tokens {
		if l == login {
			delete(g.tokens, tok)
		}
	}
}

// SignInAs makes the next authorization sign in login (as if they were
// at the browser and approved hopper).
func (g *Users) SignInAs(login string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.next = login
}

// SetDown makes everything answer 503 (GitHub unavailable) or not.
func (g *Users) SetDown(down bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = down
}

// Calls says how many API calls of an operation (its path template, as
// "/user/teams") were answered.
func (g *Users) Calls(template string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls[template]
}

func (g *Users) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

func (g *Users) isDown(w http.ResponseWriter) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.down {
		http.Error(w, "GitHub is unavailable", http.StatusServiceUnavailable)
	}
	return g.down
}

func (g *Users) fail(w http.ResponseWriter, r *http.Request, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	g.t.Errorf("forgetest: %s %s refused: %s", r.Method, r.URL.Path, msg)
	http.Error(w, msg, http.StatusBadRequest)
}

// authorize is GitHub's authorization page, approved at once.
func (g *Users) authorize(w http.ResponseWriter, r *http.Request) {
	if g.isDown(w) {
		return
	}
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "client_id", "redirect_uri", "login", "scope", "state", "allow_signup", "prompt", "code_challenge", "code_challenge_method", "response_type":
		default:
			g.fail(w, r, "GitHub's authorize takes no parameter %q", k)
			return
		}
	}
	if q.Get("client_id") != g.ClientID || q.Get("redirect_uri") != g.Redirect || q.Get("state") == "" ||
		q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43 {
		g.fail(w, r, "not the App's authorization request: %s", q.Encode())
		return
	}
	g.mu.Lock()
	login := g.next
	_, known := g.users[login]
	c := randomString("")
	if known {
		g.codes[c] = code{login: login, challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri"), expires: g.now().Add(10 * time.Minute)}
	}
	g.mu.Unlock()
	back := url.Values{"state": {q.Get("state")}}
	if known {
		back.Set("code", c)
	} else {
		back.Set("error", "access_denied")
		back.Set("error_description", "The user has denied your application access.")
	}
	http.Redirect(w, r, q.Get("redirect_uri")+"?"+back.Encode(), http.StatusFound)
}

// accessToken trades a code, once, for a token.
func (g *Users) accessToken(w http.ResponseWriter, r *http.Request) {
	if g.isDown(w) {
		return
	}
	if err := r.ParseForm(); err != nil {
		g.fail(w, r, "the body is not a form: %v", err)
		return
	}
	f := r.PostForm
	answer := func(v url.Values) {
		if strings.Contains(r.Header.Get("Accept"), "application/json") {
			out := map[string]string{}
			for k := range v {
				out[k] = v.Get(k)
			}
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			_ = json.NewEncoder(w).Encode(out)
			return
		}
		w.Header().Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
		_, _ = w.Write([]byte(v.Encode()))
	}
	refuse := func(e, desc string) {
		answer(url.Values{"error": {e}, "error_description": {desc}, "error_uri": {"https://docs.github.com/apps/troubleshooting-oauth-app-access-token-request-errors"}})
	}
	if f.Get("client_id") != g.ClientID || f.Get("client_secret") != g.Secret {
		refuse("incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect.")
		return
	}
	g.mu.Lock()
	c, ok := g.codes[f.Get("code")]
	delete(g.codes, f.Get("code"))
	g.mu.Unlock()
	sum := sha256.Sum256([]byte(f.Get("code_verifier")))
	switch {
	case !ok || g.now().After(c.expires):
		refuse("bad_verification_code", "The code passed is incorrect or expired.")
		return
	case f.Get("redirect_uri") != "" && f.Get("redirect_uri") != c.redirect:
		refuse("redirect_uri_mismatch", "The redirect_uri MUST match the registered callback URL for this application.")
		return
	case base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge:
		refuse("bad_verification_code", "The code_verifier does not match the code_challenge.")
		return
	}
	tok := randomString("gho_")
	g.mu.Lock()
	g.tokens[tok] = c.login
	g.mu.Unlock()
	answer(url.Values{"access_token": {tok}, "scope": {"read:org,user:email"}, "token_type": {"bearer"}})
}

func randomString(prefix string) string {
	b := make([]byte, 27)
	_, _ = rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// api answers the REST API under /api/v3, as GitHub Enterprise Server
// serves it.
func (g *Users) api(w http.ResponseWriter, r *http.Request) {
	if g.isDown(w) {
		return
	}
	path := strings.TrimPrefix(r.URL.EscapedPath(), "/api/v3")
	template, op := operation(r.Method, path)
	if op == nil {
		g.fail(w, r, "GitHub's OpenAPI description has no such operation")
		return
	}
	if err := checkQuery(op, r.URL.Query()); err != nil {
		g.fail(w, r, "%v", err)
		return
	}
	if r.Header.Get("User-Agent") == "" {
		// GitHub refuses requests without one.
		reply(w, http.StatusForbidden, map[string]string{"message": "Request forbidden by administrative rules. Please make sure your request has a User-Agent header."})
		return
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		tok, _ = strings.CutPrefix(r.Header.Get("Authorization"), "token ")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	u := g.users[g.tokens[tok]]
	if u == nil {
		reply(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
		return
	}
	g.calls[template]++
	switch template {
	case "/user":
		reply(w, http.StatusOK, profile(u))
	case "/users/{username}":
		other, ok := g.users[strings.TrimPrefix(path, "/users/")]
		if !ok {
			reply(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
			return
		}
		reply(w, http.StatusOK, profile(other))
	case "/user/teams":
		out := []any{}
		for _, t := range paged(u.Teams, r.URL.Query()) {
			org, slug, _ := strings.Cut(t, "/")
			out = append(out, map[string]any{"id": 1, "slug": slug, "name": slug, "organization": map[string]any{"login": org}})
		}
		reply(w, http.StatusOK, out)
	case "/user/memberships/orgs":
		if r.URL.Query().Get("state") != "active" {
			g.t.Errorf("forgetest: hopper must ask for active memberships only (pending ones give nothing)")
		}
		var all []string
		for _, o := range u.Admin {
			all = append(all, o+"\x00admin")
		}
		for _, o := range u.Member {
			all = append(all, o+"\x00member")
		}
		sort.Strings(all)
		out := []any{}
		for _, m := range paged(all, r.URL.Query()) {
			org, role, _ := strings.Cut(m, "\x00")
			out = append(out, map[string]any{"state": "active", "role": role, "organization": map[string]any{"login": org}})
		}
		reply(w, http.StatusOK, out)
	case "/user/emails":
		reply(w, http.StatusOK, []any{map[string]any{"email": u.Email, "primary": true, "verified": u.Verified, "visibility": "private"}})
	default:
		g.fail(w, r, "this local GitHub does not answer %s", template)
	}
}

// paged is one page of a listing, as GitHub pages (per_page, default 30;
// page from 1).
func paged[T any](all []T, q url.Values) []T {
	size, _ := strconv.Atoi(q.Get("per_page"))
	if size < 1 {
		size = 30
	}
	n, _ := strconv.Atoi(q.Get("page"))
	if n < 1 {
		n = 1
	}
	lo := (n - 1) * size
	if lo >= len(all) {
		return nil
	}
	return all[lo:min(lo+size, len(all))]
}

func profile(u *User) map[string]any {
	return map[string]any{"id": u.ID, "login": u.Login, "type": "User", "site_admin": false, "email": nil}
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// checkQuery refuses query parameters the operation does not declare,
// and values not of the declared type or format or outside its enum.
func checkQuery(op map[string]any, q url.Values) error {
	declared := parameters(op, "query")
	for k, vs := range q {
		schema, ok := declared[k]
		if !ok {
			return fmt.Errorf("the operation declares no query parameter %q", k)
		}
		for _, v := range vs {
			if schema["type"] == "integer" {
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 || (k == "per_page" && n > 100) {
					return fmt.Errorf("query parameter %s=%q is not a valid integer", k, v)
				}
			}
			if schema["format"] == "date-time" {
				if _, err := time.Parse(time.RFC3339, v); err != nil {
					return fmt.Errorf("query parameter %s=%q is not an ISO 8601 timestamp: %v", k, v, err)
				}
			}
			if enum, ok := schema["enum"].([]any); ok {
				found := false
				for _, e := range enum {
					found = found || e == v
				}
				if !found {
					return fmt.Errorf("query parameter %s=%q is not one of %v", k, v, enum)
				}
			}
		}
	}
	return nil
}

// parameters are the schemas of an operation's parameters that are in
// the request's part in ("query", "path"), by name.
func parameters(op map[string]any, in string) map[string]map[string]any {
	declared := map[string]map[string]any{}
	params, _ := op["parameters"].([]any)
	for _, p := range params {
		pm, _ := p.(map[string]any)
		if ref, ok := pm["$ref"].(string); ok {
			name := strings.TrimPrefix(ref, "#/components/parameters/")
			pm, _ = description.doc["components"].(map[string]any)["parameters"].(map[string]any)[name].(map[string]any)
		}
		if pm["in"] == in {
			schema, _ := pm["schema"].(map[string]any)
			declared[pm["name"].(string)] = schema
		}
	}
	return declared
}

// checkPath refuses a path whose parameters the operation does not
// declare or whose integers are not integers.
func checkPath(template string, op map[string]any, path string) error {
	declared := parameters(op, "path")
	for _, p := range description.paths {
		if p.template != template {
			continue
		}
		values := p.re.FindStringSubmatch(path)
		for i, name := range p.names {
			schema, ok := declared[name]
			if !ok {
				return fmt.Errorf("the operation declares no path parameter %q", name)
			}
			v, err := url.PathUnescape(values[i+1])
			if err != nil {
				return fmt.Errorf("path parameter %s=%q: %v", name, values[i+1], err)
			}
			if _, err := strconv.ParseInt(v, 10, 64); schema["type"] == "integer" && err != nil {
				return fmt.Errorf("path parameter %s=%q is not an integer", name, v)
			}
		}
	}
	return nil
}
