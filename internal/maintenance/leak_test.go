package maintenance_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
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
	deadline := time.Now().Add(patience)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "internal/maintenance.(*loop).start") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
