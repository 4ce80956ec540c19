package e2e_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
)

// markdownAnchor is the fragment GitHub gives a heading: lower case, spaces
// to hyphens, punctuation other than hyphens and underscores dropped.
func markdownAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestDocsLinks checks that every relative link of the README and the
// guides in docs/ names a file that exists and, with a fragment, a heading
// of that file: the README is the front door, and a guide it points at
// that was renamed or split must not leave a dead link behind.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	root := e2e.RepoRoot()
	files := []string{filepath.Join(root, "README.md")}
	for _, pattern := range []string{"docs/*.md", "docs/contract/*.md"} {
		more, err := filepath.Glob(filepath.Join(root, pattern))
		require.NoError(t, err)
		files = append(files, more...)
	}
	link := regexp.MustCompile(`\]\(([^)#\s]*)(#[^)\s]*)?\)`)
	heading := regexp.MustCompile(`(?m)^#+ (.*)$`)
	fence := regexp.MustCompile("(?s)```.*?```")
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		doc, err := os.ReadFile(path)
		require.NoError(t, err)
		a := map[string]bool{}
		for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(string(doc), ""), -1) {
			a[markdownAnchor(m[1])] = true
		}
		anchors[path] = a
		return a
	}
	for _, file := range files {
		doc, err := os.ReadFile(file)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, file)
		for _, m := range link.FindAllStringSubmatch(fence.ReplaceAllString(string(doc), ""), -1) {
			target, fragment := m[1], strings.TrimPrefix(m[2], "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path := file
			if target != "" {
				path = filepath.Join(filepath.Dir(file), target)
			}
			if _, err := os.Stat(path); err != nil {
				assert.Failf(t, "dead link", "%s links to %s, which does not exist", rel, target)
				continue
			}
			if fragment != "" && strings.HasSuffix(path, ".md") {
				assert.Truef(t, anchorsOf(path)[fragment], "%s links to %s#%s: no such heading", rel, target, fragment)
			}
		}
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	assert.Less(t, strings.Count(string(readme), "\n"), 400, "the README is the front door: guides belong in docs/")
}
