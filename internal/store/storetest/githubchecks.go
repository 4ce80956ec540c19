package storetest

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
)

func checkEntry(c store.GithubCheck, body string) *store.GithubOutboxEntry {
	return &store.GithubOutboxEntry{Host: c.Host, Key: "check:" + c.TaskID + "/0", Kind: "check_run", Replace: true,
		Owner: "o", Repo: "r", Target: c.TaskID + "/0", Body: []byte(body)}
}

func testGithubChecks(t *testing.T, open Opener) {
	e := setup(t, open)
	c := store.GithubCheck{Host: "github.com", TaskID: "t1", RunID: 0, TaskGroupID: "g1", State: "queued"}
	steps := []struct {
		state string
		moves bool
	}{
		{"queued", true},
		{"queued", false},
		{"in_progress", true},
		{"queued", false}, // never backwards
		{"completed", true},
		{"in_progress", false},
		{"completed", false},
	}
	for i, s := range steps {
		c.State = s.state
		moved, err := e.s.AdvanceGithubCheck(e.ctx, c, Epoch, checkEntry(c, `{"status":"`+s.state+`"}`))
		require.NoError(t, err, "step %d", i)
		require.Equal(t, s.moves, moved, "step %d (%s)", i, s.state)
		got, err := e.s.GetGithubOutbox(e.ctx, "github.com", "check:t1/0")
		require.NoError(t, err)
		require.Equal(t, expectBody(i, steps), string(got.Body), "step %d", i)
	}
	_, err := e.s.AdvanceGithubCheck(e.ctx, store.GithubCheck{Host: "github.com", TaskID: "t1", TaskGroupID: "g1", State: "done"}, Epoch, nil)
	require.Error(t, err)
	// Another run is another check; another group's checks are not listed.
	moved, err := e.s.AdvanceGithubCheck(e.ctx, store.GithubCheck{Host: "github.com", TaskID: "t1", RunID: 1, TaskGroupID: "g1", State: "in_progress"}, Epoch, nil)
	require.NoError(t, err)
	require.True(t, moved)
	_, err = e.s.AdvanceGithubCheck(e.ctx, store.GithubCheck{Host: "github.com", TaskID: "t2", TaskGroupID: "g2", State: "queued"}, Epoch, nil)
	require.NoError(t, err)

	require.ErrorIs(t, e.s.SetGithubCheckRunID(e.ctx, store.SetGithubCheckRunIDParams{Host: "github.com", TaskID: "t9", RunID: 0, CheckRunID: 5}), store.ErrNotFound)
	require.NoError(t, e.s.SetGithubCheckRunID(e.ctx, store.SetGithubCheckRunIDParams{Host: "github.com", TaskID: "t1", RunID: 1, CheckRunID: 42}))
	got, err := e.s.GetGithubCheck(e.ctx, "github.com", "t1", 1)
	require.NoError(t, err)
	require.Equal(t, store.GithubCheck{Host: "github.com", TaskID: "t1", RunID: 1, TaskGroupID: "g1", State: "in_progress", CheckRunID: 42}, *got)
	_, err = e.s.GetGithubCheck(e.ctx, "gitea.example.com", "t1", 1)
	require.ErrorIs(t, err, store.ErrNotFound)
	found, err := e.s.FindGithubCheck(e.ctx, "github.com", 42)
	require.NoError(t, err)
	require.Equal(t, got, found)
	for _, id := range []int64{0, 41} {
		_, err = e.s.FindGithubCheck(e.ctx, "github.com", id)
		require.ErrorIs(t, err, store.ErrNotFound, "check run %d", id)
	}
	_, err = e.s.FindGithubCheck(e.ctx, "gitea.example.com", 42)
	require.ErrorIs(t, err, store.ErrNotFound)

	list, err := e.s.ListGithubChecks(e.ctx, "g1")
	require.NoError(t, err)
	require.Equal(t, []store.GithubCheck{
		{Host: "github.com", TaskID: "t1", RunID: 0, TaskGroupID: "g1", State: "completed"},
		{Host: "github.com", TaskID: "t1", RunID: 1, TaskGroupID: "g1", State: "in_progress", CheckRunID: 42},
	}, list)
	list, err = e.s.ListGithubChecks(e.ctx, "none")
	require.NoError(t, err)
	require.Empty(t, list)
}

// expectBody is the outbox body after step i: that of the last step that
// moved the check.
func expectBody(i int, steps []struct {
	state string
	moves bool
}) string {
	for ; i >= 0; i-- {
		if steps[i].moves {
			return `{"status":"` + steps[i].state + `"}`
		}
	}
	return ""
}

// testGithubCheckRace: replicas advancing one check to different states at
// once leave it at the furthest state, and each state is queued once.
func testGithubCheckRace(t *testing.T, open Opener) {
	e := setup(t, open)
	const replicas = 8
	var wg sync.WaitGroup
	moves := make(chan string, 3*replicas)
	for i := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, s := range []string{"queued", "in_progress", "completed"}[i%3:] {
				c := store.GithubCheck{Host: "github.com", TaskID: "race", TaskGroupID: "g", State: s}
				moved, err := e.s.AdvanceGithubCheck(e.ctx, c, Epoch, checkEntry(c, `{"status":"`+s+`"}`))
				if err != nil {
					t.Error(err)
					return
				}
				if moved {
					moves <- s
				}
			}
		}()
	}
	wg.Wait()
	close(moves)
	seen := map[string]int{}
	for s := range moves {
		seen[s]++
	}
	for s, n := range seen {
		require.Equal(t, 1, n, "state %s moved to %d times", s, n)
	}
	require.Equal(t, 1, seen["completed"])
	got, err := e.s.GetGithubCheck(e.ctx, "github.com", "race", 0)
	require.NoError(t, err)
	require.Equal(t, "completed", got.State)
	entry, err := e.s.GetGithubOutbox(e.ctx, "github.com", "check:race/0")
	require.NoError(t, err)
	require.Equal(t, `{"status":"completed"}`, string(entry.Body))
}
