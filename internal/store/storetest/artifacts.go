package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// testArtifacts covers store.ArtifactStore (store/artifacts.go).
func testArtifacts(t *testing.T, open Opener) {
	e := setup(t, open)
	e.bring("t", queue.StateRunning)
	check := func(want *store.Artifact, seen **queue.TaskState, existing **store.Artifact) func(*queue.TaskState, *store.Artifact) (*store.Artifact, error) {
		return func(ts *queue.TaskState, ex *store.Artifact) (*store.Artifact, error) {
			*seen, *existing = ts, ex
			return want, nil
		}
	}

	_, err := e.s.CreateArtifact(e.ctx, store.CreateArtifactParams{TaskID: "unknown", RunID: 0, Name: "x", Now: Epoch,
		Check: func(*queue.TaskState, *store.Artifact) (*store.Artifact, error) {
			t.Fatal("Check called for an unknown task")
			return nil, nil
		}})
	require.ErrorIs(t, err, store.ErrNotFound)

	blob := &store.Artifact{TaskID: "t", RunID: 0, Name: "public/build.tar.gz", StorageType: "s3", ContentType: "application/gzip",
		Details: []byte(`{"key":"t/0/public/build.tar.gz"}`), Expires: Epoch.Add(24 * time.Hour)}
	var seen *queue.TaskState
	var existing *store.Artifact
	got, err := e.s.CreateArtifact(e.ctx, store.CreateArtifactParams{TaskID: "t", RunID: 0, Name: blob.Name, Now: Epoch, Check: check(blob, &seen, &existing)})
	require.NoError(t, err)
	require.Equal(t, blob, got)
	require.Nil(t, existing)
	require.Equal(t, e.get("t"), seen, "Check sees the current task")

	stored, err := e.s.GetArtifact(e.ctx, "t", 0, blob.Name)
	require.NoError(t, err)
	require.Equal(t, blob, stored)
	require.False(t, stored.Present)

	require.NoError(t, e.s.MarkArtifactPresent(e.ctx, "t", 0, blob.Name))
	stored, err = e.s.GetArtifact(e.ctx, "t", 0, blob.Name)
	require.NoError(t, err)
	require.True(t, stored.Present)
	require.ErrorIs(t, e.s.MarkArtifactPresent(e.ctx, "t", 0, "nope"), store.ErrNotFound)
	require.ErrorIs(t, e.s.MarkArtifactPresent(e.ctx, "t", 1, blob.Name), store.ErrNotFound)

	// A second create sees the stored artifact; a refusal changes nothing.
	refused := errors.New("refused")
	_, err = e.s.CreateArtifact(e.ctx, store.CreateArtifactParams{TaskID: "t", RunID: 0, Name: blob.Name, Now: Epoch,
		Check: func(ts *queue.TaskState, ex *store.Artifact) (*store.Artifact, error) {
			existing = ex
			return nil, refused
		}})
	require.ErrorIs(t, err, refused)
	require.Equal(t, stored, existing)
	after, err := e.s.GetArtifact(e.ctx, "t", 0, blob.Name)
	require.NoError(t, err)
	require.Equal(t, stored, after)

	// Replacing overwrites every field.
	ref := &store.Artifact{TaskID: "t", RunID: 0, Name: blob.Name, StorageType: "reference", ContentType: "text/html",
		Details: []byte(`{"url":"https://example.com"}`), Expires: Epoch.Add(time.Hour), Present: true}
	_, err = e.s.CreateArtifact(e.ctx, store.CreateArtifactParams{TaskID: "t", RunID: 0, Name: blob.Name, Now: Epoch, Check: check(ref, &seen, &existing)})
	require.NoError(t, err)
	after, err = e.s.GetArtifact(e.ctx, "t", 0, blob.Name)
	require.NoError(t, err)
	require.Equal(t, ref, after)

	// Check sees the task as it is now: resolved.
	e.mustApply("t", Epoch.Add(time.Minute), report(queue.StateCompleted, 0, Epoch.Add(time.Minute)))
	e.artifact("t", 0, "public/late.log", Epoch.Add(time.Hour))
	_, err = e.s.CreateArtifact(e.ctx, store.CreateArtifactParams{TaskID: "t", RunID: 0, Name: "x", Now: Epoch, Check: check(ref, &seen, &existing)})
	require.NoError(t, err)
	require.Equal(t, queue.StateCompleted, seen.State())

	list, next, err := e.s.ListArtifacts(e.ctx, "t", 0, store.Page{})
	require.NoError(t, err)
	require.Empty(t, next)
	require.Len(t, list, 3)
	require.Equal(t, "public/build.tar.gz", list[0].Name)
	list, _, err = e.s.ListArtifacts(e.ctx, "t", 1, store.Page{})
	require.NoError(t, err)
	require.Empty(t, list)

	_, err = e.s.GetArtifact(e.ctx, "t", 0, "nope")
	require.ErrorIs(t, err, store.ErrNotFound)
}
