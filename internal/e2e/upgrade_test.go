package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
)

// previousRelease is the commit of the last release (CHANGELOG.md: 0.1.0,
// schema migrations 001–008). Move it forward at each release.
const previousRelease = "1e64542"

var releaseBuild sync.Mutex

// releaseBinary builds hopper as it was at commit, from this repository's
// history, once per machine (kept in the user's cache directory,
// ~/.cache/hopper-test, with the tests' other slow components), or
// skips when the history is not there (a shallow clone).
func releaseBinary(t *testing.T, commit string) string {
	t.Helper()
	needTool(t, "git", "tar")
	// The tests that need it run in parallel; one builds, the others wait.
	releaseBuild.Lock()
	defer releaseBuild.Unlock()
	root := e2e.RepoRoot()
	if err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").Run(); err != nil {
		t.Skipf("commit %s is not in this clone's history (shallow clone?): %v", commit, err)
	}
	cache, err := os.UserCacheDir()
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(cache, "hopper-test"), 0o755))
	bin := filepath.Join(cache, "hopper-test", "hopper-release-"+commit)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive %s | tar -x -C %q", root, commit, src))
	out, err := archive.CombinedOutput()
	require.NoError(t, err, "extracting %s: %s", commit, out)
	tmp := fmt.Sprintf("%s.%d.building", bin, os.Getpid())
	build := exec.Command("go", "build", "-o", tmp, "./cmd/hopper")
	build.Dir = src
	out, err = build.CombinedOutput()
	require.NoError(t, err, "building %s: %s", commit, out)
	require.NoError(t, os.Rename(tmp, bin))
	return bin
}

// TestUpgradeFromPreviousRelease follows docs/production.md's "Upgrades
// and rollback": data written by the previous release (its binary, its
// schema) is served by this build after its migrations ran at start; and
// the rollback (the backup taken before the upgrade, with the previous
// binary) gives the data back as it was.
func TestUpgradeFromPreviousRelease(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips building and running hopper binaries")
	}
	needTool(t, "sqlite3", "cp")
	old := releaseBinary(t, previousRelease)
	data := t.TempDir()
	before := e2e.StartServer(t, e2e.ServerOptions{DataDir: data, Binary: old})
	want := populate(t, before, 10)
	before.Stop()

	backup := t.TempDir()
	runTool(t, "sqlite3", filepath.Join(data, "hopper.db"), ".backup '"+filepath.Join(backup, "hopper.db")+"'")
	runTool(t, "cp", "-a", filepath.Join(data, "blobs"), filepath.Join(data, "secret.key"), backup)

	upgraded := e2e.StartServer(t, e2e.ServerOptions{DataDir: data})
	verifyRestored(t, upgraded, want)
	anonymousFindsTasks(t, upgraded, want)
	more := populate(t, upgraded, 5)
	verifyRestored(t, upgraded, more)
	upgraded.Stop()

	// Rollback: the previous binary on the backup taken before the upgrade.
	require.NoError(t, os.RemoveAll(data))
	require.NoError(t, os.MkdirAll(data, 0o700))
	runTool(t, "cp", "-a", filepath.Join(backup, "hopper.db"), filepath.Join(backup, "blobs"), filepath.Join(backup, "secret.key"), data)
	rolledBack := e2e.StartServer(t, e2e.ServerOptions{DataDir: data, Binary: old})
	verifyRestored(t, rolledBack, want)
}

// TestUpgradeFromPreviousReleasePostgres is the upgrade on PostgreSQL.
func TestUpgradeFromPreviousReleasePostgres(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips building and running hopper binaries")
	}
	db := e2e.FreshPostgres(t)
	old := releaseBinary(t, previousRelease)
	data := t.TempDir()
	before := e2e.StartServer(t, e2e.ServerOptions{DataDir: data, Binary: old, Args: []string{"--db", db}})
	want := populate(t, before, 10)
	before.Stop()
	upgraded := e2e.StartServer(t, e2e.ServerOptions{DataDir: data, Args: []string{"--db", db}})
	verifyRestored(t, upgraded, want)
	anonymousFindsTasks(t, upgraded, want)
	verifyRestored(t, upgraded, populate(t, upgraded, 5))
}

// anonymousFindsTasks checks that the task history is open to anonymous
// callers after the upgrade, as on a new deployment: the previous release
// created the anonymous role without hopper:list-tasks, and migration 019
// gives it to a role still as that release created it.
func anonymousFindsTasks(t *testing.T, srv *e2e.Server, want map[string]string) {
	t.Helper()
	resp, err := http.Get(srv.RootURL + "/api/hopper/v1/tasks?taskQueueId=backup/test&limit=1000")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "an anonymous listing of past tasks")
	var page struct {
		Tasks []struct {
			Status struct {
				TaskID string `json:"taskId"`
			} `json:"status"`
		} `json:"tasks"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&page))
	found := map[string]bool{}
	for _, task := range page.Tasks {
		found[task.Status.TaskID] = true
	}
	for id := range want {
		require.True(t, found[id], "task %s written by the previous release is listed", id)
	}
}
