package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// MachineCPU is the CPU time the whole machine spent over a run, read from
// Linux's /proc/stat: busy is every non-idle state, steal the time the
// hypervisor gave the machine's CPUs to others. On a shared host, steal
// lowers throughput without hopper costing more; busy time per task is the
// figure to compare across runs then.
//
// Kernel is the part of Busy spent in the kernel (system, irq and softirq
// time). A host whose hypervisor makes every kernel entry dear (a
// paravirtualised guest without hardware virtualisation, where enabling
// interrupts traps) raises it, and with it every process's CPU per task,
// with no change in what hopper asks of the kernel: its share says which
// kind of host a figure was measured on.
type MachineCPU struct {
	Busy, Kernel, Steal time.Duration
	Known               bool // false where /proc/stat cannot be read
}

// cpuTicks are cumulative /proc/stat counters.
type cpuTicks struct{ busy, kernel, steal int64 }

// clockTick is USER_HZ, 100 on every Linux architecture Go runs on.
const clockTick = 10 * time.Millisecond

func readCPUTicks() (cpuTicks, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTicks{}, false
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return cpuTicks{}, false
	}
	fields := strings.Fields(line)
	// cpu user nice system idle iowait irq softirq steal …
	if len(fields) < 9 || fields[0] != "cpu" {
		return cpuTicks{}, false
	}
	var v [8]int64
	for i := range v {
		if v[i], err = strconv.ParseInt(fields[i+1], 10, 64); err != nil {
			return cpuTicks{}, false
		}
	}
	return cpuTicks{busy: v[0] + v[1] + v[2] + v[5] + v[6], kernel: v[2] + v[5] + v[6], steal: v[7]}, true
}

// machineSince returns the machine's CPU time since start.
func machineSince(start cpuTicks, ok bool) MachineCPU {
	end, ok2 := readCPUTicks()
	if !ok || !ok2 {
		return MachineCPU{}
	}
	return MachineCPU{Busy: time.Duration(end.busy-start.busy) * clockTick, Kernel: time.Duration(end.kernel-start.kernel) * clockTick,
		Steal: time.Duration(end.steal-start.steal) * clockTick, Known: true}
}

// describe renders the machine's CPU over a run of n tasks lasting elapsed.
func (m MachineCPU) describe(n int, elapsed time.Duration) string {
	if !m.Known || n == 0 || elapsed <= 0 {
		return ""
	}
	return fmt.Sprintf("; machine CPU %.2fms per task (%.0f%% of it in the kernel), %.0f%% of it stolen by the host",
		float64(m.Busy)/float64(time.Millisecond)/float64(n), 100*float64(m.Kernel)/float64(max(m.Busy, 1)),
		100*float64(m.Steal)/(float64(elapsed)*float64(runtime.NumCPU())))
}
