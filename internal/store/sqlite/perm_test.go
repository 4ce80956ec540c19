package sqlite_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFilesPrivateWhateverTheUmask: the database and its WAL and
// shared-memory files hold every client's secrets; they are created 0600
// even under umask 0, and a file an older build left readable is made
// private when opened. Not parallel: the umask is the process's.
func TestFilesPrivateWhateverTheUmask(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	fresh := filepath.Join(dir, "fresh", "hopper.db")
	// Opening migrates: a write, so the WAL and shared-memory files exist.
	openFile(t, fresh)
	legacy := filepath.Join(dir, "legacy.db")
	require.NoError(t, os.WriteFile(legacy, nil, 0o644))
	openFile(t, legacy)
	for _, p := range []string{fresh, fresh + "-wal", fresh + "-shm", legacy, legacy + "-wal"} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), p)
	}
}
