//go:build !unix

package devmode

import "path/filepath"

// workerDir is where the built-in worker keeps its task directories: inside
// the data directory where there are no task users to reach it.
func workerDir(dataDir string) (string, error) { return filepath.Join(dataDir, "worker"), nil }
