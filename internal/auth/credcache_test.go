package auth

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// switchableRoles is an ExpanderSource whose role set a test can replace.
type switchableRoles struct{ e atomic.Pointer[Expander] }

func (s *switchableRoles) Expander(context.Context) (*Expander, error) { return s.e.Load(), nil }

// cacheFixture is an Authenticator whose clients, roles and clock a test
// can change between requests, plus a way to authenticate the same
// request with a fresh Authenticator (empty cache) over the same state.
type cacheFixture struct {
	a       *Authenticator
	clients *fakeClients
	roles   *switchableRoles
	now     time.Time
}

func newCacheFixture(t *testing.T) *cacheFixture {
	t.Helper()
	_, b := setupAuth(t)
	f := &cacheFixture{clients: b.clients, roles: &switchableRoles{}, now: testNow}
	f.setRoles(t, []Role{
		{RoleID: AnonymousRole, Scopes: []string{"queue:get-artifact:public/*", "auth:current-scopes"}},
		{RoleID: "project:x", Scopes: []string{"secrets:get:x/*"}},
	})
	f.a = f.newAuthenticator()
	return f
}

func (f *cacheFixture) setRoles(t *testing.T, roles []Role) {
	t.Helper()
	e, err := NewExpander(roles)
	require.NoError(t, err)
	f.roles.e.Store(e)
}

func (f *cacheFixture) newAuthenticator() *Authenticator {
	return NewAuthenticator(AuthenticatorOptions{Clients: f.clients, Roles: f.roles, NowFunc: func() time.Time { return f.now }})
}

// outcome renders an authentication outcome for comparison.
func outcome(res *Result, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return res.ClientID + " " + res.Expires.UTC().Format(time.RFC3339Nano) + " " + strconv.FormatBool(res.HasCredentials) +
		" " + string(res.Scheme) + " " + res.Hash + " " + strconv.Quote(stringsJoin(res.Scopes))
}

func stringsJoin(s []string) string {
	out := ""
	for _, x := range s {
		out += x + "\n"
	}
	return out
}

func setClient(f *cacheFixture, id string, change func(c *Client)) {
	c := f.clients.clients[id]
	change(&c)
	f.clients.clients[id] = c
}

