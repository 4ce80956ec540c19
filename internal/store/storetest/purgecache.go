package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/purgecache"
	"github.com/hopper-ci/hopper/internal/store"
)

// testPurgeRequests: one request per (pool, cache), never moving back in
// time; listing per pool or all, paged; expiry.
func testPurgeRequests(t *testing.T, open Opener) {
	e := setup(t, open)
	put := func(pool, cache string, before time.Time) {
		t.Helper()
		require.NoError(t, e.s.PutPurgeRequest(e.ctx, purgecache.Request{WorkerPoolID: pool, CacheName: cache, Before: before, Expires: before.Add(24 * time.Hour)}))
	}
	put("prov/b", "cache-1", Epoch)
	put("prov/a", "cache-2", Epoch)
	put("prov/a", "cache-1", Epoch.Add(time.Minute))
	put("prov/a", "cache-1", Epoch) // older: ignored

	list, next, err := e.s.ListPurgeRequests(e.ctx, "prov/a", store.Page{})
	require.NoError(t, err)
	require.Empty(t, next)
	require.Equal(t, []purgecache.Request{
		{WorkerPoolID: "prov/a", CacheName: "cache-1", Before: Epoch.Add(time.Minute), Expires: Epoch.Add(time.Minute + 24*time.Hour)},
		{WorkerPoolID: "prov/a", CacheName: "cache-2", Before: Epoch, Expires: Epoch.Add(24 * time.Hour)},
	}, list)

	var all []string
	page := store.Page{Limit: 2}
	for {
		list, next, err := e.s.ListPurgeRequests(e.ctx, "", page)
		require.NoError(t, err)
		for _, r := range list {
			all = append(all, r.WorkerPoolID+":"+r.CacheName)
		}
		if next == "" {
			break
		}
		page.ContinuationToken = next
	}
	require.Equal(t, []string{"prov/a:cache-1", "prov/a:cache-2", "prov/b:cache-1"}, all)

	_, _, err = e.s.ListPurgeRequests(e.ctx, "", store.Page{ContinuationToken: "!!not-a-token"})
	require.ErrorIs(t, err, store.ErrBadContinuationToken)

	n, err := e.s.ExpirePurgeRequests(e.ctx, Epoch.Add(24*time.Hour+30*time.Second))
	require.NoError(t, err)
	require.Equal(t, 2, n)
	list, _, err = e.s.ListPurgeRequests(e.ctx, "", store.Page{})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "cache-1", list[0].CacheName)
	require.Equal(t, "prov/a", list[0].WorkerPoolID)
}
