package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// DocBlock is one fenced code block of README.md or of a guide in docs/.
// A block is an example that a test runs when the line before its opening
// fence is "<!-- example: NAME -->"; the test asks for it by NAME
// (DocExample), so the guide itself is the test's input and an edit to the
// guide is an edit to the test.
type DocBlock struct {
	// File is the document's path relative to the repository root.
	File string
	// Line is the line number of the opening fence.
	Line int
	// Lang is the fence's info string ("sh", "yaml", "" …).
	Lang string
	// Name is the example's NAME, or "" for a block with no marker.
	Name string
	// Text is the block's content, every line ending in "\n".
	Text string
}

// Where says where the block is, for messages.
func (b DocBlock) Where() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

var docMarker = regexp.MustCompile(`^<!-- example: ([a-z0-9][a-z0-9./_-]*) -->$`)

// DocFiles returns README.md and every docs/*.md, relative to the
// repository root.
func DocFiles() ([]string, error) {
	guides, err := filepath.Glob(filepath.Join(RepoRoot(), "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	files := []string{"README.md"}
	for _, g := range guides {
		rel, err := filepath.Rel(RepoRoot(), g)
		if err != nil {
			return nil, err
		}
		files = append(files, rel)
	}
	return files, nil
}

// DocBlocks returns every fenced block of README.md and docs/*.md in order.
func DocBlocks() ([]DocBlock, error) {
	files, err := DocFiles()
	if err != nil {
		return nil, err
	}
	var blocks []DocBlock
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join(RepoRoot(), file))
		if err != nil {
			return nil, fmt.Errorf("reading the examples of %s: %w", file, err)
		}
		bs, err := ParseDocBlocks(file, data)
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, bs...)
	}
	return blocks, nil
}

// ParseDocBlocks splits one Markdown document into its fenced blocks.
// Fences are "```" at the start of a line (the guides indent none).
func ParseDocBlocks(file string, data []byte) ([]DocBlock, error) {
	var (
		blocks []DocBlock
		cur    *DocBlock
		prev   string
		text   strings.Builder
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &DocBlock{File: file, Line: n, Lang: strings.TrimSpace(strings.TrimPrefix(line, "```"))}
			if m := docMarker.FindStringSubmatch(strings.TrimSpace(prev)); m != nil {
				cur.Name = m[1]
			}
			text.Reset()
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.Text = text.String()
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			text.WriteString(line)
			text.WriteByte('\n')
		case strings.HasPrefix(strings.TrimSpace(line), "<!-- example"):
			if !docMarker.MatchString(strings.TrimSpace(line)) {
				return nil, fmt.Errorf("%s:%d: an example marker is `<!-- example: NAME -->` (NAME in a-z0-9./_-): %q", file, n, line)
			}
		}
		prev = line
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: the block is never closed", file, cur.Line)
	}
	return blocks, nil
}

// DocExample returns the block marked "<!-- example: name -->"; it fails
// the test when no block or more than one has that name.
func DocExample(t testing.TB, name string) DocBlock {
	t.Helper()
	blocks, err := DocBlocks()
	if err != nil {
		t.Fatal(err)
	}
	var found []DocBlock
	for _, b := range blocks {
		if b.Name == name {
			found = append(found, b)
		}
	}
	switch len(found) {
	case 0:
		t.Fatalf("neither README.md nor docs/*.md has a block marked <!-- example: %s -->", name)
	case 1:
	default:
		t.Fatalf("%d blocks are marked <!-- example: %s --> (%s and %s)", len(found), name, found[0].Where(), found[1].Where())
	}
	return found[0]
}

// Replace returns the block's text with the guide's placeholders turned
// into the test's values (old, new pairs, in order). Every old string
// must occur in the block, so that a placeholder renamed in the guide
// fails the test rather than going unreplaced.
func (b DocBlock) Replace(t testing.TB, pairs ...string) string {
	t.Helper()
	if len(pairs)%2 != 0 {
		t.Fatal("Replace takes old, new pairs")
	}
	text := b.Text
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(text, pairs[i]) {
			t.Fatalf("%s: example %s no longer contains %q", b.Where(), b.Name, pairs[i])
		}
		text = strings.ReplaceAll(text, pairs[i], pairs[i+1])
	}
	return text
}

// DocShell is a shell example to run as a reader would paste it.
type DocShell struct {
	// Dir is the working directory; `./hopper` there and `hopper` on the
	// PATH are the binary under test.
	Dir string
	// Env is added to the environment (TASKCLUSTER_* of a server, …).
	Env []string
	// Replace turns the guide's placeholders into values, in order
	// ("<taskId>" → a real taskId). Every old string must occur in the
	// block, so that a placeholder renamed in the guide fails the test
	// rather than reaching the shell.
	Replace []string
	// Timeout bounds the run (default 2 minutes).
	Timeout time.Duration
	// KeepGoing runs every line even after one fails (the example shows
	// a failing command); the test then checks the output.
	KeepGoing bool
	// Stdin is what the reader types into the example's commands (a
	// shell's lines); empty: nothing.
	Stdin string
}

