package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/hawk"
)

const (
	rootID    = "static/taskcluster/root"
	rootToken = "rootAccessTokenRootAccessToken0123456789abcd"
)

var (
	testNow   = time.UnixMilli(1700000000000)
	farFuture = testNow.AddDate(1000, 0, 0)
)

type fakeClients struct {
	clients map[string]Client
	calls   atomic.Int32
	err     error
}

func (f *fakeClients) Client(_ context.Context, id string) (Client, error) {
	f.calls.Add(1)
	if f.err != nil {
		return Client{}, f.err
	}
	c, ok := f.clients[id]
	if !ok {
		return Client{}, fmt.Errorf("loading %s: %w", id, ErrClientNotFound)
	}
	return c, nil
}

type authBundle struct {
	clients *fakeClients
	now     *time.Time
}

func setupAuth(t testing.TB) (*Authenticator, *authBundle) {
	t.Helper()
	far := farFuture
	clients := &fakeClients{clients: map[string]Client{
		rootID:               {ClientID: rootID, AccessToken: rootToken, Scopes: []string{"*"}, Expires: far},
		"static/hopper/root": {ClientID: "static/hopper/root", AccessToken: rootToken, Scopes: []string{"*"}, Expires: far},
		"tester":             {ClientID: "tester", AccessToken: "no-secret", Scopes: []string{"assume:project:x", "queue:get-task:*"}, Expires: far},
		"limited":            {ClientID: "limited", AccessToken: "limited-token", Scopes: []string{"queue:get-task:*", "auth:create-client:limited/*"}, Expires: far},
		"disabled":           {ClientID: "disabled", AccessToken: "d", Scopes: []string{"*"}, Expires: far, Disabled: true},
		"expired":            {ClientID: "expired", AccessToken: "e", Scopes: []string{"*"}, Expires: testNow.Add(-time.Millisecond)},
		"soon":               {ClientID: "soon", AccessToken: "s", Scopes: []string{"*"}, Expires: testNow.Add(10 * time.Minute)},
	}}
	e, err := NewExpander([]Role{
		{RoleID: AnonymousRole, Scopes: []string{"queue:get-artifact:public/*", "auth:current-scopes"}},
		{RoleID: "project:x", Scopes: []string{"secrets:get:x/*"}},
	})
	require.NoError(t, err)
	now := testNow
	b := &authBundle{clients: clients, now: &now}
	a := NewAuthenticator(AuthenticatorOptions{
		Clients: clients,
		Roles:   StaticExpander{E: e},
		NowFunc: func() time.Time { return *b.now },
	})
	return a, b
}

const statusPath = "/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/status"

func signedRequest(t testing.TB, c Credentials, ext, method, target string, body []byte, contentType string, withHash bool) Request {
	t.Helper()
	hash := ""
	if withHash {
		hash = hawk.PayloadHash(contentType, body)
	}
	header, err := hawk.RequestHeader(hawk.Credentials{ID: c.ClientID, Key: c.AccessToken}, method, "https://tc.example.com"+target, testNow, "", hash, ext)
	require.NoError(t, err)
	return Request{Method: method, RequestURI: target, Host: "tc.example.com", Port: 443, Authorization: header, ContentType: contentType, Body: body}
}

func mustExt(t testing.TB, cert string, authorized []string) string {
	t.Helper()
	ext, err := Ext(cert, authorized)
	require.NoError(t, err)
	return ext
}

