package authapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/hawk"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

func TestExpandScopes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	roles := map[string][]string{
		"group:admins":    {"admin-scope-1", "admin-scope-2", "assume:group:devs"},
		"group:devs":      {"dev-scope"},
		"project-admin:*": {"auth:create-role:project-<..>/*", "secrets:get:project/<..>/*", "plain-scope"},
	}
	for id, scopes := range roles {
		_, err := b.root.CreateRole(ctx, id, &tcclient.RoleRequest{Scopes: scopes, Description: id})
		require.NoError(t, err)
	}
	// Vectors from the auth spec §3.10; expandScopes adds no anonymous role.
	tests := []struct {
		in, want []string
	}{
		{[]string{"assume:group:admins", "my-scope"}, []string{"admin-scope-1", "admin-scope-2", "assume:group:admins", "assume:group:devs", "dev-scope", "my-scope"}},
		{[]string{"assume:group:dev*"}, []string{"assume:group:dev*", "dev-scope"}},
		{[]string{"assume:group:devsX"}, []string{"assume:group:devsX"}},
		{[]string{"assume:project-admin:zap"}, []string{"assume:project-admin:zap", "auth:create-role:project-zap/*", "plain-scope", "secrets:get:project/zap/*"}},
		{[]string{"assume:project-admin:ops*"}, []string{"assume:project-admin:ops*", "auth:create-role:project-ops*", "plain-scope", "secrets:get:project/ops*"}},
		{[]string{}, []string{}},
	}
	for _, tt := range tests {
		got, err := b.root.ExpandScopes(ctx, tt.in)
		require.NoError(t, err)
		require.Equal(t, tt.want, got, "expand(%v)", tt.in)
	}

	// The default anonymous role lets anyone expand.
	got, err := b.anonymous().ExpandScopes(ctx, []string{"assume:group:devs"})
	require.NoError(t, err)
	require.Equal(t, []string{"assume:group:devs", "dev-scope"}, got)
}

func TestCurrentScopes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	scopes, err := b.root.CurrentScopes(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"*"}, scopes)

	// Without credentials: what the anonymous role grants.
	scopes, err = b.anonymous().CurrentScopes(ctx)
	require.NoError(t, err)
	require.Contains(t, scopes, "assume:anonymous")
	require.Contains(t, scopes, "queue:get-task:*")
	require.NotContains(t, scopes, "*")

	// authorizedScopes restrict, but the anonymous role is always added.
	restricted := b.as(server.RootClientID, rootToken)
	restricted.AuthorizedScopes = []string{"queue:create-task:highest:p/w"}
	scopes, err = restricted.CurrentScopes(ctx)
	require.NoError(t, err)
	require.Contains(t, scopes, "queue:create-task:highest:p/w")
	require.Contains(t, scopes, "auth:current-scopes")
	require.NotContains(t, scopes, "*")

	// Temporary credentials carry exactly their certificate's scopes.
	worker := b.newClient(t, "worker", "queue:claim-work:p/w", "queue:worker-id:g/*")
	temp, err := auth.CreateTemporaryCredentials(auth.TemporaryCredentialsOptions{
		Start: time.Now(), Expiry: time.Now().Add(time.Hour), Scopes: []string{"queue:worker-id:g/one"},
		Issuer: auth.Credentials{ClientID: "worker", AccessToken: worker.AccessToken},
	})
	require.NoError(t, err)
	tc := &tcclient.Client{RootURL: b.url, MaxRetries: -1, Credentials: &tcclient.Credentials{
		ClientID: temp.ClientID, AccessToken: temp.AccessToken, Certificate: temp.Certificate}}
	scopes, err = tc.CurrentScopes(ctx)
	require.NoError(t, err)
	require.Contains(t, scopes, "queue:worker-id:g/one")
	require.NotContains(t, scopes, "queue:claim-work:p/w")
}

