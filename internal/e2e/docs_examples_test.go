package e2e_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
)

// docsNotYetRun are the documents whose blocks no test runs yet, each with
// why. The list only shrinks: a guide leaves it once every block of it is
// marked and run.
var docsNotYetRun = map[string]string{}

// blocksNotYetRun are single blocks no test runs yet, by "file:first line
// of the block", each with why; the list only shrinks.
var blocksNotYetRun = map[string]string{
	"docs/production.md:systemctl daemon-reload && systemctl enable --now hopper": "starts the unit: needs a machine booted with systemd (PID 1); TestProductionSystemdInstall runs the install block and systemd-analyze verify",
}

// TestEveryDocExampleIsRun holds README.md and docs/*.md to their promise:
// every fenced block is an example marked "<!-- example: NAME -->", NAME
// is unique, and a test asks for it by that name (e2e.DocExample with the
// literal "NAME"), so that the guide is the test's input.
func TestEveryDocExampleIsRun(t *testing.T) {
	t.Parallel()
	blocks, err := e2e.DocBlocks()
	require.NoError(t, err)
	require.NotEmpty(t, blocks)

	tests := testSources(t)
	seen := map[string]string{}
	stillPending := map[string]bool{}
	for _, b := range blocks {
		first, _, _ := strings.Cut(b.Text, "\n")
		key := b.File + ":" + first
		if b.Name == "" {
			if _, ok := docsNotYetRun[b.File]; ok {
				continue
			}
			if _, ok := blocksNotYetRun[key]; ok {
				stillPending[key] = true
				continue
			}
			t.Errorf("%s: a %q block with no <!-- example: NAME --> marker: mark it and run it in a test", b.Where(), b.Lang)
			continue
		}
		if where, dup := seen[b.Name]; dup {
			t.Errorf("%s: example %s is also at %s", b.Where(), b.Name, where)
		}
		seen[b.Name] = b.Where()
		if !strings.Contains(tests, strconv.Quote(b.Name)) {
			t.Errorf("%s: no test asks for example %s (e2e.DocExample(t, %q))", b.Where(), b.Name, b.Name)
		}
	}
	for key := range blocksNotYetRun {
		if !stillPending[key] {
			t.Errorf("blocksNotYetRun lists %q, which is now marked or gone: remove it", key)
		}
	}
}

// testSources returns every _test.go file of the repository, concatenated.
func testSources(t *testing.T) string {
	t.Helper()
	var all strings.Builder
	root := e2e.RepoRoot()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git" || d.Name() == "web") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, "_test.go") {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			all.Write(data)
		}
		return nil
	})
	require.NoError(t, err)
	return all.String()
}

// TestDocBlocksParse pins the marker syntax.
func TestDocBlocksParse(t *testing.T) {
	t.Parallel()
	blocks, err := e2e.ParseDocBlocks("x.md", []byte("text\n<!-- example: a-1 -->\n```sh\necho hi\n```\n\n```\nplain\n```\n"))
	require.NoError(t, err)
	require.Equal(t, []e2e.DocBlock{
		{File: "x.md", Line: 3, Lang: "sh", Name: "a-1", Text: "echo hi\n"},
		{File: "x.md", Line: 7, Lang: "", Name: "", Text: "plain\n"},
	}, blocks)
	_, err = e2e.ParseDocBlocks("x.md", []byte("<!-- example: Bad Name -->\n```sh\n```\n"))
	require.ErrorContains(t, err, "x.md:1: an example marker is")
	_, err = e2e.ParseDocBlocks("x.md", []byte("```sh\necho\n"))
	require.ErrorContains(t, err, "never closed")
}
