package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hopper-ci/hopper/internal/retry"
)

// cgroups are the directories under which this worker makes its task
// cgroups, one per hierarchy that matters. Machines differ: pure cgroup v2
// has everything in one tree; hybrid machines (like systemd's "hybrid"
// layout) mount v2 beside v1 hierarchies that own the memory and pids
// controllers, so a task gets a cgroup in each (v2 for cgroup.kill and CPU
// accounting, v1 for the limits).
type cgroups struct {
	// v2 is the base directory in the cgroup v2 tree ("" if none).
	v2 string
	// v2Memory and v2Pids say the base delegates those controllers.
	v2Memory, v2Pids bool
	// memoryV1, pidsV1 and cpuacctV1 are base directories in v1
	// hierarchies ("" if none or not needed).
	memoryV1, pidsV1, cpuacctV1 string
}

// mountInfo is one cgroup mount of /proc/self/mountinfo.
type mountInfo struct {
	root, point string
	v2          bool
	controllers map[string]bool
}

func readCgroupMounts() ([]mountInfo, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	defer f.Close()
	return parseCgroupMounts(f)
}

// parseCgroupMounts picks the cgroup mounts out of a mountinfo table.
func parseCgroupMounts(r io.Reader) ([]mountInfo, error) {
	var out []mountInfo
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 {
			continue
		}
		m := mountInfo{root: a[3], point: unescapeMount(a[4]), controllers: map[string]bool{}}
		switch b[0] {
		case "cgroup2":
			m.v2 = true
		case "cgroup":
			for _, o := range strings.Split(b[2], ",") {
				m.controllers[o] = true
			}
		default:
			continue
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// ownCgroups maps "" (v2) and each v1 controller to this process's path.
func ownCgroups() (map[string]string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("reading own cgroups: %w", err)
	}
	return parseOwnCgroups(string(data)), nil
}

// parseOwnCgroups reads a /proc/<pid>/cgroup table.
func parseOwnCgroups(data string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out
}

// ownDir is this process's cgroup directory in mount m.
func ownDir(m mountInfo, own string) string {
	if m.root != "/" {
		own = strings.TrimPrefix(own, m.root)
	}
	return filepath.Join(m.point, own)
}

// setupCgroups finds the hierarchies, creates this worker's base
// directories (named name) under its own cgroups, empties them of a
// crashed predecessor's leftovers, and reports what it could not provide.
func setupCgroups(name string) (*cgroups, []string) {
	mounts, err := readCgroupMounts()
	if err != nil {
		return nil, []string{"cgroups: " + err.Error()}
	}
	own, err := ownCgroups()
	if err != nil {
		return nil, []string{"cgroups: " + err.Error()}
	}
	cg := &cgroups{}
	var missing []string
	for _, m := range mounts {
		if !m.v2 || cg.v2 != "" {
			continue
		}
		path, ok := own[""]
		if !ok {
			continue
		}
		base, err := prepareV2Base(ownDir(m, path), name)
		if err != nil {
			missing = append(missing, "cgroup v2: "+err.Error())
			continue
		}
		cg.v2 = base
		ctrl := readControllers(filepath.Join(base, "cgroup.subtree_control"))
		cg.v2Memory, cg.v2Pids = ctrl["memory"], ctrl["pids"]
	}
	v1 := func(controller string) string {
		for _, m := range mounts {
			if m.v2 || !m.controllers[controller] {
				continue
			}
			base := filepath.Join(ownDir(m, own[controller]), name)
			if err := os.MkdirAll(base, 0o755); err != nil {
				missing = append(missing, fmt.Sprintf("cgroup v1 %s: %v", controller, err))
				return ""
			}
			return base
		}
		return ""
	}
	if !cg.v2Memory {
		cg.memoryV1 = v1("memory")
	}
	if !cg.v2Pids {
		cg.pidsV1 = v1("pids")
	}
	if cg.v2 == "" {
		cg.cpuacctV1 = v1("cpuacct")
	}
	if cg.v2 == "" && cg.memoryV1 == "" && cg.pidsV1 == "" && cg.cpuacctV1 == "" {
		return nil, append(missing, "cgroups: no writable cgroup hierarchy")
	}
	if !cg.v2Memory && cg.memoryV1 == "" {
		missing = append(missing, "memory limits (no memory cgroup controller)")
	}
	if !cg.v2Pids && cg.pidsV1 == "" {
		missing = append(missing, "process-count limits (no pids cgroup controller)")
	}
	cg.removeLeftovers()
	return cg, missing
}

// prepareV2Base creates <own>/<name> and delegates the memory and pids
// controllers to it where the machine has them. cgroup v2 forbids
// controllers below a cgroup that holds processes (except at the root), so
// when the worker's own cgroup refuses, the worker moves its cgroup's
// processes into a leaf <own>/<name>-worker first, as container runtimes
// nested in a delegated cgroup do.
func prepareV2Base(own, name string) (string, error) {
	base := filepath.Join(own, name)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	want := readControllers(filepath.Join(own, "cgroup.controllers"))
	var enable []string
	for _, c := range []string{"memory", "pids"} {
		if want[c] {
			enable = append(enable, "+"+c)
		}
	}
	if len(enable) == 0 {
		return base, nil
	}
	line := strings.Join(enable, " ")
	err := writeFile(filepath.Join(own, "cgroup.subtree_control"), line)
	if errors.Is(err, syscall.EBUSY) {
		leaf := filepath.Join(own, name+"-worker")
		if err := os.MkdirAll(leaf, 0o755); err != nil {
			return base, nil
		}
		for _, pid := range readPids(filepath.Join(own, "cgroup.procs")) {
			_ = writeFile(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(pid))
		}
		err = writeFile(filepath.Join(own, "cgroup.subtree_control"), line)
	}
	if err == nil {
		_ = writeFile(filepath.Join(base, "cgroup.subtree_control"), line)
	}
	return base, nil
}

func readControllers(file string) map[string]bool {
	data, _ := os.ReadFile(file)
	out := map[string]bool{}
	for _, c := range strings.Fields(string(data)) {
		out[c] = true
	}
	return out
}

func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %q to %s: %w", value, path, err)
	}
	return nil
}

