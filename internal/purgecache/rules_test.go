package purgecache

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestValidWorkerPoolID(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]bool{
		"prov/type":        true,
		"Prov_1/Type-2":    true,
		"prov":             false,
		"prov/":            false,
		"/type":            false,
		"a/b/c":            false,
		"prov/type.dotted": false,
	} {
		require.Equal(t, want, ValidWorkerPoolID(id), id)
	}
}

func TestSinceAndEntries(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
	reqs := []Request{
		NewRequest("p/w", "old", now.Add(-time.Hour)),
		NewRequest("p/w", "edge", now),
		NewRequest("p/w", "new", now.Add(time.Minute)),
	}
	require.Equal(t, now.Add(RequestLifetime), reqs[1].Expires)
	got := Entries(Since(reqs, now))
	require.Equal(t, []Entry{
		{ProvisionerID: "p", WorkerType: "w", CacheName: "edge", Before: "2031-01-02T03:04:05.678Z"},
		{ProvisionerID: "p", WorkerType: "w", CacheName: "new", Before: "2031-01-02T03:05:05.678Z"},
	}, got)
	require.Len(t, Since(reqs, time.Time{}), 3)
	require.Empty(t, Entries(nil))
}

func TestParseSince(t *testing.T) {
	t.Parallel()
	got, err := ParseSince("")
	require.NoError(t, err)
	require.True(t, got.IsZero())
	got, err = ParseSince("2031-01-02T03:04:05.678Z")
	require.NoError(t, err)
	require.Equal(t, time.Date(2031, 1, 2, 3, 4, 5, 678_000_000, time.UTC), got.UTC())
	for in, want := range map[string]time.Time{
		"2031-01-02":                time.Date(2031, 1, 2, 0, 0, 0, 0, time.UTC),
		"2031-01-02T03:04":          time.Date(2031, 1, 2, 3, 4, 0, 0, time.UTC),
		"2031-01-02T03:04:05.5":     time.Date(2031, 1, 2, 3, 4, 5, 500_000_000, time.UTC),
		"2031-01-02T03:04+01:00":    time.Date(2031, 1, 2, 2, 4, 0, 0, time.UTC),
		"2031-01-02T03:04:05+01:00": time.Date(2031, 1, 2, 2, 4, 5, 0, time.UTC),
	} {
		got, err := ParseSince(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got.UTC(), in)
	}
	_, err = ParseSince("yesterday")
	require.EqualError(t, err, `Query-string parameter: since="yesterday" is not valid, error: Invalid Date`)
}
