package githubapi_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSyncInstallations: the App's installations are listed from GitHub
// (an App JWT) and recorded, so an installation whose delivery never
// came is known; a second pass changes nothing.
func TestSyncInstallations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.gh.Install("Codertocat", "Hello-World", 7)
	b.gh.Install("Codertocat", "Other", 7)
	b.gh.Install("octo-org", "octo-repo", 9)
	id, err := b.store.GetGithubInstallation(ctx, "github.com", "octo-org")
	require.NoError(t, err)
	require.Zero(t, id)
	for range 2 {
		n, err := b.svc.SyncInstallations(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, n)
	}
	for owner, want := range map[string]int64{"Codertocat": 7, "octo-org": 9} {
		id, err := b.store.GetGithubInstallation(ctx, "github.com", owner)
		require.NoError(t, err)
		require.Equal(t, want, id, owner)
	}
}