func readPids(file string) []int {
	data, _ := os.ReadFile(file)
	var out []int
	for _, f := range strings.Fields(string(data)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// bases lists the base directories in use.
func (cg *cgroups) bases() []string {
	var out []string
	for _, d := range []string{cg.v2, cg.memoryV1, cg.pidsV1, cg.cpuacctV1} {
		if d != "" {
			out = append(out, d)
		}
	}
	return out
}

// removeLeftovers kills the processes of task cgroups a previous worker
// left behind (after a kill -9 the namespaces die with their inits, but a
// process that was mid-fork or the cgroup directories themselves may
// remain) and removes those cgroups.
func (cg *cgroups) removeLeftovers() {
	for _, base := range cg.bases() {
		entries, _ := os.ReadDir(base)
		for _, e := range entries {
			if e.IsDir() {
				removeCgroup(filepath.Join(base, e.Name()))
			}
		}
	}
}

// taskCgroup is one task's cgroup in every hierarchy.
type taskCgroup struct {
	cg   *cgroups
	dirs []string
	v2   string
	// initDirs are <base>/<name>-init, without limits: the init leaves the
	// task's cgroups for them once it has started the command.
	initDirs []string
}

// newTask creates the cgroup <base>/<name> everywhere (removing a leftover
// of the same name first) and applies the limits.
func (cg *cgroups) newTask(name string, lim Limits) (*taskCgroup, error) {
	t := &taskCgroup{cg: cg}
	for _, base := range cg.bases() {
		dir := filepath.Join(base, name)
		removeCgroup(dir)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.remove()
			return nil, fmt.Errorf("creating cgroup: %w", err)
		}
		t.dirs = append(t.dirs, dir)
		if base == cg.v2 {
			t.v2 = dir
		}
		initDir := dir + "-init"
		removeCgroup(initDir)
		if err := os.Mkdir(initDir, 0o755); err != nil {
			t.remove()
			return nil, fmt.Errorf("creating cgroup: %w", err)
		}
		t.initDirs = append(t.initDirs, initDir)
	}
	var set []struct{ file, value string }
	add := func(dir, file, value string) {
		if dir != "" {
			set = append(set, struct{ file, value string }{filepath.Join(dir, name, file), value})
		}
	}
	if lim.Memory > 0 {
		mem := strconv.FormatInt(lim.Memory, 10)
		if cg.v2Memory {
			add(cg.v2, "memory.max", mem)
			add(cg.v2, "memory.swap.max", "0")
		} else {
			add(cg.memoryV1, "memory.limit_in_bytes", mem)
			add(cg.memoryV1, "memory.memsw.limit_in_bytes", mem)
		}
	}
	if lim.Processes > 0 {
		n := strconv.Itoa(lim.Processes)
		if cg.v2Pids {
			add(cg.v2, "pids.max", n)
		} else {
			add(cg.pidsV1, "pids.max", n)
		}
	}
	for _, s := range set {
		if err := writeFile(s.file, s.value); err != nil {
			if strings.Contains(s.file, "swap") || strings.Contains(s.file, "memsw") {
				// Swap accounting is often off; the memory limit stands.
				continue
			}
			t.remove()
			return nil, fmt.Errorf("setting task limits: %w", err)
		}
	}
	return t, nil
}

// add puts pid into the task's cgroup in every hierarchy.
func (t *taskCgroup) add(pid int) error {
	for _, d := range t.dirs {
		if err := writeFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("joining task cgroup: %w", err)
		}
	}
	return nil
}