func rawExt(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

func anonScopes() []string {
	return []string{"assume:anonymous", "auth:current-scopes", "queue:get-artifact:public/*"}
}

func TestAuthenticateSuccess(t *testing.T) {
	t.Parallel()
	a, _ := setupAuth(t)
	ctx := context.Background()
	root := Credentials{ClientID: rootID, AccessToken: rootToken}
	tester := Credentials{ClientID: "tester", AccessToken: "no-secret"}

	temp, err := CreateTemporaryCredentials(TemporaryCredentialsOptions{
		ClientID: "task-client/abc", Start: testNow, Expiry: testNow.Add(time.Hour),
		Scopes: []string{"queue:create-artifact:abc/0", "secrets:get:x"}, Issuer: root,
	})
	require.NoError(t, err)
	unnamed, err := CreateTemporaryCredentials(TemporaryCredentialsOptions{
		Start: testNow, Expiry: testNow.Add(time.Hour), Scopes: []string{"queue:get-task:abc"}, Issuer: tester,
	})
	require.NoError(t, err)
	emptyTC, err := CreateTemporaryCredentials(TemporaryCredentialsOptions{Start: testNow, Expiry: testNow.Add(time.Hour), Issuer: root})
	require.NoError(t, err)
	// The JS client's empty-scope signature form.
	var jsCert Certificate
	require.NoError(t, json.Unmarshal([]byte(emptyTC.Certificate), &jsCert))
	jsCert.Signature = CertificateSignature(rootToken, SignatureString("", "", jsCert.Seed, fmt.Sprint(jsCert.Start), fmt.Sprint(jsCert.Expiry), nil)+"\n")
	jsCertJSON, err := json.Marshal(jsCert)
	require.NoError(t, err)
	fromSoon, err := CreateTemporaryCredentials(TemporaryCredentialsOptions{
		Start: testNow, Expiry: testNow.Add(time.Hour), Scopes: []string{"a"}, Issuer: Credentials{ClientID: "soon", AccessToken: "s"},
	})
	require.NoError(t, err)

	body := []byte(`{"a":1}`)
	tests := []struct {
		name    string
		req     Request
		want    Result
		checkFn func(t *testing.T, r *Result)
	}{
		{
			name: "anonymous",
			req:  Request{Method: "GET", RequestURI: statusPath},
			want: Result{Scopes: anonScopes(), Expires: testNow.Add(15 * time.Minute), Scheme: SchemeNone},
		},
		{
			name: "permanent client with roles",
			req:  signedRequest(t, tester, "", "GET", statusPath, nil, "", false),
			want: Result{ClientID: "tester", Issuer: "tester", HasCredentials: true, Scheme: SchemeHawk, Expires: farFuture,
				Scopes: []string{"assume:anonymous", "assume:project:x", "auth:current-scopes", "queue:get-artifact:public/*", "queue:get-task:*", "secrets:get:x/*"}},
		},
		{
			name: "root",
			req:  signedRequest(t, root, "", "GET", statusPath+"?x=%2F", nil, "", false),
			want: Result{ClientID: rootID, Issuer: rootID, HasCredentials: true, Scheme: SchemeHawk, Expires: farFuture, Scopes: []string{"*"}},
		},
		{
			name: "payload hash",
			req:  signedRequest(t, tester, "", "PUT", statusPath, body, "application/json; charset=utf-8", true),
			checkFn: func(t *testing.T, r *Result) {
				require.Equal(t, "tester", r.ClientID)
				require.Equal(t, hawk.PayloadHash("application/json", body), r.Hash)
			},
		},
		{
			name: "payload hash ignored for authenticateHawk",
			req: func() Request {
				r := signedRequest(t, tester, "", "PUT", statusPath, body, "application/json", true)
				r.Body = nil
				r.IgnorePayloadHash = true
				return r
			}(),
			checkFn: func(t *testing.T, r *Result) {
				require.Equal(t, hawk.PayloadHash("application/json", body), r.Hash)
			},
		},
		{
			name: "named temporary credentials",
			req:  signedRequest(t, temp, mustExt(t, temp.Certificate, nil), "GET", statusPath, nil, "", false),
			want: Result{ClientID: "task-client/abc", Issuer: rootID, HasCredentials: true, Scheme: SchemeHawk, Expires: testNow.Add(time.Hour),
				Scopes: []string{"assume:anonymous", "auth:current-scopes", "queue:create-artifact:abc/0", "queue:get-artifact:public/*", "secrets:get:x"}},
		},
		{
			name: "unnamed temporary credentials",
			req:  signedRequest(t, unnamed, mustExt(t, unnamed.Certificate, nil), "GET", statusPath, nil, "", false),
			want: Result{ClientID: "tester", Issuer: "tester", HasCredentials: true, Scheme: SchemeHawk, Expires: testNow.Add(time.Hour),
				Scopes: append(anonScopes(), "queue:get-task:abc")},
		},
		{
			name: "empty scopes TC form",
			req:  signedRequest(t, emptyTC, mustExt(t, emptyTC.Certificate, nil), "GET", statusPath, nil, "", false),
			want: Result{ClientID: rootID, Issuer: rootID, HasCredentials: true, Scheme: SchemeHawk, Expires: testNow.Add(time.Hour), Scopes: anonScopes()},
		},
		{
			name: "empty scopes JS form",
			req:  signedRequest(t, emptyTC, mustExt(t, string(jsCertJSON), nil), "GET", statusPath, nil, "", false),
			want: Result{ClientID: rootID, Issuer: rootID, HasCredentials: true, Scheme: SchemeHawk, Expires: testNow.Add(time.Hour), Scopes: anonScopes()},
		},
		{
			name: "client expiry caps certificate expiry",
			req:  signedRequest(t, fromSoon, mustExt(t, fromSoon.Certificate, nil), "GET", statusPath, nil, "", false),
			want: Result{ClientID: "soon", Issuer: "soon", HasCredentials: true, Scheme: SchemeHawk, Expires: testNow.Add(10 * time.Minute), Scopes: append([]string{"a"}, anonScopes()...)},
		},
		{
			name: "authorizedScopes restricts",
			req:  signedRequest(t, root, mustExt(t, "", []string{"queue:get-task:abc"}), "GET", statusPath, nil, "", false),
			want: Result{ClientID: rootID, Issuer: rootID, HasCredentials: true, Scheme: SchemeHawk, Expires: farFuture,
				Scopes: append(anonScopes(), "queue:get-task:abc")},
		},
		{
			name: "authorizedScopes satisfied through the anonymous role",
			req:  signedRequest(t, tester, mustExt(t, "", []string{"queue:get-artifact:public/x"}), "GET", statusPath, nil, "", false),
			checkFn: func(t *testing.T, r *Result) {
				require.Equal(t, []string{"assume:anonymous", "auth:current-scopes", "queue:get-artifact:public/*"}, r.Scopes)
			},
		},
		{
			name: "empty authorizedScopes leaves the anonymous role",
			req:  signedRequest(t, root, mustExt(t, "", []string{}), "GET", statusPath, nil, "", false),
			checkFn: func(t *testing.T, r *Result) {
				require.Equal(t, anonScopes(), r.Scopes)
			},
		},
		{
			name: "certificate and authorizedScopes",
			req:  signedRequest(t, temp, mustExt(t, temp.Certificate, []string{"secrets:get:x"}), "GET", statusPath, nil, "", false),
			checkFn: func(t *testing.T, r *Result) {
				require.Equal(t, append(anonScopes(), "secrets:get:x"), r.Scopes)
				require.Equal(t, "task-client/abc", r.ClientID)
			},
		},
		{
			name: "falsy ext members are ignored",
			req:  signedRequest(t, tester, rawExt(map[string]any{"certificate": nil, "authorizedScopes": false}), "GET", statusPath, nil, "", false),
			checkFn: func(t *testing.T, r *Result) {
				require.Contains(t, r.Scopes, "secrets:get:x/*")
			},
		},
		{
			name: "timestamp at the edge of the skew",
			req: func() Request {
				header, err := hawk.RequestHeader(hawk.Credentials{ID: "tester", Key: "no-secret"}, "GET", "https://tc.example.com"+statusPath, testNow.Add(-900*time.Second), "abcdef", "", "")
				require.NoError(t, err)
				return Request{Method: "GET", RequestURI: statusPath, Host: "tc.example.com", Port: 443, Authorization: header}
			}(),
			checkFn: func(t *testing.T, r *Result) { require.Equal(t, "tester", r.ClientID) },
		},
		{
			name: "bewit parameter with an encoded name is not a bewit",
			req:  Request{Method: "GET", RequestURI: statusPath + "?b%65wit=abc", Host: "tc.example.com", Port: 443},
			want: Result{Scopes: anonScopes(), Expires: testNow.Add(15 * time.Minute), Scheme: SchemeNone},
		},
		{
			name: "empty bewit parameter is anonymous",
			req:  Request{Method: "GET", RequestURI: statusPath + "?bewit=", Host: "tc.example.com", Port: 443},
			want: Result{Scopes: anonScopes(), Expires: testNow.Add(15 * time.Minute), Scheme: SchemeNone},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := a.Authenticate(ctx, tt.req)
			require.NoError(t, err)
			if tt.checkFn != nil {
				tt.checkFn(t, res)
				return
			}
			require.Equal(t, tt.want.Expires.UnixMilli(), res.Expires.UnixMilli())
			tt.want.Expires = res.Expires
			require.Equal(t, tt.want, *res)
		})
	}
}