func TestCredentialCacheFollowsChanges(t *testing.T) {
	t.Parallel()
	root := Credentials{ClientID: rootID, AccessToken: rootToken}
	limited := Credentials{ClientID: "limited", AccessToken: "limited-token"}
	tester := Credentials{ClientID: "tester", AccessToken: "no-secret"}
	named, err := CreateTemporaryCredentials(TemporaryCredentialsOptions{
		ClientID: "limited/w1", Start: testNow, Expiry: testNow.Add(time.Hour),
		Scopes: []string{"queue:get-task:x"}, Issuer: limited,
	})
	require.NoError(t, err)
	unnamed, err := CreateTemporaryCredentials(TemporaryCredentialsOptions{
		Start: testNow, Expiry: testNow.Add(time.Hour), Scopes: []string{"secrets:get:x/a"}, Issuer: tester,
	})
	require.NoError(t, err)
	fromRoot, err := CreateTemporaryCredentials(TemporaryCredentialsOptions{
		ClientID: "task-client/abc", Start: testNow, Expiry: testNow.Add(time.Hour),
		Scopes: []string{"queue:create-artifact:abc/0"}, Issuer: root,
	})
	require.NoError(t, err)

	short, err := CreateTemporaryCredentials(TemporaryCredentialsOptions{
		ClientID: "limited/w2", Start: testNow, Expiry: testNow.Add(5 * time.Minute),
		Scopes: []string{"queue:get-task:x"}, Issuer: limited,
	})
	require.NoError(t, err)

	type request func(t *testing.T) Request
	shortReq := func(t *testing.T) Request {
		return signedRequest(t, short, mustExt(t, short.Certificate, nil), "GET", statusPath, nil, "", false)
	}
	namedReq := func(t *testing.T) Request {
		return signedRequest(t, named, mustExt(t, named.Certificate, nil), "GET", statusPath, nil, "", false)
	}
	unnamedReq := func(t *testing.T) Request {
		return signedRequest(t, unnamed, mustExt(t, unnamed.Certificate, nil), "GET", statusPath, nil, "", false)
	}
	restrictedReq := func(t *testing.T) Request {
		return signedRequest(t, fromRoot, mustExt(t, fromRoot.Certificate, []string{"queue:create-artifact:abc/0"}), "GET", statusPath, nil, "", false)
	}
	testerReq := func(t *testing.T) Request {
		return signedRequest(t, tester, "", "GET", statusPath, nil, "", false)
	}
	authorizedReq := func(t *testing.T) Request {
		return signedRequest(t, tester, mustExt(t, "", []string{"secrets:get:x/b"}), "GET", statusPath, nil, "", false)
	}

	tests := []struct {
		name   string
		req    request
		change func(t *testing.T, f *cacheFixture)
		// msg is the expected failure after the change, "" for success.
		msg string
	}{
		{"named unchanged", namedReq, func(*testing.T, *cacheFixture) {}, ""},
		{"unnamed unchanged", unnamedReq, func(*testing.T, *cacheFixture) {}, ""},
		{"restricted unchanged", restrictedReq, func(*testing.T, *cacheFixture) {}, ""},
		{"permanent unchanged", testerReq, func(*testing.T, *cacheFixture) {}, ""},
		{"authorizedScopes unchanged", authorizedReq, func(*testing.T, *cacheFixture) {}, ""},
		{"within the expiry skew", shortReq, func(_ *testing.T, f *cacheFixture) { f.now = testNow.Add(10 * time.Minute) }, ""},
		{"certificate expired", shortReq, func(_ *testing.T, f *cacheFixture) { f.now = testNow.Add(10*time.Minute + time.Millisecond) }, "ext.certificate.expiry < now"},
		{"clock before the start", namedReq, func(_ *testing.T, f *cacheFixture) { f.now = testNow.Add(-5*time.Minute - time.Millisecond) }, "ext.certificate.start > now"},
		{"issuer disabled", namedReq, func(_ *testing.T, f *cacheFixture) {
			setClient(f, "limited", func(c *Client) { c.Disabled = true })
		}, "Client with clientId 'limited' is disabled"},
		{"issuer deleted", namedReq, func(_ *testing.T, f *cacheFixture) { delete(f.clients.clients, "limited") }, "Client with clientId 'limited' not found"},
		{"issuer expired", unnamedReq, func(_ *testing.T, f *cacheFixture) {
			setClient(f, "tester", func(c *Client) { c.Expires = testNow.Add(-time.Millisecond) })
		}, "Client with clientId: 'tester' has expired"},
		{"issuer expires before the certificate", namedReq, func(_ *testing.T, f *cacheFixture) {
			setClient(f, "limited", func(c *Client) { c.Expires = testNow.Add(10 * time.Minute) })
		}, ""},
		{"issuer token rotated", namedReq, func(_ *testing.T, f *cacheFixture) {
			setClient(f, "limited", func(c *Client) { c.AccessToken = "rotated" })
		}, "ext.certificate.signature is not valid, or wrong clientId provided"},
		{"permanent token rotated", testerReq, func(_ *testing.T, f *cacheFixture) {
			setClient(f, "tester", func(c *Client) { c.AccessToken = "rotated" })
		}, "Unauthorized: Bad mac"},
		{"issuer lost create-client", namedReq, func(_ *testing.T, f *cacheFixture) {
			setClient(f, "limited", func(c *Client) { c.Scopes = []string{"queue:get-task:*"} })
		}, "ext.certificate issuer `limited` doesn't have `auth:create-client:limited/w1` for supplied clientId."},
		{"issuer lost a certificate scope", namedReq, func(_ *testing.T, f *cacheFixture) {
			setClient(f, "limited", func(c *Client) { c.Scopes = []string{"queue:get-task:y", "auth:create-client:limited/*"} })
		}, "ext.certificate issuer `limited` doesn't satisfy all certificate scopes queue:get-task:x.  The temporary credentials were not generated correctly."},
		{"issuer gained a scope", testerReq, func(_ *testing.T, f *cacheFixture) {
			setClient(f, "tester", func(c *Client) { c.Scopes = append([]string{"queue:new"}, c.Scopes...) })
		}, ""},
		{"role granting a certificate scope removed", unnamedReq, func(t *testing.T, f *cacheFixture) {
			f.setRoles(t, []Role{{RoleID: AnonymousRole, Scopes: []string{"auth:current-scopes"}}})
		}, "ext.certificate issuer `tester` doesn't satisfy all certificate scopes secrets:get:x/a.  The temporary credentials were not generated correctly."},
		{"role granting an authorized scope removed", authorizedReq, func(t *testing.T, f *cacheFixture) {
			f.setRoles(t, []Role{{RoleID: AnonymousRole, Scopes: []string{"auth:current-scopes"}}})
		}, "Supplied credentials do not satisfy authorizedScopes; credentials have scopes:\n\n```\nassume:anonymous\nassume:project:x\nauth:current-scopes\nqueue:get-task:*\n```\n\nauthorizedScopes are:\n\n```\nsecrets:get:x/b\n```"},
		{"anonymous role changed", restrictedReq, func(t *testing.T, f *cacheFixture) {
			f.setRoles(t, []Role{{RoleID: AnonymousRole, Scopes: []string{"queue:ping"}}})
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newCacheFixture(t)
			ctx := context.Background()
			req := tt.req(t)
			first, err := f.a.Authenticate(ctx, req)
			require.NoError(t, err)
			require.Len(t, f.a.verified.entries, 1, "a verified request is remembered")
			// Callers own their Result: changing it must not reach the cache.
			first.Scopes[0] = "*"

			tt.change(t, f)
			got, err := f.a.Authenticate(ctx, req)
			want, wantErr := f.newAuthenticator().Authenticate(ctx, req)
			require.Equal(t, outcome(want, wantErr), outcome(got, err), "cached and fresh authentication differ")
			if tt.msg != "" {
				requireAuthError(t, err, tt.msg)
				return
			}
			require.NoError(t, err)
			require.NotContains(t, want.Scopes, "*")
			// And again, now from whatever the cache holds, each time
			// spoiling the Result handed out before.
			for range 2 {
				got.Scopes[0] = "*"
				got, err = f.a.Authenticate(ctx, req)
				require.Equal(t, outcome(want, wantErr), outcome(got, err))
			}
		})
	}
}

