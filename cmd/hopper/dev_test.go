package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDevBannerCommandRuns: the banner's "Then try" line names a command
// that runs from the reader's shell, whether hopper is on the PATH, was
// started by path, or came from `go run` (whose binary is deleted on exit).
func TestDevBannerCommandRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "hopper")
	require.NoError(t, os.WriteFile(bin, []byte("x"), 0o755))
	other := filepath.Join(dir, "other")
	require.NoError(t, os.WriteFile(other, []byte("y"), 0o755))
	goRun := filepath.Join(dir, "go-build123", "b001", "exe", "hopper")
	require.NoError(t, os.MkdirAll(filepath.Dir(goRun), 0o755))
	require.NoError(t, os.WriteFile(goRun, []byte("z"), 0o755))
	exe := func(p string) func() (string, error) { return func() (string, error) { return p, nil } }
	onPath := func(p string) func(string) (string, error) { return func(string) (string, error) { return p, nil } }
	notOnPath := func(string) (string, error) { return "", errors.New("not found") }

	for _, tc := range []struct {
		name, arg0 string
		look       func(string) (string, error)
		exe        func() (string, error)
		want       string
	}{
		{"on the PATH", "hopper", onPath(bin), exe(bin), "hopper"},
		{"by path", "./hopper", notOnPath, exe(bin), "./hopper"},
		{"another hopper on the PATH", "./hopper", onPath(other), exe(bin), "./hopper"},
		{"go run", goRun, notOnPath, exe(goRun), "go build -o hopper ./cmd/hopper && ./hopper"},
		{"found on the PATH under another name", "hop", notOnPath, exe(bin), bin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, cliCommand(tc.arg0, tc.look, tc.exe))
		})
	}
}