func TestAuthenticateBewit(t *testing.T) {
	t.Parallel()
	a, _ := setupAuth(t)
	ctx := context.Background()
	sign := func(c Credentials, ext, rawURL string, exp time.Time) Request {
		signed, err := hawk.SignURL(hawk.Credentials{ID: c.ClientID, Key: c.AccessToken}, rawURL, exp, ext)
		require.NoError(t, err)
		u, err := url.Parse(signed)
		require.NoError(t, err)
		return Request{Method: "GET", RequestURI: u.RequestURI(), Host: u.Hostname(), Port: 443}
	}
	artifact := "https://tc.example.com/api/queue/v1/task/abc/runs/0/artifacts/private%2Fx.txt"
	tester := Credentials{ClientID: "tester", AccessToken: "no-secret"}

	res, err := a.Authenticate(ctx, sign(tester, "", artifact+"?a=1", testNow.Add(time.Minute)))
	require.NoError(t, err)
	require.Equal(t, SchemeBewit, res.Scheme)
	require.Equal(t, "tester", res.ClientID)
	require.Contains(t, res.Scopes, "secrets:get:x/*")

	temp, err := CreateTemporaryCredentials(TemporaryCredentialsOptions{
		ClientID: "task-client/abc", Start: testNow, Expiry: testNow.Add(time.Hour),
		Scopes: []string{"queue:get-artifact:private/*"}, Issuer: Credentials{ClientID: rootID, AccessToken: rootToken},
	})
	require.NoError(t, err)
	res, err = a.Authenticate(ctx, sign(temp, mustExt(t, temp.Certificate, []string{"queue:get-artifact:private/x.txt"}), artifact, testNow.Add(time.Minute)))
	require.NoError(t, err)
	require.Equal(t, "task-client/abc", res.ClientID)
	require.Equal(t, Normalize(append(anonScopes(), "queue:get-artifact:private/x.txt")), res.Scopes)

	_, err = a.Authenticate(ctx, sign(tester, "", artifact, testNow))
	requireAuthError(t, err, hawk.MsgAccessExpired)

	req := sign(tester, "", artifact, testNow.Add(time.Minute))
	req.Method = "POST"
	_, err = a.Authenticate(ctx, req)
	requireAuthError(t, err, hawk.MsgInvalidMethod)

	req = sign(tester, "", artifact, testNow.Add(time.Minute))
	req.Authorization = signedRequest(t, tester, "", "GET", statusPath, nil, "", false).Authorization
	_, err = a.Authenticate(ctx, req)
	requireAuthError(t, err, MsgTwoSchemes)

	req = sign(Credentials{ClientID: "tester", AccessToken: "wrong"}, "", artifact, testNow.Add(time.Minute))
	_, err = a.Authenticate(ctx, req)
	requireAuthError(t, err, hawk.MsgBadMAC)

	req = sign(Credentials{ClientID: "ghost", AccessToken: "x"}, "", artifact, testNow.Add(time.Minute))
	_, err = a.Authenticate(ctx, req)
	requireAuthError(t, err, "Client with clientId 'ghost' not found")
}

