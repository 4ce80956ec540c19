package worker

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// claimWorkDir takes the work dir for this worker (an exclusive lock held
// while Run runs, so two live workers never share one) and removes
// every task directory and temporary directory a previous life of the
// worker left: a crashed run's files would otherwise be readable by the
// next task of the same slot user. It runs before the first claim.
func (w *Worker) claimWorkDir() error {
	lock, err := os.OpenFile(filepath.Join(w.cfg.WorkDir, ".worker.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("locking the work dir: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return fmt.Errorf("work dir %s is in use by another running worker: %w", w.cfg.WorkDir, err)
	}
	// Run closes the descriptor, and with it the lock, when it returns.
	w.workDirLock = lock
	var removed int
	for _, d := range []struct{ dir, prefix string }{{w.cfg.TasksDir, "task_"}, {w.cfg.WorkDir, "tmp-task_"}} {
		entries, err := os.ReadDir(d.dir)
		if err != nil {
			return fmt.Errorf("listing %s: %w", d.dir, err)
		}
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), d.prefix) {
				continue
			}
			if err := os.RemoveAll(filepath.Join(d.dir, e.Name())); err != nil {
				return fmt.Errorf("removing a previous run's directory: %w", err)
			}
			removed++
		}
	}
	if removed > 0 {
		w.logger.Info("removed the task directories a previous run of this worker left", "count", removed)
	}
	return nil
}

// retireTaskDir makes a task directory kept after its run (cleanUpTaskDirs
// false) the worker's alone: the slot's user runs later tasks, which must
// not read this one's files.
func retireTaskDir(dir string) error {
	if err := os.Chown(dir, os.Geteuid(), os.Getegid()); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}
