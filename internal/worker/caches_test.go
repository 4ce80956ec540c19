package worker

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestCachePoolHonoursPurgeRequests: an idle cache named in a purge
// request newer than it is emptied before its next use, one in use is
// deleted when it comes back, a newer cache survives, and a failing
// purge-cache service leaves caches as they are.
func TestCachePoolHonoursPurgeRequests(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pool, err := newCachePool(dir)
	require.NoError(t, err)
	var (
		reqs   []tcclient.PurgeRequest
		fail   error
		sinces []time.Time
	)
	pool.purges = func(since time.Time) ([]tcclient.PurgeRequest, error) {
		sinces = append(sinces, since)
		return reqs, fail
	}
	request := func(name string, before time.Time) {
		reqs = append(reqs, tcclient.PurgeRequest{CacheName: name, Before: tcclient.Time{Time: before}})
	}
	mark := func(entry string) { require.NoError(t, os.WriteFile(filepath.Join(entry, "mark"), []byte("x"), 0o644)) }
	marked := func(entry string) bool { _, err := os.Stat(filepath.Join(entry, "mark")); return err == nil }

	// A cache is created, used and returned; it is reused as it is.
	a, fresh, err := pool.acquire("a")
	require.NoError(t, err)
	require.True(t, fresh)
	mark(a)
	pool.release("a", a, false)
	again, fresh, err := pool.acquire("a")
	require.NoError(t, err)
	require.False(t, fresh)
	require.Equal(t, a, again)
	require.True(t, marked(again))
	require.Len(t, sinces, 2, "the pool asks before handing out a cache")
	require.True(t, sinces[0].IsZero(), "the first question asks for every open request")
	require.WithinDuration(t, time.Now().Add(-purgeSinceSlack), sinces[1], time.Minute, "later ones since the previous")

	// A request arrives while it is in use: it is deleted when it comes
	// back, and the next task gets a fresh one.
	request("a", time.Now())
	_, _, err = pool.acquire("other") // the pool asks on the next acquire
	require.NoError(t, err)
	pool.release("a", again, false)
	_, err = os.Stat(again)
	require.ErrorIs(t, err, os.ErrNotExist)
	b, fresh, err := pool.acquire("a")
	require.NoError(t, err)
	require.True(t, fresh)
	mark(b)
	pool.release("a", b, false)

	// The same (older) request does not touch the newer cache.
	got, fresh, err := pool.acquire("a")
	require.NoError(t, err)
	require.False(t, fresh)
	require.True(t, marked(got))
	pool.release("a", got, false)

	// A newer request empties the idle cache before its next use.
	request("a", time.Now())
	got, fresh, err = pool.acquire("a")
	require.NoError(t, err)
	require.True(t, fresh)
	require.False(t, marked(got))
	pool.release("a", got, false)

	// A restarted worker knows how old its caches are.
	restarted, err := newCachePool(dir)
	require.NoError(t, err)
	restarted.purges = func(time.Time) ([]tcclient.PurgeRequest, error) { return reqs, nil }
	got2, fresh, err := restarted.acquire("a")
	require.NoError(t, err)
	require.False(t, fresh, "a cache newer than every request survives a restart")
	require.Equal(t, got, got2)
	restarted.release("a", got2, false)

	// An unreachable service leaves caches alone.
	fail = errors.New("unreachable")
	request("a", time.Now().Add(time.Hour))
	got, fresh, err = pool.acquire("a")
	require.NoError(t, err)
	require.False(t, fresh)
	pool.release("a", got, false)
}