func requireAuthError(t *testing.T, err error, msg string) {
	t.Helper()
	var aerr *AuthenticationError
	require.ErrorAs(t, err, &aerr)
	require.Equal(t, msg, aerr.Message)
}

// certRequest builds a request whose ext carries cert (any JSON value),
// signed with key under id.
func certRequest(t *testing.T, id, key string, ext map[string]any) Request {
	t.Helper()
	return signedRequest(t, Credentials{ClientID: id, AccessToken: key}, rawExt(ext), "GET", statusPath, nil, "", false)
}

func TestAuthenticateFailures(t *testing.T) {
	t.Parallel()
	a, _ := setupAuth(t)
	ctx := context.Background()
	root := Credentials{ClientID: rootID, AccessToken: rootToken}
	tester := Credentials{ClientID: "tester", AccessToken: "no-secret"}

	named, err := CreateTemporaryCredentials(TemporaryCredentialsOptions{
		ClientID: "task-client/abc", Start: testNow, Expiry: testNow.Add(time.Hour),
		Scopes: []string{"queue:create-artifact:abc/0"}, Issuer: root,
	})
	require.NoError(t, err)
	var cert map[string]any
	require.NoError(t, json.Unmarshal([]byte(named.Certificate), &cert))
	withCert := func(change func(c map[string]any)) map[string]any {
		c := map[string]any{}
		for k, v := range cert {
			c[k] = v
		}
		change(c)
		return map[string]any{"certificate": c}
	}
	// Certificates signed correctly but with unacceptable contents.
	signedCert := func(opts TemporaryCredentialsOptions) (Credentials, map[string]any) {
		c, err := CreateTemporaryCredentials(opts)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(c.Certificate), &m))
		return c, map[string]any{"certificate": m}
	}
	expiredCreds, expiredExt := signedCert(TemporaryCredentialsOptions{Start: testNow.Add(-2 * time.Hour), Expiry: testNow.Add(-5*time.Minute - time.Millisecond), Issuer: root, Scopes: []string{"a"}})
	futureCreds, futureExt := signedCert(TemporaryCredentialsOptions{Start: testNow.Add(5*time.Minute + time.Millisecond), Expiry: testNow.Add(time.Hour), Issuer: root, Scopes: []string{"a"}})
	greedyCreds, greedyExt := signedCert(TemporaryCredentialsOptions{Start: testNow, Expiry: testNow.Add(time.Hour), Issuer: Credentials{ClientID: "limited", AccessToken: "limited-token"}, Scopes: []string{"queue:get-task:x", "secrets:get:y", "queue:*"}})
	namelessCreds, namelessExt := signedCert(TemporaryCredentialsOptions{ClientID: "other/name", Start: testNow, Expiry: testNow.Add(time.Hour), Issuer: Credentials{ClientID: "limited", AccessToken: "limited-token"}, Scopes: []string{"queue:get-task:x"}})
	longCert := withCert(func(c map[string]any) { c["expiry"] = float64(testNow.UnixMilli()) + 31*24*3600*1000 + 1 })

	stale := func(offset time.Duration) Request {
		header, err := hawk.RequestHeader(hawk.Credentials{ID: "tester", Key: "no-secret"}, "GET", "https://tc.example.com"+statusPath, testNow.Add(offset), "abcdef", "", "")
		require.NoError(t, err)
		return Request{Method: "GET", RequestURI: statusPath, Host: "tc.example.com", Port: 443, Authorization: header}
	}
	good := signedRequest(t, tester, "", "GET", statusPath, nil, "", false)
	alter := func(change func(r *Request)) Request {
		r := good
		change(&r)
		return r
	}
	hashed := signedRequest(t, tester, "", "POST", statusPath, []byte(`{"a":1}`), "application/json", true)

	tests := []struct {
		name string
		req  Request
		msg  string
	}{
		{"wrong key", signedRequest(t, Credentials{ClientID: "tester", AccessToken: "wrong"}, "", "GET", statusPath, nil, "", false), hawk.MsgBadMAC},
		{"stale past", stale(-901 * time.Second), hawk.MsgStaleTimestamp},
		{"stale future", stale(901 * time.Second), hawk.MsgStaleTimestamp},
		{"altered method", alter(func(r *Request) { r.Method = "DELETE" }), hawk.MsgBadMAC},
		{"altered path", alter(func(r *Request) { r.RequestURI = statusPath + "x" }), hawk.MsgBadMAC},
		{"decoded path", signedRequestDecoded(t, tester), hawk.MsgBadMAC},
		{"altered host", alter(func(r *Request) { r.Host = "evil.example.com" }), hawk.MsgBadMAC},
		{"altered port", alter(func(r *Request) { r.Port = 8443 }), hawk.MsgBadMAC},
		{"altered payload", func() Request { r := hashed; r.Body = []byte(`{"a":2}`); return r }(), "Invalid payload hash: " + hawk.PayloadHash("application/json", []byte(`{"a":1}`)) + "\nComputed payload hash: " + hawk.PayloadHash("application/json", []byte(`{"a":2}`)) + "\nThe request signed a payload hash that differs from the hash of the body the server received."},
		{"altered content type", func() Request { r := hashed; r.ContentType = "text/plain"; return r }(), ""},
		{"not found", signedRequest(t, Credentials{ClientID: "ghost", AccessToken: "x"}, "", "GET", statusPath, nil, "", false), "Client with clientId 'ghost' not found"},
		{"disabled", signedRequest(t, Credentials{ClientID: "disabled", AccessToken: "d"}, "", "GET", statusPath, nil, "", false), "Client with clientId 'disabled' is disabled"},
		{"expired client", signedRequest(t, Credentials{ClientID: "expired", AccessToken: "e"}, "", "GET", statusPath, nil, "", false), "Client with clientId: 'expired' has expired"},
		{"basic scheme", alter(func(r *Request) { r.Authorization = "Basic dGVzdGVyOm5vLXNlY3JldA==" }), hawk.MsgUnauthorized},
		{"missing attributes", alter(func(r *Request) { r.Authorization = `Hawk id="tester", ts="1700000000", nonce="abcdef"` }), hawk.MsgMissingAttributes},
		{"header too long", alter(func(r *Request) { r.Authorization = `Hawk id="tester", ext="` + strings.Repeat("a", 4100) + `"` }), hawk.MsgHeaderTooLong},
		{"bad ext base64 json", signedRequest(t, tester, "bm90IGpzb24=", "GET", statusPath, nil, "", false), "Failed to parse ext"},
		{"ext null", signedRequest(t, tester, base64.StdEncoding.EncodeToString([]byte("null")), "GET", statusPath, nil, "", false), "Cannot read properties of null (reading 'certificate')"},
		{"ext errors precede the mac", certRequest(t, "tester", "wrong-key", map[string]any{"authorizedScopes": "x"}), "ext.authorizedScopes must be an array"},
		{"authorizedScopes invalid", certRequest(t, "tester", "no-secret", map[string]any{"authorizedScopes": []any{"a\tb"}}), "ext.authorizedScopes must be an array of valid scopes"},
		{"authorizedScopes beyond the client", signedRequest(t, tester, mustExt(t, "", []string{"queue:get-task:x", "secrets:get:y"}), "GET", statusPath, nil, "", false),
			"Supplied credentials do not satisfy authorizedScopes; credentials have scopes:\n\n```\nassume:anonymous\nassume:project:x\nauth:current-scopes\nqueue:get-artifact:public/*\nqueue:get-task:*\nsecrets:get:x/*\n```\n\nauthorizedScopes are:\n\n```\nqueue:get-task:x\nsecrets:get:y\n```"},
		{"certificate without ext key issuer check: permanent token", signedRequest(t, Credentials{ClientID: "task-client/abc", AccessToken: rootToken}, mustExt(t, named.Certificate, nil), "GET", statusPath, nil, "", false), hawk.MsgBadMAC},
		{"certificate omitted", signedRequest(t, named, "", "GET", statusPath, nil, "", false), "Client with clientId 'task-client/abc' not found"},
		{"certificate not an object", certRequest(t, rootID, rootToken, map[string]any{"certificate": "x"}), "ext.certificate must be a JSON object"},
		{"client lookup precedes certificate checks", certRequest(t, named.ClientID, named.AccessToken, map[string]any{"certificate": "x"}), "Client with clientId 'task-client/abc' not found"},
		{"certificate array is an object without fields", certRequest(t, rootID, rootToken, map[string]any{"certificate": []any{1}}), "ext.certificate.version must be 1"},
		{"certificate array", certRequest(t, named.ClientID, named.AccessToken, map[string]any{"certificate": []any{1}}), "Client with clientId 'task-client/abc' not found"},
		{"issuer not a string", certRequest(t, named.ClientID, named.AccessToken, withCert(func(c map[string]any) { c["issuer"] = 5 })), "ext.certificate.issuer must be a string"},
		{"issuer equals id", certRequest(t, rootID, named.AccessToken, withCert(func(c map[string]any) {})), "ext.certificate.issuer must differ from the supplied clientId"},
		{"issuer unknown", certRequest(t, named.ClientID, named.AccessToken, withCert(func(c map[string]any) { c["issuer"] = "ghost" })), "Client with clientId 'ghost' not found"},
		{"version", certRequest(t, named.ClientID, named.AccessToken, withCert(func(c map[string]any) { c["version"] = 2 })), "ext.certificate.version must be 1"},
		{"version string", certRequest(t, named.ClientID, named.AccessToken, withCert(func(c map[string]any) { c["version"] = "1" })), "ext.certificate.version must be 1"},
		{"seed type", certRequest(t, named.ClientID, named.AccessToken, withCert(func(c map[string]any) { c["seed"] = 5 })), "ext.certificate.seed must be a string"},
		{"seed length", certRequest(t, named.ClientID, named.AccessToken, withCert(func(c map[string]any) { c["seed"] = "abc" })), "ext.certificate.seed must be 44 characters"},
		{"start type", certRequest(t, named.ClientID, named.AccessToken, withCert(func(c map[string]any) { c["start"] = "now" })), "ext.certificate.start must be a number"},
		{"expiry type", certRequest(t, named.ClientID, named.AccessToken, withCert(func(c map[string]any) { delete(c, "expiry") })), "ext.certificate.expiry must be a number"},
		{"scopes type", certRequest(t, named.ClientID, named.AccessToken, withCert(func(c map[string]any) { c["scopes"] = "a" })), "ext.certificate.scopes must be an array"},
		{"scopes invalid", certRequest(t, named.ClientID, named.AccessToken, withCert(func(c map[string]any) { c["scopes"] = []any{"a", 5} })), "ext.certificate.scopes must be an array of valid scopes"},
		{"start in the future", signedRequest(t, futureCreds, rawExt(futureExt), "GET", statusPath, nil, "", false), "ext.certificate.start > now"},
		{"expired certificate", signedRequest(t, expiredCreds, rawExt(expiredExt), "GET", statusPath, nil, "", false), "ext.certificate.expiry < now"},
		{"too long", certRequest(t, named.ClientID, named.AccessToken, longCert), "ext.certificate cannot last longer than 31 days!"},
		{"named without create-client", signedRequest(t, namelessCreds, rawExt(namelessExt), "GET", statusPath, nil, "", false), "ext.certificate issuer `limited` doesn't have `auth:create-client:other/name` for supplied clientId."},
		{"clientId in unnamed certificate", certRequest(t, rootID, named.AccessToken, withCert(func(c map[string]any) { delete(c, "issuer"); c["clientId"] = "x" })), "ext.certificate.clientId must only be used with ext.certificate.issuer"},
		{"certificate grants more than its issuer", signedRequest(t, greedyCreds, rawExt(greedyExt), "GET", statusPath, nil, "", false), "ext.certificate issuer `limited` doesn't satisfy all certificate scopes queue:get-task:x, secrets:get:y, queue:*.  The temporary credentials were not generated correctly."},
		{"tampered scopes", certRequest(t, named.ClientID, named.AccessToken, withCert(func(c map[string]any) { c["scopes"] = []any{"queue:create-artifact:abc/1"} })), "ext.certificate.signature is not valid, or wrong clientId provided"},
		{"tampered expiry", certRequest(t, named.ClientID, named.AccessToken, withCert(func(c map[string]any) { c["expiry"] = cert["expiry"].(float64) + 1 })), "ext.certificate.signature is not valid, or wrong clientId provided"},
		{"wrong name", certRequest(t, "task-client/abd", named.AccessToken, withCert(func(c map[string]any) {})), "ext.certificate.signature is not valid, or wrong clientId provided"},
		{"unnamed tampered", certRequest(t, rootID, named.AccessToken, withCert(func(c map[string]any) { delete(c, "issuer") })), "ext.certificate.signature is not valid"},
		{"signature not a string", certRequest(t, named.ClientID, named.AccessToken, withCert(func(c map[string]any) { c["signature"] = 5 })), "ext.certificate.signature is not valid, or wrong clientId provided"},
		{"derived key required", certRequest(t, named.ClientID, "wrong", withCert(func(c map[string]any) {})), hawk.MsgBadMAC},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := a.Authenticate(ctx, tt.req)
			require.Nil(t, res)
			var aerr *AuthenticationError
			require.ErrorAs(t, err, &aerr)
			if tt.msg == "" {
				require.True(t, strings.HasPrefix(aerr.Message, hawk.MsgInvalidPayloadHashPrefix), aerr.Message)
				return
			}
			require.Equal(t, tt.msg, aerr.Message)
		})
	}
}