func TestTestAuthenticate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	tester := &tcclient.Credentials{ClientID: "tester", AccessToken: "no-secret"}
	tempFromTester := func(t *testing.T, name string, scopes ...string) *tcclient.Credentials {
		t.Helper()
		c, err := auth.CreateTemporaryCredentials(auth.TemporaryCredentialsOptions{
			ClientID: name, Start: time.Now(), Expiry: time.Now().Add(time.Hour), Scopes: scopes,
			Issuer: auth.Credentials{ClientID: "tester", AccessToken: "no-secret"},
		})
		require.NoError(t, err)
		return &tcclient.Credentials{ClientID: c.ClientID, AccessToken: c.AccessToken, Certificate: c.Certificate}
	}
	tests := []struct {
		name       string
		creds      *tcclient.Credentials
		authorized []string
		client     []string
		required   []string
		wantID     string
		want       []string
		status     int
		msg        string
	}{
		{name: "plain", creds: tester, client: []string{"test-scope:test"}, required: []string{"test-scope:test"},
			wantID: "tester", want: []string{"assume:anonymous", "test-scope:test"}},
		{name: "star", creds: tester, client: []string{"test-scope:*"}, required: []string{"test-scope:test"},
			wantID: "tester", want: []string{"assume:anonymous", "test-scope:*"}},
		{name: "nothing required", creds: tester, client: []string{}, required: []string{},
			wantID: "tester", want: []string{"assume:anonymous"}},
		{name: "unmet", creds: tester, client: []string{"test-scope:test"}, required: []string{"other"},
			status: http.StatusForbidden, msg: "Client ID tester does not have sufficient scopes"},
		{name: "roles are not expanded", creds: tester, client: []string{}, required: []string{"queue:get-task:x"},
			status: http.StatusForbidden, msg: "queue:get-task:x"},
		{name: "unknown client", creds: &tcclient.Credentials{ClientID: "nobody", AccessToken: "no-secret"}, required: []string{},
			status: http.StatusUnauthorized, msg: "Client with clientId 'nobody' not found"},
		{name: "wrong token", creds: &tcclient.Credentials{ClientID: "tester", AccessToken: "wrong"}, required: []string{},
			status: http.StatusUnauthorized, msg: "Bad mac"},
		{name: "authorizedScopes", creds: tester, authorized: []string{"test:a"}, client: []string{"test:*"}, required: []string{"test:a"},
			wantID: "tester", want: []string{"assume:anonymous", "test:a"}},
		{name: "authorizedScopes restrict", creds: tester, authorized: []string{"test:a"}, client: []string{"test:*"}, required: []string{"test:b"},
			status: http.StatusForbidden, msg: "test:b"},
		{name: "authorizedScopes beyond the client", creds: tester, authorized: []string{"other:x"}, client: []string{"test:*"}, required: []string{},
			status: http.StatusUnauthorized, msg: "Supplied credentials do not satisfy authorizedScopes"},
		{name: "unnamed temporary", creds: tempFromTester(t, "", "test:a"), client: []string{"test:*"}, required: []string{"test:a"},
			wantID: "tester", want: []string{"assume:anonymous", "test:a"}},
		{name: "named temporary", creds: tempFromTester(t, "test:named", "test:a"), client: []string{"test:*", "auth:create-client:test:*"}, required: []string{"test:a"},
			wantID: "test:named", want: []string{"assume:anonymous", "test:a"}},
		{name: "named temporary without create-client", creds: tempFromTester(t, "elsewhere", "test:a"), client: []string{"test:*"}, required: []string{},
			status: http.StatusUnauthorized, msg: "doesn't have `auth:create-client:elsewhere`"},
		{name: "temporary beyond the issuer", creds: tempFromTester(t, "", "test:a", "other"), client: []string{"test:*"}, required: []string{},
			status: http.StatusUnauthorized, msg: "doesn't satisfy all certificate scopes"},
		{name: "anonymous", required: []string{},
			wantID: "auth-failed:no-auth", want: []string{"assume:anonymous"}},
		{name: "anonymous lacking", required: []string{"test:a"},
			status: http.StatusForbidden, msg: "This request requires Taskcluster credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &tcclient.Client{RootURL: b.url, MaxRetries: -1, Credentials: tt.creds, AuthorizedScopes: tt.authorized}
			got, err := c.TestAuthenticate(ctx, &tcclient.TestAuthenticateRequest{ClientScopes: tt.client, RequiredScopes: tt.required})
			if tt.status != 0 {
				code := map[int]string{http.StatusUnauthorized: "AuthenticationFailed", http.StatusForbidden: "InsufficientScopes"}[tt.status]
				requireAPIError(t, err, tt.status, code, tt.msg)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantID, got.ClientID)
			require.Equal(t, tt.want, got.Scopes)
		})
	}
}

