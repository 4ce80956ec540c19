package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
)

// testEndpoints: a key is held by the replica that registered it last,
// until its lease runs out or that replica releases it; a release by a
// replica that no longer holds it leaves the newer holder's row.
func testEndpoints(t *testing.T, open Opener) {
	e := setup(t, open)
	const a, b = "http://10.0.0.1:8080", "http://10.0.0.2:8080"
	get := func(key string, at time.Time) (string, error) { return e.s.GetEndpoint(e.ctx, key, at) }

	_, err := get("wst/w1", Epoch)
	require.ErrorIs(t, err, store.ErrNotFound)

	require.NoError(t, e.s.PutEndpoint(e.ctx, "wst/w1", a, Epoch.Add(time.Minute)))
	got, err := get("wst/w1", Epoch)
	require.NoError(t, err)
	require.Equal(t, a, got)
	_, err = get("wst/w1", Epoch.Add(time.Minute))
	require.ErrorIs(t, err, store.ErrNotFound, "a lease that ran out names no replica")

	// The worker connected again, to b: b holds it, and a's release
	// (its old session ending) leaves b's row.
	require.NoError(t, e.s.PutEndpoint(e.ctx, "wst/w1", b, Epoch.Add(2*time.Minute)))
	require.NoError(t, e.s.DeleteEndpoint(e.ctx, "wst/w1", a))
	got, err = get("wst/w1", Epoch.Add(90*time.Second))
	require.NoError(t, err)
	require.Equal(t, b, got)
	require.NoError(t, e.s.DeleteEndpoint(e.ctx, "wst/w1", b))
	_, err = get("wst/w1", Epoch)
	require.ErrorIs(t, err, store.ErrNotFound)

	require.NoError(t, e.s.PutEndpoint(e.ctx, "shell/t/0", a, Epoch.Add(time.Minute)))
	require.NoError(t, e.s.PutEndpoint(e.ctx, "shell/t/1", a, Epoch.Add(3*time.Minute)))
	n, err := e.s.ExpireEndpoints(e.ctx, Epoch.Add(2*time.Minute))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = get("shell/t/1", Epoch.Add(2*time.Minute))
	require.NoError(t, err)
}
