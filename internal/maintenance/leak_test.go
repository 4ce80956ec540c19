package maintenance_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hopper-ci/hopper/internal/testclock"
)

// TestMain fails the package when a duty's goroutine outlives the tests:
// every test stops what it starts, so none may be left once they are done.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := dutyGoroutines(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "maintenance goroutines still running after the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// dutyGoroutines waits up to patience for the duties' loops to end and
// returns the stacks of those still running.
func dutyGoroutines(patience time.Duration) string {
	var leaked []string
	_ = testclock.Poll(context.Background(), patience, func() bool {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		leaked = leaked[:0]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "internal/maintenance.(*loop).start") || strings.Contains(g, "internal/maintenance.(*kicker).watch") {
				leaked = append(leaked, g)
			}
		}
		return len(leaked) == 0
	})
	return strings.Join(leaked, "\n\n")
}
