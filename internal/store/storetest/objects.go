package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
)

// testObjects covers the object service's rows: create, update under the
// lock, a refusal that writes nothing, and reading back.
func testObjects(t *testing.T, open Opener) {
	e := setup(t, open)
	_, err := e.s.GetObject(e.ctx, "t/a")
	require.ErrorIs(t, err, store.ErrNotFound)

	created, err := e.s.PutObject(e.ctx, "t/a", func(existing *store.Object) (*store.Object, error) {
		require.Nil(t, existing)
		return &store.Object{ProjectID: "p", UploadID: "up1", UploadExpires: Epoch.Add(time.Hour),
			Expires: Epoch.Add(24 * time.Hour), Hashes: map[string]string{}, Created: Epoch}, nil
	})
	require.NoError(t, err)
	require.Equal(t, "t/a", created.Name)

	got, err := e.s.GetObject(e.ctx, "t/a")
	require.NoError(t, err)
	require.Equal(t, &store.Object{Name: "t/a", ProjectID: "p", UploadID: "up1", UploadExpires: Epoch.Add(time.Hour),
		Expires: Epoch.Add(24 * time.Hour), Hashes: map[string]string{}, Created: Epoch}, got)

	refused := errors.New("refused")
	_, err = e.s.PutObject(e.ctx, "t/a", func(existing *store.Object) (*store.Object, error) {
		require.Equal(t, "up1", existing.UploadID)
		return nil, refused
	})
	require.ErrorIs(t, err, refused)

	_, err = e.s.PutObject(e.ctx, "t/a", func(existing *store.Object) (*store.Object, error) {
		next := *existing
		next.UploadID = ""
		next.Hashes = map[string]string{"sha256": "ab"}
		return &next, nil
	})
	require.NoError(t, err)
	got, err = e.s.GetObject(e.ctx, "t/a")
	require.NoError(t, err)
	require.Empty(t, got.UploadID)
	require.Equal(t, map[string]string{"sha256": "ab"}, got.Hashes)
	require.Equal(t, Epoch, got.Created)
}

// testObjectsConcurrentCreate: callers creating one name at once each see
// the row as the one before them left it; exactly one sees none.
func testObjectsConcurrentCreate(t *testing.T, open Opener) {
	e := setup(t, open)
	const n = 8
	errExists := errors.New("exists")
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = e.s.PutObject(e.ctx, "race", func(existing *store.Object) (*store.Object, error) {
				if existing != nil {
					return nil, errExists
				}
				return &store.Object{ProjectID: "p", UploadID: fmt.Sprintf("u%d", i), UploadExpires: Epoch, Expires: Epoch, Created: Epoch}, nil
			})
		}()
	}
	wg.Wait()
	created := 0
	for _, err := range errs {
		if err == nil {
			created++
			continue
		}
		require.ErrorIs(t, err, errExists)
	}
	require.Equal(t, 1, created, "exactly one caller creates the object")
	got, err := e.s.GetObject(e.ctx, "race")
	require.NoError(t, err)
	require.NotEmpty(t, got.UploadID)
}

// testExpireObjects: finished objects go at their expiry, unfinished ones
// at their upload expiry, each reported once.
func testExpireObjects(t *testing.T, open Opener) {
	e := setup(t, open)
	put := func(name, uploadID string, uploadExpires, expires time.Time) {
		t.Helper()
		_, err := e.s.PutObject(e.ctx, name, func(*store.Object) (*store.Object, error) {
			return &store.Object{ProjectID: "p", UploadID: uploadID, UploadExpires: uploadExpires, Expires: expires, Created: Epoch}, nil
		})
		require.NoError(t, err)
	}
	put("finished-expired", "", Epoch.Add(-time.Hour), Epoch.Add(-time.Minute))
	put("finished-live", "", Epoch.Add(-time.Hour), Epoch.Add(time.Hour))
	put("unfinished-stale", "u1", Epoch.Add(-time.Minute), Epoch.Add(time.Hour))
	put("unfinished-live", "u2", Epoch.Add(time.Minute), Epoch.Add(time.Hour))
	put("both", "u3", Epoch.Add(-time.Minute), Epoch.Add(-time.Minute))

	gone, err := e.s.ExpireObjects(e.ctx, Epoch, 100)
	require.NoError(t, err)
	var names []string
	for _, o := range gone {
		names = append(names, o.Name)
	}
	require.ElementsMatch(t, []string{"finished-expired", "unfinished-stale", "both"}, names)
	for _, n := range names {
		_, err := e.s.GetObject(e.ctx, n)
		require.ErrorIs(t, err, store.ErrNotFound)
	}
	for _, n := range []string{"finished-live", "unfinished-live"} {
		_, err := e.s.GetObject(e.ctx, n)
		require.NoError(t, err)
	}
	gone, err = e.s.ExpireObjects(e.ctx, Epoch, 100)
	require.NoError(t, err)
	require.Empty(t, gone)
}
