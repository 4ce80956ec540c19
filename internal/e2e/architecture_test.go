package e2e_test

import (
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
)

const modulePath = "github.com/hopper-ci/hopper/"

// architectureRows reads the package table of docs/ARCHITECTURE.md: for
// each package named in a row's first column (relative to the module), the
// dependencies its last column lists, by their last path element: empty
// for "—", nil for a row that sums them up in words ("everything below").
func architectureRows(t *testing.T) map[string][]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(e2e.RepoRoot(), "docs", "ARCHITECTURE.md"))
	require.NoError(t, err)
	_, table, found := strings.Cut(string(doc), "\n## Packages\n")
	require.True(t, found, "docs/ARCHITECTURE.md has no Packages section")
	quoted := regexp.MustCompile("`([^`]+)`")
	rows := map[string][]string{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| `") || len(cells) < 5 {
			continue
		}
		var deps []string
		if strings.TrimSpace(cells[len(cells)-2]) == "—" {
			deps = []string{}
		}
		for _, m := range quoted.FindAllStringSubmatch(cells[len(cells)-2], -1) {
			deps = append(deps, filepath.Base(m[1]))
		}
		for _, m := range quoted.FindAllStringSubmatch(cells[1], -1) {
			rows[strings.TrimSuffix(m[1], "/")] = deps
		}
	}
	return rows
}

// TestArchitectureDocCoversEveryPackage holds docs/ARCHITECTURE.md to the
// code: every Go package has a row, and a row that lists dependencies
// lists exactly the module's packages that package imports (outside its
// tests), so a new maintainer can trust the table.
func TestArchitectureDocCoversEveryPackage(t *testing.T) {
	t.Parallel()
	root := e2e.RepoRoot()
	rows := architectureRows(t)
	dirs := map[string]bool{}
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			require.NoError(t, err)
			dirs[filepath.ToSlash(rel)] = true
		}
		return nil
	}))
	for dir := range dirs {
		deps, ok := rows[dir]
		if !assert.True(t, ok, "docs/ARCHITECTURE.md has no row for package %s", dir) || deps == nil {
			continue
		}
		pkg, err := build.ImportDir(filepath.Join(root, dir), 0)
		if _, testsOnly := err.(*build.NoGoError); testsOnly {
			continue
		}
		require.NoError(t, err, "reading package %s", dir)
		imports := []string{}
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, modulePath) {
				imports = append(imports, filepath.Base(imp))
			}
		}
		sort.Strings(imports)
		sort.Strings(deps)
		assert.Equal(t, imports, deps, "docs/ARCHITECTURE.md: the dependencies of %s", dir)
	}
}

// TestServerImportsNoClientSide keeps the HTTP line docs/ARCHITECTURE.md
// draws: nothing internal/server builds on, however indirectly, is a
// worker package (what `go list -deps ./internal/server | grep worker`
// checks by hand).
func TestServerImportsNoClientSide(t *testing.T) {
	t.Parallel()
	root := e2e.RepoRoot()
	seen := map[string]bool{}
	var walk func(importPath string)
	walk = func(importPath string) {
		if seen[importPath] {
			return
		}
		seen[importPath] = true
		isWorker := importPath == modulePath+"internal/worker" || strings.HasPrefix(importPath, modulePath+"internal/worker/")
		assert.False(t, isWorker, "internal/server depends on a worker package: %s", importPath)
		pkg, err := build.ImportDir(filepath.Join(root, strings.TrimPrefix(importPath, modulePath)), 0)
		require.NoError(t, err, "reading package %s", importPath)
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, modulePath) {
				walk(imp)
			}
		}
	}
	walk(modulePath + "internal/server")
	assert.Greater(t, len(seen), 10, "the walk found internal/server's packages")
}
