package bench

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestMachineCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/stat is Linux's")
	}
	start, ok := readCPUTicks()
	if !ok {
		t.Fatal("/proc/stat unreadable")
	}
	for deadline := time.Now().Add(50 * time.Millisecond); time.Now().Before(deadline); {
		// Keep a CPU busy so the counters move.
	}
	m := machineSince(start, ok)
	if !m.Known || m.Busy <= 0 || m.Steal < 0 {
		t.Fatalf("machine CPU over a busy loop: %+v", m)
	}
	if d := m.describe(10, 50*time.Millisecond); !strings.Contains(d, "ms per task") || !strings.Contains(d, "stolen") {
		t.Fatalf("description %q", d)
	}
	if (MachineCPU{}).describe(10, time.Second) != "" {
		t.Fatal("unknown machine CPU is not described")
	}
}