func signedRequestDecoded(t *testing.T, c Credentials) Request {
	t.Helper()
	r := signedRequest(t, c, "", "GET", "/api/queue/v1/task/abc/artifacts/public%2Fa", nil, "", false)
	r.RequestURI = "/api/queue/v1/task/abc/artifacts/public/a"
	return r
}

func TestAuthenticateInternalErrors(t *testing.T) {
	t.Parallel()
	a, b := setupAuth(t)
	b.clients.err = errors.New("database down")
	_, err := a.Authenticate(context.Background(), signedRequest(t, Credentials{ClientID: "tester", AccessToken: "no-secret"}, "", "GET", statusPath, nil, "", false))
	require.Error(t, err)
	var aerr *AuthenticationError
	require.False(t, errors.As(err, &aerr), "storage failures are not authentication failures")
	require.ErrorContains(t, err, "database down")

	failing := NewAuthenticator(AuthenticatorOptions{Clients: b.clients, Roles: failingRoles{}})
	_, err = failing.Authenticate(context.Background(), Request{Method: "GET", RequestURI: "/"})
	require.ErrorContains(t, err, "roles unavailable")
}

type failingRoles struct{}

func (failingRoles) Expander(context.Context) (*Expander, error) {
	return nil, errors.New("roles unavailable")
}

func TestSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("lazy and once", func(t *testing.T) {
		t.Parallel()
		a, b := setupAuth(t)
		s := a.Session(signedRequest(t, Credentials{ClientID: "tester", AccessToken: "wrong"}, "", "GET", statusPath, nil, "", false))
		// A template rendering to nothing never authenticates.
		require.NoError(t, s.AuthorizeTemplate(ctx, MustParseTemplate(`{"if": "public", "then": "x"}`), map[string]any{"public": false}))
		require.Zero(t, b.clients.calls.Load())
		err := s.AuthorizeTemplate(ctx, MustParseTemplate(`"queue:status:<taskId>"`), map[string]any{"taskId": "abc"})
		requireAuthError(t, err, hawk.MsgBadMAC)
		_, err = s.Result(ctx)
		requireAuthError(t, err, hawk.MsgBadMAC)
		require.Equal(t, int32(1), b.clients.calls.Load())
	})

	t.Run("insufficient scopes with credentials", func(t *testing.T) {
		t.Parallel()
		a, _ := setupAuth(t)
		s := a.Session(signedRequest(t, Credentials{ClientID: "tester", AccessToken: "no-secret"}, "", "GET", statusPath, nil, "", false))
		tmpl := MustParseTemplate(`{"AllOf": [{"for": "name", "in": "names", "each": "queue:get-artifact:<name>"}]}`)
		require.NoError(t, s.AuthorizeTemplate(ctx, tmpl, map[string]any{"names": []string{"public/a"}}))
		err := s.AuthorizeTemplate(ctx, tmpl, map[string]any{"names": []string{"private/build.log"}})
		var ierr *InsufficientScopesError
		require.ErrorAs(t, err, &ierr)
		require.Equal(t, "Client ID tester does not have sufficient scopes and is missing the following scopes:\n\n```\nqueue:get-artifact:private/build.log\n```\n\nThis request requires the client to satisfy the following scope expression:\n\n```\n{\n  \"AllOf\": [\n    \"queue:get-artifact:private/build.log\"\n  ]\n}\n```", err.Error())
		_, _, err = tmpl.Render(map[string]any{"names": "x"})
		require.Error(t, err)
		require.Error(t, s.AuthorizeTemplate(ctx, tmpl, map[string]any{"names": "x"}))
	})

	t.Run("anonymous", func(t *testing.T) {
		t.Parallel()
		a, _ := setupAuth(t)
		s := a.Session(Request{Method: "GET", RequestURI: statusPath})
		require.NoError(t, s.Authorize(ctx, Scope("queue:get-artifact:public/x")))
		err := s.Authorize(ctx, Scope("queue:status:abc"))
		var ierr *InsufficientScopesError
		require.ErrorAs(t, err, &ierr)
		require.Equal(t, "This request requires Taskcluster credentials that satisfy the following scope expression:\n\n```\nqueue:status:abc\n```", err.Error())
	})
}

