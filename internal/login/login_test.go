package login_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/login"
)

func TestParseConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(secretFile, []byte("file-secret\n"), 0o600))
	env := map[string]string{"SSO_SECRET": "env-secret"}
	getenv := func(k string) string { return env[k] }

	c, err := login.ParseConfig([]byte(`{"providers": [
		{"name": "gitea", "kind": "gitea", "issuer": "http://127.0.0.1:3000", "clientId": "a", "clientSecretFile": "`+secretFile+`"},
		{"name": "sso", "kind": "oidc", "issuer": "https://sso.example", "clientId": "b", "clientSecretEnv": "SSO_SECRET"}]}`), getenv)
	require.NoError(t, err)
	g, ok := c.Provider("gitea")
	require.True(t, ok)
	require.Equal(t, "file-secret", g.ClientSecret)
	require.Equal(t, []string{"profile", "email", "groups"}, g.Scopes)
	require.Equal(t, "groups", g.GroupsClaim)
	s, _ := c.Provider("sso")
	require.Equal(t, "env-secret", s.ClientSecret)
	require.Empty(t, s.GroupsClaim, "a generic provider has no groups unless asked")
	lifetime, err := c.Lifetime()
	require.NoError(t, err)
	require.Equal(t, login.DefaultSessionLifetime, lifetime)

	for name, bad := range map[string]string{
		"unknown kind":      `{"providers": [{"name": "gh", "kind": "saml", "issuer": "https://x", "clientId": "a"}]}`,
		"bad name":          `{"providers": [{"name": "Git/ea", "kind": "gitea", "issuer": "https://x", "clientId": "a"}]}`,
		"no client":         `{"providers": [{"name": "g", "kind": "gitea", "issuer": "https://x"}]}`,
		"not a URL":         `{"providers": [{"name": "g", "kind": "gitea", "issuer": "ftp://x", "clientId": "a"}]}`,
		"two of one name":   `{"providers": [{"name": "g", "kind": "gitea", "issuer": "https://x", "clientId": "a"}, {"name": "g", "kind": "oidc", "issuer": "https://y", "clientId": "b"}]}`,
		"empty env secret":  `{"providers": [{"name": "g", "kind": "gitea", "issuer": "https://x", "clientId": "a", "clientSecretEnv": "NOPE"}]}`,
		"inline secret":     `{"providers": [{"name": "g", "kind": "gitea", "issuer": "https://x", "clientId": "a", "clientSecret": "s"}]}`,
		"long session":      `{"providers": [], "sessionLifetime": "800h"}`,
		"file and env both": `{"providers": [{"name": "g", "kind": "gitea", "issuer": "https://x", "clientId": "a", "clientSecretEnv": "SSO_SECRET", "clientSecretFile": "` + secretFile + `"}]}`,
	} {
		_, err := login.ParseConfig([]byte(bad), getenv)
		require.Error(t, err, name)
		require.NotContains(t, err.Error(), "env-secret")
	}
}

func TestIdentityAndRoles(t *testing.T) {
	t.Parallel()
	gitea := &login.Provider{Name: "gitea", Kind: login.KindGitea}
	sso := &login.Provider{Name: "sso", Kind: login.KindOIDC}
	tests := []struct {
		p     *login.Provider
		who   login.Person
		id    string
		roles []string
	}{
		{gitea, login.Person{Subject: "7", Username: "bob", Groups: []string{"acme", "acme:builders", "acme:builders", "other"}},
			"gitea/7|bob", []string{"gitea-org:acme", "gitea-org:other", "gitea-team:acme/builders"}},
		{sso, login.Person{Subject: "a|b", Username: "Zoë Ann!", Groups: []string{"dev", "", "Équipe", "a\nb"}},
			"sso/a!7Cb|Zo!C3!AB!20Ann!21", []string{"sso-group:dev"}},
		{sso, login.Person{Subject: "x"}, "sso/x", []string{}},
	}
	for _, tc := range tests {
		id, err := tc.p.Identity(tc.who)
		require.NoError(t, err)
		require.Equal(t, tc.id, id)
		require.Regexp(t, `^[A-Za-z0-9!@/:.+|_-]+$`, id, "a valid clientId")
		// Taskcluster's decode (! → %, then URI-decoding) reads each part back.
		_, user, _ := strings.Cut(id, "/")
		parts := strings.Split(user, "|")
		sub, err := url.PathUnescape(strings.ReplaceAll(parts[0], "!", "%"))
		require.NoError(t, err)
		require.Equal(t, tc.who.Subject, sub)
		if len(parts) > 1 {
			name, err := url.PathUnescape(strings.ReplaceAll(parts[1], "!", "%"))
			require.NoError(t, err)
			require.Equal(t, tc.who.Username, name)
		}
		require.Equal(t, tc.roles, tc.p.Roles(tc.who))
	}
	_, err := sso.Identity(login.Person{})
	require.Error(t, err, "no subject, no identity")
	require.Equal(t, []string{"assume:login-identity:gitea/7|bob", "assume:gitea-team:acme/builders"},
		login.Scopes("gitea/7|bob", []string{"gitea-team:acme/builders"}))
}
