//go:build !unix

package devmode

import "path/filepath"

// workerDir is where the built-in worker keeps its task directories: inside
// the data directory where there are no task users to reach it.
func workerDir(dataDir string) (string, error) { return filepath.Join(dataDir, "worker"), nil }

// WorkerDir returns where `hopper dev` with dataDir keeps its worker's
// files, without creating it.
func WorkerDir(dataDir string) (string, error) { return workerDir(dataDir) }
