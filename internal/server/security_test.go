package server

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/sqlite"
	"github.com/hopper-ci/hopper/internal/testclock"
)

func TestClientUseIsRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "hopper.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	var key [32]byte
	sec, err := NewSecurity(ctx, st, "root-token-0123456789abcdefghij", key, testclock.New(now), slog.Default())
	require.NoError(t, err)

	sealed, err := sec.Sealer.Seal("client-token-0123456789abcdefghij", "c/one")
	require.NoError(t, err)
	created := now.Add(-48 * time.Hour)
	_, err = st.CreateClient(ctx, &store.Client{ClientID: "c/one", AccessToken: sealed, Scopes: []string{"a"},
		Created: created, LastModified: created, LastDateUsed: created, LastRotated: created, Expires: now.Add(time.Hour)}, nil)
	require.NoError(t, err)

	c, err := sec.Clients.Client(ctx, "c/one")
	require.NoError(t, err)
	require.Equal(t, "client-token-0123456789abcdefghij", c.AccessToken, "the sealed token is opened")
	require.Eventually(t, func() bool {
		got, err := st.GetClient(ctx, "c/one")
		return err == nil && got.LastDateUsed.Equal(now)
	}, 5*time.Second, 10*time.Millisecond, "lastDateUsed was not recorded")

	_, err = sec.Clients.Client(ctx, "no/such")
	require.ErrorIs(t, err, auth.ErrClientNotFound)
	root, err := sec.Clients.Client(ctx, RootClientID)
	require.NoError(t, err)
	require.Equal(t, []string{"*"}, root.Scopes)
}
