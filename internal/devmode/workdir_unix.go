//go:build unix

package devmode

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// WorkerDir returns where `hopper dev` with dataDir keeps its worker's
// files (see workerDir), without creating it: tests remove it when done.
func WorkerDir(dataDir string) (string, error) {
	if os.Geteuid() != 0 {
		return filepath.Join(dataDir, "worker"), nil
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", dataDir, err)
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(os.TempDir(), "hopper-dev-worker-"+hex.EncodeToString(sum[:6])), nil
}

// workerDir is where the built-in worker keeps task directories, caches and
// the task users' homes. The data directory is private (0700: it holds the
// root token and the server key), so when the worker runs as root and
// hands each task to an unprivileged user, that user could not reach a
// work dir inside it, and every start and every task log would say the
// sandbox lacks task users. Under root the work dir is therefore a
// directory of its own in the system's temporary directory, named after
// the data directory so that caches survive a restart, and checked to be
// root's own (not a symlink, not writable by others) before it is used.
func workerDir(dataDir string) (string, error) {
	dir, err := WorkerDir(dataDir)
	if err != nil || os.Geteuid() != 0 {
		return dir, err
	}
	if err := os.Mkdir(dir, 0o711); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("creating the dev worker's work dir: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("checking the dev worker's work dir: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
		return "", fmt.Errorf("%s is not a directory of root's that only root may write; remove it and start again", dir)
	}
	return dir, nil
}
