package e2e_test

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
)

// TestPerformanceGuideCommands runs docs/performance.md's `hopper bench`
// commands as written, at a test's size (tens of tasks and workers, not
// thousands; the guide's figures come from the full runs) and, for the
// PostgreSQL lines, on a fresh database (the guide's URL is the local
// server's). It checks that each runs to its report; it asserts no speed.
func TestPerformanceGuideCommands(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	if os.Getenv("HOPPER_TEST_POSTGRES") == "" {
		t.Skip("HOPPER_TEST_POSTGRES not set: the guide's commands include PostgreSQL runs")
	}
	pg := "'" + e2e.FreshPostgres(t) + "'"
	const guidePG = "'postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable'"
	sh := e2e.DocShell{Timeout: 8 * time.Minute}
	sh.Replace = []string{guidePG, pg, "--tasks 8000", "--tasks 40", "--creators 64", "--creators 4",
		"--backlogs 1000,1000000", "--backlogs 20,100 --backlog-samples 10", "--only wake", "--only wake --wake-samples 5"}
	out, err := sh.Run(t, e2e.DocExample(t, "performance-bench"))
	require.NoError(t, err, out)

	sh.Replace = []string{guidePG, pg, "--tasks 8000", "--tasks 40", "--fleet 10000", "--fleet 20", "--fleet-idle 60s", "--fleet-idle 1s"}
	out, err = sh.Run(t, e2e.DocExample(t, "performance-fleet"))
	require.NoError(t, err, out)
}