func TestTestAuthenticateGet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.as("tester", "no-secret")

	got, err := c.TestAuthenticateGet(ctx)
	require.NoError(t, err)
	require.Equal(t, "tester", got.ClientID)
	require.Equal(t, []string{"assume:anonymous", "auth:create-client:test:*", "test:*"}, got.Scopes)

	c.AuthorizedScopes = []string{"test:authenticate-get"}
	got, err = c.TestAuthenticateGet(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"assume:anonymous", "test:authenticate-get"}, got.Scopes)
	c.AuthorizedScopes = []string{"test:other"}
	_, err = c.TestAuthenticateGet(ctx)
	requireAPIError(t, err, http.StatusForbidden, "InsufficientScopes", "test:authenticate-get")
	c.AuthorizedScopes = nil

	// Signed URLs (bewits) work until they expire.
	signed, err := c.SignedURL(c.AuthBaseURL()+"/test-authenticate-get/", 10*time.Minute)
	require.NoError(t, err)
	r := get(t, signed)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Contains(t, string(r.body), `"clientId":"tester"`)
	expired, err := c.SignedURL(c.AuthBaseURL()+"/test-authenticate-get/", -time.Minute)
	require.NoError(t, err)
	r = get(t, expired)
	require.Equal(t, http.StatusUnauthorized, r.status, "%s", r.body)
	require.Equal(t, "hawk", r.header.Get("WWW-Authenticate"))
	require.Contains(t, string(r.body), "Access expired")

	_, err = b.root.TestAuthenticateGet(ctx)
	requireAPIError(t, err, http.StatusUnauthorized, "AuthenticationFailed", "Client with clientId 'static/taskcluster/root' not found")
}

func TestAuthenticateHawk(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const target = "https://tc.example.com/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/status"
	rootCreds := hawk.Credentials{ID: server.RootClientID, Key: rootToken}
	header := func(t *testing.T, c hawk.Credentials, method, hash string) string {
		t.Helper()
		h, err := hawk.RequestHeader(c, method, target, time.Now(), "", hash, "")
		require.NoError(t, err)
		return h
	}
	bewitURL, err := hawk.SignURL(rootCreds, target, time.Now().Add(time.Minute), "")
	require.NoError(t, err)
	bewitTarget, err := url.Parse(bewitURL)
	require.NoError(t, err)
	hash := hawk.PayloadHash("application/json", []byte(`{"a":1}`))

	tests := []struct {
		name     string
		req      tcclient.AuthenticateHawkRequest
		status   string
		scheme   string
		clientID string
		scopes   []string
		hash     string
		message  string
	}{
		{name: "header", req: tcclient.AuthenticateHawkRequest{Method: "get", Resource: "/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/status",
			Host: "tc.example.com", Port: 443, Authorization: header(t, rootCreds, "GET", "")},
			status: "auth-success", scheme: "hawk", clientID: server.RootClientID, scopes: []string{"*"}},
		{name: "signed hash is reported", req: tcclient.AuthenticateHawkRequest{Method: "put", Resource: "/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/status",
			Host: "tc.example.com", Port: 443, Authorization: header(t, rootCreds, "PUT", hash)},
			status: "auth-success", scheme: "hawk", clientID: server.RootClientID, scopes: []string{"*"}, hash: hash},
		{name: "wrong port", req: tcclient.AuthenticateHawkRequest{Method: "get", Resource: "/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/status",
			Host: "tc.example.com", Port: 80, Authorization: header(t, rootCreds, "GET", "")},
			status: "auth-failed", message: "Unauthorized: Bad mac"},
		{name: "wrong key", req: tcclient.AuthenticateHawkRequest{Method: "get", Resource: "/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/status",
			Host: "tc.example.com", Port: 443, Authorization: header(t, hawk.Credentials{ID: server.RootClientID, Key: "nope"}, "GET", "")},
			status: "auth-failed", message: "Unauthorized: Bad mac"},
		{name: "bewit", req: tcclient.AuthenticateHawkRequest{Method: "get", Resource: bewitTarget.RequestURI(), Host: "tc.example.com", Port: 443},
			status: "auth-success", scheme: "hawk", clientID: server.RootClientID, scopes: []string{"*"}},
		{name: "no credentials", req: tcclient.AuthenticateHawkRequest{Method: "get", Resource: "/x", Host: "tc.example.com", Port: 443},
			status: "no-auth", scheme: "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// The endpoint needs no scopes: anyone may ask.
			got, err := b.anonymous().AuthenticateHawk(ctx, &tt.req)
			require.NoError(t, err)
			require.Equal(t, tt.status, got.Status, "%+v", got)
			require.Equal(t, tt.scheme, got.Scheme)
			require.Equal(t, tt.clientID, got.ClientID)
			require.Equal(t, tt.hash, got.Hash)
			require.Equal(t, tt.message, got.Message)
			switch tt.status {
			case "auth-success":
				require.Equal(t, tt.scopes, got.Scopes)
				require.True(t, got.Expires.After(time.Now().Add(365*24*time.Hour)), "root never expires in practice")
			case "no-auth":
				require.Contains(t, got.Scopes, "queue:get-task:*")
				require.WithinDuration(t, time.Now().Add(15*time.Minute), got.Expires.Time, time.Minute)
			}
		})
	}
}

