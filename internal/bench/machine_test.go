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
	if !m.Known || m.Busy <= 0 || m.Steal < 0 || m.Kernel < 0 || m.Kernel > m.Busy {
		t.Fatalf("machine CPU over a busy loop: %+v", m)
	}
	if d := m.describe(10, 50*time.Millisecond); !strings.Contains(d, "ms per task") || !strings.Contains(d, "in the kernel") || !strings.Contains(d, "stolen") {
		t.Fatalf("description %q", d)
	}
	// A third of 30 ms in the kernel, over 10 tasks.
	third := MachineCPU{Busy: 30 * time.Millisecond, Kernel: 10 * time.Millisecond, Known: true}
	if d := third.describe(10, time.Second); !strings.Contains(d, "3.00ms per task (33% of it in the kernel)") {
		t.Fatalf("description %q", d)
	}
	if (MachineCPU{}).describe(10, time.Second) != "" {
		t.Fatal("unknown machine CPU is not described")
	}
}
