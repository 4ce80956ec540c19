package forge_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/forge"
	"github.com/hopper-ci/hopper/internal/forge/forgetest"
)

// TestInstallationTokens: the App's JWT is accepted by a GitHub that
// checks it (RS256, the App's key, fresh), the installation token is
// cached, and replaced ten minutes before its hour runs out.
func TestInstallationTokens(t *testing.T) {
	t.Parallel()
	gh := forgetest.Start(t)
	gh.Install("o", "r", 5)
	gh.SetFile("o", "r", "main", "f", "x")
	now := time.Now()
	gh.Now = func() time.Time { return now }
	f := &forge.Forge{Host: "github.com", Kind: forge.KindGitHub, APIURL: gh.Server.URL, AppID: gh.AppID, PrivateKey: gh.PEM,
		Now: func() time.Time { return now }}
	ctx := context.Background()
	get := func() {
		t.Helper()
		b, ok, err := f.GetFile(ctx, 5, "o", "r", "f", "main")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "x", string(b))
	}
	get()
	get()
	require.Equal(t, 1, gh.TokensIssued)
	now = now.Add(45 * time.Minute)
	get()
	require.Equal(t, 1, gh.TokensIssued, "still 15 minutes to go")
	now = now.Add(6 * time.Minute)
	get()
	require.Equal(t, 2, gh.TokensIssued, "refreshed ten minutes before expiry")
	_, ok, err := f.GetFile(ctx, 5, "o", "r", "missing", "main")
	require.NoError(t, err)
	require.False(t, ok)
	_, _, err = f.GetFile(ctx, 0, "o", "r", "f", "main")
	require.ErrorContains(t, err, "not installed")
}

// TestLoad: secrets come from files or the environment, never the file
// itself; a forge without a webhook secret or credentials is refused; a
// forge never prints its secrets.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	gh := forgetest.Start(t)
	key := filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(key, gh.PEM, 0o600))
	t.Setenv("FORGE_TEST_SECRET", "s3cret")
	t.Setenv("FORGE_TEST_TOKEN", "tok3n")
	write := func(text string) string {
		p := filepath.Join(dir, "forges.yml")
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
		return p
	}
	forges, err := forge.Load(write(`forges:
  - host: github.com
    appId: 7
    privateKey: {file: ` + key + `}
    webhookSecrets: [{env: FORGE_TEST_SECRET}]
  - host: git.example.com
    kind: gitea
    apiUrl: https://git.example.com/api/v1
    token: {env: FORGE_TEST_TOKEN}
    webhookSecrets: [{env: FORGE_TEST_SECRET}]
`))
	require.NoError(t, err)
	require.Len(t, forges, 2)
	require.Equal(t, "https://api.github.com", forges[0].APIURL)
	require.Equal(t, "https://github.com", forges[0].WebURL())
	require.Equal(t, "https://git.example.com", forges[1].WebURL())
	require.Equal(t, "tok3n", forges[1].Token)
	for _, f := range forges {
		require.NotContains(t, f.String(), "tok3n")
		b, err := f.MarshalJSON()
		require.NoError(t, err)
		require.NotContains(t, string(b), "s3cret")
		require.NotContains(t, string(b), "PRIVATE")
	}
	for _, bad := range []string{
		"forges:\n  - host: github.com\n    appId: 7\n    privateKey: {file: " + key + "}\n",
		"forges:\n  - host: g\n    kind: gitea\n    apiUrl: https://g/api/v1\n    webhookSecrets: [{env: FORGE_TEST_SECRET}]\n",
		"forges:\n  - host: g\n    kind: gitlab\n    apiUrl: https://g\n",
		"forges:\n  - host: g\n    kind: gitea\n    apiUrl: https://g/api/v1\n    token: {env: FORGE_TEST_UNSET}\n    webhookSecrets: [{env: FORGE_TEST_SECRET}]\n",
	} {
		_, err := forge.Load(write(bad))
		require.Error(t, err, bad)
	}
}
