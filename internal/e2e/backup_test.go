package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// These tests follow docs/production.md's "Backups and restore" with the
// real tools it names: back up a running hopper, wipe everything, restore,
// and find every task and every artifact's bytes again.

// populate creates n tasks on srv, each claimed, given an artifact with
// distinct content and completed, and returns taskId → content.
func populate(t *testing.T, srv *e2e.Server, n int) map[string]string {
	t.Helper()
	ctx := context.Background()
	root := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	const queue = "backup/test"
	for range n {
		def := backupTaskDef(queue)
		_, err := root.CreateTask(ctx, tcclient.NewTaskID(), def)
		require.NoError(t, err)
	}
	out := map[string]string{}
	for len(out) < n {
		resp, err := root.ClaimWork(ctx, queue, &tcclient.ClaimWorkRequest{WorkerGroup: "backup", WorkerID: "w1", Tasks: n - len(out)})
		require.NoError(t, err)
		for _, c := range resp.Tasks {
			id := c.Status.TaskID
			worker := root.WithCredentials(&c.Credentials)
			content := fmt.Sprintf("artifact of %s, kept across a restore\n", id)
			art, err := worker.CreateArtifact(ctx, id, c.RunID, "public/result.txt", &tcclient.CreateArtifactRequest{
				StorageType: tcclient.StorageS3, Expires: c.Task.Expires, ContentType: "text/plain",
			})
			require.NoError(t, err)
			require.NoError(t, tcclient.BytesUpload(art.PutURL, "text/plain", "", []byte(content)).Do(ctx))
			_, err = worker.ReportCompleted(ctx, id, c.RunID)
			require.NoError(t, err)
			out[id] = content
		}
	}
	return out
}

func backupTaskDef(queue string) *tcclient.TaskDefinition {
	now := time.Now()
	return &tcclient.TaskDefinition{
		TaskQueueID: queue, Created: tcclient.NewTime(now), Deadline: tcclient.NewTime(now.Add(time.Hour)),
		Payload:  []byte(`{}`),
		Metadata: tcclient.TaskMetadata{Name: "backed up", Description: "d", Owner: "ops@example.com", Source: "https://example.com/backup"},
	}
}

// verify checks that every task of want is completed and its artifact
// holds its bytes.
func verifyRestored(t *testing.T, srv *e2e.Server, want map[string]string) {
	t.Helper()
	ctx := context.Background()
	root := &tcclient.Client{RootURL: srv.RootURL, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	for id, content := range want {
		st, err := root.Status(ctx, id)
		require.NoError(t, err, "task %s is back", id)
		require.Equal(t, tcclient.StateCompleted, st.State)
		red, err := root.GetLatestArtifact(ctx, id, "public/result.txt")
		require.NoError(t, err)
		resp, err := http.Get(red.URL)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, resp.Body.Close())
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "artifact of %s", id)
		require.Equal(t, content, string(body))
	}
}

func runTool(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	require.NoError(t, err, "%s %v: %s", name, args, out)
}

func needTool(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("%s not installed", n)
		}
	}
}

// TestBackupRestoreSQLite: the SQLite file copied online with sqlite3's
// .backup, then the blobs and the server key; the data dir wiped and
// restored from the copies.
func TestBackupRestoreSQLite(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	needTool(t, "sqlite3", "cp")
	data := t.TempDir()
	srv := e2e.StartServer(t, e2e.ServerOptions{DataDir: data})
	want := populate(t, srv, 20)

	backup := t.TempDir()
	sh := e2e.DocShell{Replace: []string{"/var/lib/hopper", data, "/backup", backup}}
	out, err := sh.Run(t, e2e.DocExample(t, "production-backup-sqlite"))
	require.NoError(t, err, out)
	srv.Stop()

	require.NoError(t, os.RemoveAll(data))
	require.NoError(t, os.MkdirAll(data, 0o700))
	// The guide's restore, its SQLite line (systemctl is not here).
	out, err = sh.Run(t, docLine(t, e2e.DocExample(t, "production-restore"), "cp -a /backup/hopper.db"))
	require.NoError(t, err, out)

	restored := e2e.StartServer(t, e2e.ServerOptions{DataDir: data})
	verifyRestored(t, restored, want)
}

// TestBackupRestorePostgres: pg_dump in custom format while hopper runs,
// the blobs and the server key beside it; the database dropped, created
// again and filled with pg_restore.
func TestBackupRestorePostgres(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	needTool(t, "pg_dump", "pg_restore", "cp")
	db := e2e.FreshPostgres(t)
	data := t.TempDir()
	srv := e2e.StartServer(t, e2e.ServerOptions{DataDir: data, Args: []string{"--db", db}})
	want := populate(t, srv, 20)

	backup := t.TempDir()
	sh := e2e.DocShell{Replace: []string{"/var/lib/hopper", data, "/backup", backup, "postgres://hopper@db/hopper", "'" + db + "'"}}
	out, err := sh.Run(t, e2e.DocExample(t, "production-backup-postgres"))
	require.NoError(t, err, out)
	srv.Stop()

	// Wipe: every table and row, every blob, the key.
	runTool(t, "psql", db, "-c", "DROP SCHEMA public CASCADE", "-c", "CREATE SCHEMA public")
	require.NoError(t, os.RemoveAll(data))
	require.NoError(t, os.MkdirAll(data, 0o700))

	// The guide's restore, its PostgreSQL line; the blobs and the key as
	// its SQLite line copies them (without the database file).
	restore := e2e.DocShell{Replace: []string{"/backup", backup, "postgres://hopper@db/hopper", "'" + db + "'"}}
	out, err = restore.Run(t, docLine(t, e2e.DocExample(t, "production-restore"), "pg_restore"))
	require.NoError(t, err, out)
	runTool(t, "cp", "-a", filepath.Join(backup, "blobs"), filepath.Join(backup, "secret.key"), data)
	restored := e2e.StartServer(t, e2e.ServerOptions{DataDir: data, Args: []string{"--db", db}})
	verifyRestored(t, restored, want)
}

// docLine is the one line of a shell example that starts with prefix, as
// an example of its own (a guide's block may hold lines for several
// setups, or lines such as systemctl that a test cannot run).
func docLine(t *testing.T, block e2e.DocBlock, prefix string) e2e.DocBlock {
	t.Helper()
	for _, line := range strings.Split(block.Text, "\n") {
		if strings.HasPrefix(line, prefix) {
			block.Text = line + "\n"
			return block
		}
	}
	t.Fatalf("%s: example %s has no line starting %q", block.Where(), block.Name, prefix)
	return block
}