func TestRequestFromHTTP(t *testing.T) {
	t.Parallel()
	a, _ := setupAuth(t)
	ctx := context.Background()
	target := "/api/queue/v1/task/abc/artifacts/public%2Fa?x=1"
	header, err := hawk.RequestHeader(hawk.Credentials{ID: "tester", Key: "no-secret"}, "GET", "https://tc.example.com"+target, testNow, "", "", "")
	require.NoError(t, err)

	r := httptest.NewRequest("GET", "http://internal:8080"+target, nil)
	r.Header.Set("Authorization", header)
	r.Header.Set("X-Forwarded-Proto", "https")
	// Servers see the origin form of the target.
	r.RequestURI = target
	r.Host = "tc.example.com"
	req := RequestFromHTTP(r, nil)
	require.Equal(t, target, req.RequestURI)
	require.Equal(t, 443, req.Port)
	res, err := a.Authenticate(ctx, req)
	require.NoError(t, err)
	require.Equal(t, "tester", res.ClientID)

	r.Host = "bad/host"
	_, err = a.Authenticate(ctx, RequestFromHTTP(r, nil))
	requireAuthError(t, err, hawk.MsgInvalidHost)
	r.Header.Del("Authorization")
	res, err = a.Authenticate(ctx, RequestFromHTTP(r, nil))
	require.NoError(t, err, "a bad host only matters with credentials")
	require.False(t, res.HasCredentials)
}