func TestCredentialCacheOnlyRemembersVerifiedRequests(t *testing.T) {
	t.Parallel()
	f := newCacheFixture(t)
	ctx := context.Background()
	temp, err := CreateTemporaryCredentials(TemporaryCredentialsOptions{
		ClientID: "task-client/abc", Start: testNow, Expiry: testNow.Add(time.Hour),
		Scopes: []string{"queue:create-artifact:abc/0"}, Issuer: Credentials{ClientID: rootID, AccessToken: rootToken},
	})
	require.NoError(t, err)
	ext := mustExt(t, temp.Certificate, nil)

	// A valid certificate with a MAC under the wrong key: not remembered.
	forged := signedRequest(t, Credentials{ClientID: temp.ClientID, AccessToken: "guess"}, ext, "GET", statusPath, nil, "", false)
	_, err = f.a.Authenticate(ctx, forged)
	requireAuthError(t, err, "Unauthorized: Bad mac")
	require.Empty(t, f.a.verified.entries)
	// Failures are not remembered either.
	f.now = testNow.Add(2 * time.Hour)
	_, err = f.a.Authenticate(ctx, signedRequest(t, temp, ext, "GET", statusPath, nil, "", false))
	requireAuthError(t, err, "ext.certificate.expiry < now")
	require.Empty(t, f.a.verified.entries)

	f.now = testNow
	_, err = f.a.Authenticate(ctx, signedRequest(t, temp, ext, "GET", statusPath, nil, "", false))
	require.NoError(t, err)
	require.Len(t, f.a.verified.entries, 1)
	// A cached certificate does not vouch for a MAC under another key.
	_, err = f.a.Authenticate(ctx, forged)
	requireAuthError(t, err, "Unauthorized: Bad mac")
}

func TestCredentialCacheBounded(t *testing.T) {
	t.Parallel()
	c := newCredentialCache()
	for i := range maxCachedCredentials + 10 {
		c.put("id", strconv.Itoa(i), &cachedCredentials{key: strconv.Itoa(i)})
		require.LessOrEqual(t, len(c.entries), maxCachedCredentials)
	}
	require.Len(t, c.entries, maxCachedCredentials)
	last := strconv.Itoa(maxCachedCredentials + 9)
	require.Equal(t, last, c.get("id", last).key)
	// Replacing an entry when full evicts nothing.
	c.put("id", last, &cachedCredentials{key: "new"})
	require.Len(t, c.entries, maxCachedCredentials)
	require.Equal(t, "new", c.get("id", last).key)
}