func TestPing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, path := range []string{"/api/auth/v1/ping", "/api/auth/v1/__heartbeat__", "/api/auth/v1/__lbheartbeat__"} {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, b.url+path, nil)
		require.NoError(t, err)
		// Endpoints without scopes ignore even broken credentials.
		req.Header.Set("Authorization", `Hawk id="x", ts="1", nonce="n", mac="broken"`)
		r := do(t, req)
		require.Equal(t, http.StatusOK, r.status, "%s: %s", path, r.body)
		if strings.HasSuffix(path, "/ping") {
			var body map[string]any
			require.NoError(t, json.Unmarshal(r.body, &body))
			require.Equal(t, true, body["alive"])
		}
	}
}

// TestNoSecretsInLogs runs every path that handles a secret and checks
// that none reaches the server's log.
func TestNoSecretsInLogs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	secrets := []string{rootToken}

	created := b.newClient(t, "logged/client", "auth:create-client:logged/*", "test:*")
	secrets = append(secrets, created.AccessToken)
	again, err := b.root.CreateClient(ctx, "logged/client", &tcclient.ClientRequest{
		Expires: created.Expires, Description: created.Description, Scopes: created.Scopes})
	require.NoError(t, err)
	require.Equal(t, created.AccessToken, again.AccessToken)
	reset, err := b.root.ResetAccessToken(ctx, "logged/client")
	require.NoError(t, err)
	secrets = append(secrets, reset.AccessToken)

	temp, err := auth.CreateTemporaryCredentials(auth.TemporaryCredentialsOptions{
		ClientID: "logged/temp", Start: time.Now(), Expiry: time.Now().Add(time.Hour), Scopes: []string{"test:x"},
		Issuer: auth.Credentials{ClientID: "logged/client", AccessToken: reset.AccessToken},
	})
	require.NoError(t, err)
	var cert auth.Certificate
	require.NoError(t, json.Unmarshal([]byte(temp.Certificate), &cert))
	secrets = append(secrets, temp.AccessToken, cert.Signature)
	tc := &tcclient.Client{RootURL: b.url, MaxRetries: -1, Credentials: &tcclient.Credentials{
		ClientID: temp.ClientID, AccessToken: temp.AccessToken, Certificate: temp.Certificate}}
	_, err = tc.CurrentScopes(ctx)
	require.NoError(t, err)

	// Failures: the token replaced by the reset, a forged certificate, and
	// a failed authenticateHawk on another service's behalf.
	_, err = b.as("logged/client", created.AccessToken).CurrentScopes(ctx)
	require.Error(t, err)
	forged := strings.Replace(temp.Certificate, cert.Signature, "AAAA"+cert.Signature[4:], 1)
	tc.Credentials.Certificate = forged
	_, err = tc.CurrentScopes(ctx)
	requireAPIError(t, err, http.StatusUnauthorized, "AuthenticationFailed", "ext.certificate.signature is not valid")
	header, err := hawk.RequestHeader(hawk.Credentials{ID: server.RootClientID, Key: rootToken}, "GET", b.url+"/x", time.Now(), "", "", "")
	require.NoError(t, err)
	_, err = b.anonymous().AuthenticateHawk(ctx, &tcclient.AuthenticateHawkRequest{Method: "get", Resource: "/y", Host: "127.0.0.1", Port: 1, Authorization: header})
	require.NoError(t, err)

	logs := b.logs.String()
	require.Contains(t, logs, "client created", "the audit lines are there")
	require.Contains(t, logs, "client access token reset")
	for _, s := range secrets {
		require.NotContains(t, logs, s)
	}
	_, mac, _ := strings.Cut(header, `mac="`)
	require.NotContains(t, logs, strings.TrimSuffix(mac, `"`))
}