// clientVectors are requests as taskcluster-client sent them
// (testdata/hawk.json, "clientRequests" and "signedUrls").
type clientVectors struct {
	ClientRequests []struct {
		Name, ClientID, AccessToken, Certificate, Ext, Method, Resource, Host, Authorization, ContentType, Body string
		AuthorizedScopes                                                                                        []string
		Port                                                                                                    int
		NowMs                                                                                                   int64
	}
	SignedURLs []struct {
		Name, ClientID, SignedURL string
		NowMs                     int64
	} `json:"signedUrls"`
}

func TestVectorClientRequestsAuthenticate(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/hawk.json")
	require.NoError(t, err)
	var v clientVectors
	require.NoError(t, json.Unmarshal(raw, &v))
	require.NotEmpty(t, v.ClientRequests)
	a, b := setupAuth(t)
	*b.now = time.UnixMilli(v.ClientRequests[0].NowMs)
	ctx := context.Background()
	for _, tc := range v.ClientRequests {
		res, err := a.Authenticate(ctx, Request{
			Method: tc.Method, RequestURI: tc.Resource, Host: tc.Host, Port: tc.Port,
			Authorization: tc.Authorization, ContentType: tc.ContentType, Body: []byte(tc.Body),
		})
		require.NoError(t, err, tc.Name)
		require.Equal(t, tc.ClientID, res.ClientID, tc.Name)
		switch {
		case tc.AuthorizedScopes != nil:
			require.Equal(t, Normalize(append(anonScopes(), tc.AuthorizedScopes...)), res.Scopes, tc.Name)
		case tc.Certificate != "":
			require.Contains(t, res.Scopes, "queue:create-artifact:abc/0", tc.Name)
			require.NotContains(t, res.Scopes, "*", tc.Name)
		default:
			require.Equal(t, []string{"*"}, res.Scopes, tc.Name)
		}
	}
	for _, tc := range v.SignedURLs {
		u, err := url.Parse(tc.SignedURL)
		require.NoError(t, err)
		res, err := a.Authenticate(ctx, Request{Method: "GET", RequestURI: u.RequestURI(), Host: u.Hostname(), Port: 443})
		require.NoError(t, err, tc.Name)
		require.Equal(t, SchemeBewit, res.Scheme)
		require.Equal(t, tc.ClientID, res.ClientID, tc.Name)
	}
}

// TestSpecH4 authenticates vector H4 (temporary credentials of T3).
func TestSpecH4(t *testing.T) {
	t.Parallel()
	a, _ := setupAuth(t)
	ext := "eyJjZXJ0aWZpY2F0ZSI6eyJ2ZXJzaW9uIjoxLCJzY29wZXMiOlsicXVldWU6Y3JlYXRlLWFydGlmYWN0OmFiYy8wIiwic2VjcmV0czpnZXQ6eCJdLCJzdGFydCI6MTcwMDAwMDAwMDAwMCwiZXhwaXJ5IjoxNzAwMDAzNjAwMDAwLCJzZWVkIjoiYWFhYWFhYWFRYWFhYWFhYWFhYWFhUWJiYmJiYmJiUWJiYmJiYmJiYmJiYlEiLCJzaWduYXR1cmUiOiI5UnlScWFwdGNQblJHcjI0UXpNMS80Vk1Xak1TOVB5WFV5R1hNcDlOOWhBPSIsImlzc3VlciI6InN0YXRpYy9ob3BwZXIvcm9vdCJ9fQ=="
	header := `Hawk id="task-client/abc", ts="1700000000", nonce="Xa1b2C", ext="` + ext + `", mac="GBdSJBpzuT0HtALKnMow90m2b3wd9++cYA0F4O9G9L4="`
	res, err := a.Authenticate(context.Background(), Request{Method: "GET", RequestURI: statusPath, Host: "tc.example.com", Port: 443, Authorization: header})
	require.NoError(t, err)
	require.Equal(t, "task-client/abc", res.ClientID)
	require.Equal(t, time.UnixMilli(1700003600000).UnixMilli(), res.Expires.UnixMilli())
	require.Equal(t, Normalize(append(anonScopes(), "queue:create-artifact:abc/0", "secrets:get:x")), res.Scopes)
}

func TestNodeBase64Decode(t *testing.T) {
	t.Parallel()
	// Expectations recorded from Node's Buffer.from(s, "base64").
	tests := map[string]string{
		"YWJj": "abc", "YWJ": "ab", "YW": "a", "Y": "", "YWJj ZGVm": "abcdef", "YW$Jj": "abc",
		"YQ==YQ==": "a", "YQ=YQ": "a", "YWJj-_8": "abc\xfb\xff", "YWJj+/8=": "abc\xfb\xff",
		"=YWJj": "", "YW=Jj": "a", "Y=WJj": "", "YWJjZA": "abcd", "YWJjZ": "abc", "€YWJj": "abc",
	}
	for in, want := range tests {
		require.Equal(t, want, string(nodeBase64Decode(in)), "%q", in)
	}
}