// docShellPrelude defines what tests may put in a guide's placeholders:
// the taskId (or task group id) the example's last `hopper task create`
// or `task run` printed, read from what the hopper wrapper recorded.
const docShellPrelude = `last_task_id() { sed -n 's/^Task \([A-Za-z0-9_-]\{22\}\) created.*/\1/p' "$HOPPER_DOC_OUTPUT" | tail -n 1; }
last_task_group_id() { sed -n 's/^Task group \([A-Za-z0-9_-]\{22\}\) created.*/\1/p' "$HOPPER_DOC_OUTPUT" | tail -n 1; }
`

// docShellWrapper runs the binary under test and records what it printed
// (for last_task_id); its output reaches the example once it exits.
const docShellWrapper = `#!/bin/bash
o=$(mktemp) e=$(mktemp)
"$HOPPER_DOC_BIN" "$@" >"$o" 2>"$e"
rc=$?
cat "$o"; cat "$e" >&2
cat "$o" "$e" >>"$HOPPER_DOC_OUTPUT"
rm -f "$o" "$e"
exit $rc
`

// Run runs block with bash (and `set -e`, unless KeepGoing) and returns
// its combined output and error: the first failing command fails the
// example. A placeholder may be replaced by "$(last_task_id)" or
// "$(last_task_group_id)": the ids the example's hopper commands printed.
func (d DocShell) Run(t testing.TB, block DocBlock) (string, error) {
	t.Helper()
	if block.Lang != "sh" {
		t.Fatalf("%s: example %s is a %q block, not sh", block.Where(), block.Name, block.Lang)
	}
	script := block.Replace(t, d.Replace...)
	binDir := t.TempDir()
	wrapper := filepath.Join(binDir, "hopper")
	if err := os.WriteFile(wrapper, []byte(docShellWrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := d.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	if _, err := os.Lstat(filepath.Join(dir, "hopper")); os.IsNotExist(err) {
		if err := os.Symlink(wrapper, filepath.Join(dir, "hopper")); err != nil {
			t.Fatal(err)
		}
	}
	timeout := d.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	flags := "-ec"
	if d.KeepGoing {
		flags = "-c"
	}
	cmd := exec.CommandContext(ctx, "bash", flags, docShellPrelude+script)
	cmd.Dir = dir
	cmd.Env = append(append(filteredEnv("TASKCLUSTER_"), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOPPER_DOC_BIN="+Binary(t), "HOPPER_DOC_OUTPUT="+filepath.Join(binDir, "output"), "TMPDIR="+binDir), d.Env...)
	cmd.WaitDelay = 5 * time.Second
	if d.Stdin != "" {
		cmd.Stdin = strings.NewReader(d.Stdin)
	}
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("example %s (%s) still running after %s: %w", block.Name, block.Where(), timeout, err)
	}
	return string(out), err
}

// Start runs a shell example that starts a long-running process (hopper
// worker …) in the background, exec'd by bash so that signals reach it,
// and returns it as a Worker to wait for, signal and stop. Give it a Dir
// of its own (or none): in a Dir that Run used, ./hopper is Run's
// recording wrapper, which does not pass signals on.
func (d DocShell) Start(t testing.TB, block DocBlock) *Worker {
	t.Helper()
	script := block.Replace(t, d.Replace...)
	binDir := t.TempDir()
	if err := os.Symlink(Binary(t), filepath.Join(binDir, "hopper")); err != nil {
		t.Fatal(err)
	}
	dir := d.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	if _, err := os.Lstat(filepath.Join(dir, "hopper")); os.IsNotExist(err) {
		if err := os.Symlink(Binary(t), filepath.Join(dir, "hopper")); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", "-e", "-c", "exec "+strings.TrimSpace(script))
	cmd.Dir = dir
	// HOPPER_DOC_*: a ./hopper that Run left in dir is its recording
	// wrapper (which then shows the output once the process exits).
	cmd.Env = append(append(filteredEnv("TASKCLUSTER_"), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOPPER_DOC_BIN="+Binary(t), "HOPPER_DOC_OUTPUT="+filepath.Join(binDir, "output")), d.Env...)
	logs := &SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting example %s: %v", block.Name, err)
	}
	w := &Worker{cmd: cmd, logs: logs, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		w.Stop()
		if t.Failed() {
			t.Logf("example %s (%s) output:\n%s", block.Name, block.Where(), w.Logs())
		}
	})
	return w
}
