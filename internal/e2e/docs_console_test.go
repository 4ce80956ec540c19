package e2e_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
)

// TestConsoleGuideRebuild runs docs/console.md's rebuild block as written
// in a copy of the repository's tracked files, so that its npm ci and
// build do not rewrite web/node_modules and internal/ui/static under the
// other packages' tests: the console's packages installed, the bundle
// built, the unit tests and the browser test run, and the bundle it
// built is the one committed.
func TestConsoleGuideRebuild(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips npm ci, the console's build and its browser test")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed: the console guide's rebuild block needs Node.js and npm (Debian's nodejs and npm)")
	}
	root := e2e.RepoRoot()
	ls := exec.Command("git", "ls-files", "-z")
	ls.Dir = root
	out, err := ls.Output()
	if err != nil {
		t.Skipf("not a git checkout (git ls-files: %v): the copy of the repository is made from its tracked files", err)
	}
	copyDir := t.TempDir()
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		copyTracked(t, filepath.Join(root, name), filepath.Join(copyDir, name))
	}

	// The browser test's optional 10,000-task group (CI sets it for the
	// console's own run) would only slow this second run down.
	res, err := e2e.DocShell{Dir: copyDir, Timeout: 15 * time.Minute, Env: []string{"HOPPER_UI_BIG_GROUP="}}.
		Run(t, e2e.DocExample(t, "console-rebuild"))
	require.NoError(t, err, res)
	require.Regexp(t, `(?m)^ok\s+github\.com/hopper-ci/hopper/internal/ui\b`, res, "the console's browser test ran")

	// The bundle the guide's build made is the committed one (CI checks
	// the same of the real tree).
	for _, name := range []string{"app.js", "style.css"} {
		built, err := os.ReadFile(filepath.Join(copyDir, "internal", "ui", "static", name))
		require.NoError(t, err)
		committed, err := os.ReadFile(filepath.Join(root, "internal", "ui", "static", name))
		require.NoError(t, err)
		require.True(t, bytes.Equal(committed, built), "internal/ui/static/%s differs from what web/src builds", name)
	}
}

// copyTracked copies one tracked file (or symlink) from to to.
func copyTracked(t *testing.T, from, to string) {
	t.Helper()
	info, err := os.Lstat(from)
	if os.IsNotExist(err) {
		return // deleted in the working tree
	}
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(to), 0o755))
	if info.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(from)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(target, to))
		return
	}
	src, err := os.Open(from)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
}
