package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Processes names the processes whose CPU time a benchmark charges to each
// role: the queue server, the database. The benchmark's own process is the
// client. A nil function, or a role without processes, is not measured
// (an in-process server's CPU is the client's too; SQLite's is the
// server's).
type Processes func() (server []int, database []int)

// processCPU reads a process's CPU time (user + system) from
// /proc/PID/stat; ok is false if it is gone or unreadable.
func processCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name, field 2, may hold spaces: count from its ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(u+s) * clockTick, true
}

// processRSS reads a process's resident set and its peak (VmRSS, VmHWM)
// from /proc/PID/status, in bytes.
func processRSS(pid int) (rss, peak int64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, value, found := strings.Cut(line, ":")
		if !found || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, false
		}
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			peak = kb << 10
		}
	}
	return rss, peak, rss > 0
}

// RoleCPU is the CPU time each role spent over a run; a role not measured
// is negative.
type RoleCPU struct {
	Server, Client, Database time.Duration
}

// cpuMark is the CPU counters of every measured process at one moment.
type cpuMark struct {
	self     time.Duration
	server   map[int]time.Duration
	database map[int]time.Duration
	measured [2]bool // server, database
}

func markCPU(procs Processes) cpuMark {
	m := cpuMark{}
	m.self, _ = processCPU(os.Getpid())
	if procs == nil {
		return m
	}
	server, database := procs()
	m.server, m.measured[0] = readAll(server), len(server) > 0
	m.database, m.measured[1] = readAll(database), len(database) > 0
	return m
}

func readAll(pids []int) map[int]time.Duration {
	out := map[int]time.Duration{}
	for _, pid := range pids {
		if d, ok := processCPU(pid); ok {
			out[pid] = d
		}
	}
	return out
}

// since returns the CPU each role spent after m. Processes that started
// meanwhile (a new database connection) count whole; ones that ended are
// lost, so connection pools that keep their connections measure best.
func (m cpuMark) since(procs Processes) RoleCPU {
	now := markCPU(procs)
	out := RoleCPU{Client: now.self - m.self, Server: -1, Database: -1}
	if now.measured[0] {
		out.Server = delta(m.server, now.server)
	}
	if now.measured[1] {
		out.Database = delta(m.database, now.database)
	}
	return out
}

func delta(before, after map[int]time.Duration) time.Duration {
	var d time.Duration
	for pid, t := range after {
		d += t - before[pid]
	}
	return d
}

// describe renders the CPU per task of each measured role.
func (r RoleCPU) describe(n int) string {
	if n == 0 {
		return ""
	}
	per := func(d time.Duration) string {
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)/float64(n))
	}
	var parts []string
	if r.Server >= 0 {
		parts = append(parts, "server "+per(r.Server))
		parts = append(parts, "client "+per(r.Client))
	} else {
		parts = append(parts, "server+client (one process) "+per(r.Client))
	}
	if r.Database >= 0 {
		parts = append(parts, "database "+per(r.Database))
	}
	return "; CPU per task: " + strings.Join(parts, ", ")
}
