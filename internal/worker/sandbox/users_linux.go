package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/retry"
)

// prepareUsers makes sure every slot has its task user (creating missing
// ones with useradd) and a home directory. Task users exist only when the
// worker runs as root and task users can reach the tasks directory.
func prepareUsers(cfg Config) ([]*User, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the worker is not running as root, so tasks run as its own user")
	}
	if err := checkSearchable(cfg.TasksDir); err != nil {
		return nil, err
	}
	if cfg.HomesDir == "" {
		return nil, errors.New("no directory for task homes configured")
	}
	if err := os.MkdirAll(cfg.HomesDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating task homes: %w", err)
	}
	if err := checkSearchable(cfg.HomesDir); err != nil {
		return nil, err
	}
	users := make([]*User, cfg.Slots)
	for i := range users {
		name := cfg.UserPrefix + strconv.Itoa(i+1)
		u, err := ensureUser(name)
		if err != nil {
			return nil, err
		}
		u.Home = filepath.Join(cfg.HomesDir, name)
		u.Tmp = filepath.Join(cfg.HomesDir, name+".tmp")
		u.VarTmp = filepath.Join(cfg.HomesDir, name+".vartmp")
		if err := resetHome(u); err != nil {
			return nil, err
		}
		users[i] = u
	}
	return users, nil
}

// checkSearchable checks that every directory from / down to dir lets
// other users pass (o+x), so a task user can reach its directory there.
func checkSearchable(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", dir, err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err == nil && fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("task users cannot reach %s: %s is not searchable by other users (chmod o+x it, or use another work dir)", abs, d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// ensureUser looks up name and creates it as a system user with its own
// group if it does not exist. Concurrent workers may race to create the
// same user, and useradd fails while another holds the passwd lock, so
// failures are retried after a look-up.
func ensureUser(name string) (*User, error) {
	var u *User
	policy := retry.Policy{Attempts: 20, Delay: func(n int) time.Duration { return time.Duration(50+n*20) * time.Millisecond }}
	err := retry.Do(context.Background(), policy, func(int) error {
		var err error
		if u, err = lookupUser(name); u != nil || err != nil {
			return retry.Stop(err)
		}
		out, err := exec.Command("useradd", "--system", "--user-group", "--no-create-home",
			"--home-dir", "/nonexistent", "--shell", "/bin/sh", name).CombinedOutput()
		switch {
		case err == nil:
			if u, err = lookupUser(name); u != nil || err != nil {
				return retry.Stop(err)
			}
			return fmt.Errorf("creating task user %s: useradd succeeded but the user is not found", name)
		case errors.Is(err, exec.ErrNotFound):
			return retry.Stop(fmt.Errorf("creating task user %s: useradd is not installed", name))
		}
		return fmt.Errorf("creating task user %s: %v: %s", name, err, strings.TrimSpace(string(out)))
	})
	return u, err
}

// lookupUser returns the task user name, or nil if there is none.
func lookupUser(name string) (*User, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, nil
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid == 0 {
		return nil, fmt.Errorf("task user %s has uid 0", name)
	}
	return &User{Name: name, UID: uid, GID: gid}, nil
}

// resetHome empties the user's home directory, so nothing one task left
// there reaches the next task of the slot.
func resetHome(u *User) error {
	for _, dir := range []string{u.Home, u.Tmp, u.VarTmp} {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("emptying %s of %s: %w", dir, u.Name, err)
		}
		if err := os.Mkdir(dir, 0o700); err != nil {
			return fmt.Errorf("creating %s for %s: %w", dir, u.Name, err)
		}
		if err := os.Chown(dir, u.UID, u.GID); err != nil {
			return fmt.Errorf("handing %s to %s: %w", dir, u.Name, err)
		}
	}
	return nil
}

// Own hands the tree at path to the task's user (directories and files
// the worker prepared, such as mounts and caches), except the subtrees
// listed, and makes its top private to that user. Without a task user it
// does nothing.
func (t *Task) Own(path string, except ...string) error {
	if t.user == nil {
		return nil
	}
	uid, gid := t.user.UID, t.user.GID
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if slices.Contains(except, p) {
			return fs.SkipDir
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		return fmt.Errorf("handing %s to %s: %w", path, t.user.Name, err)
	}
	if err := os.Chmod(path, 0o700); err != nil {
		return fmt.Errorf("making %s private: %w", path, err)
	}
	return nil
}