// initProcs are the cgroup.procs files the init moves itself to once the
// command runs: outside the task's limits, the kernel never picks it at the
// task's memory limit, where it was the only candidate left once the
// command had ended (and its end lost the command's exit status).
func (t *taskCgroup) initProcs() []string {
	out := make([]string, len(t.initDirs))
	for i, d := range t.initDirs {
		out[i] = filepath.Join(d, "cgroup.procs")
	}
	return out
}

// kill kills every process in the task's cgroup and waits (briefly) until
// it is empty.
func (t *taskCgroup) kill() {
	for _, d := range t.dirs {
		killCgroup(d)
	}
}

// usage reads what the task consumed.
func (t *taskCgroup) usage() Usage {
	u := Usage{Known: true}
	cg := t.cg
	dir := func(base string) string {
		for _, d := range t.dirs {
			if filepath.Dir(d) == base {
				return d
			}
		}
		return ""
	}
	if d := dir(cg.v2); d != "" {
		kv := readKeyValues(filepath.Join(d, "cpu.stat"))
		u.User, u.System = durationUsec(kv["user_usec"]), durationUsec(kv["system_usec"])
		if cg.v2Memory {
			u.PeakMemory = readInt(filepath.Join(d, "memory.peak"))
			u.OOMKills = int(readKeyValues(filepath.Join(d, "memory.events"))["oom_kill"])
		}
		if cg.v2Pids {
			u.PeakProcesses = int(readInt(filepath.Join(d, "pids.peak")))
		}
	}
	if d := dir(cg.cpuacctV1); d != "" {
		u.User = time.Duration(readInt(filepath.Join(d, "cpuacct.usage_user")))
		u.System = time.Duration(readInt(filepath.Join(d, "cpuacct.usage_sys")))
	}
	if d := dir(cg.memoryV1); d != "" {
		u.PeakMemory = readInt(filepath.Join(d, "memory.max_usage_in_bytes"))
		u.OOMKills = int(readKeyValues(filepath.Join(d, "memory.oom_control"))["oom_kill"])
	}
	if d := dir(cg.pidsV1); d != "" {
		u.PeakProcesses = int(readInt(filepath.Join(d, "pids.peak")))
	}
	return u
}

// remove kills what is left and removes the task's cgroups.
func (t *taskCgroup) remove() {
	for _, d := range append(t.dirs, t.initDirs...) {
		removeCgroup(d)
	}
}

func readInt(file string) int64 {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}

func readKeyValues(file string) map[string]int64 {
	data, _ := os.ReadFile(file)
	out := map[string]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out
}

// killCgroup kills every process in dir: with cgroup.kill where the kernel
// has it (v2, Linux 5.14+), else by signalling each listed process until
// none is left (a fork racing the scan shows up in the next one).
func killCgroup(dir string) {
	if writeFile(filepath.Join(dir, "cgroup.kill"), "1") == nil {
		waitEmpty(dir)
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		pids := readPids(filepath.Join(dir, "cgroup.procs"))
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitEmpty waits up to 5 s for a killed cgroup's processes to be gone.
func waitEmpty(dir string) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if len(readPids(filepath.Join(dir, "cgroup.procs"))) == 0 {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// removeCgroup kills the processes of dir and its children and removes
// them, deepest first.
func removeCgroup(dir string) {
	if _, err := os.Stat(dir); err != nil {
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeCgroup(filepath.Join(dir, e.Name()))
		}
	}
	killCgroup(dir)
	policy := retry.Policy{Attempts: 100, Delay: func(int) time.Duration { return 10 * time.Millisecond }}
	_ = retry.Do(context.Background(), policy, func(int) error {
		if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
			return err
		}
		return nil
	})
}
