package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// TestMain lets the test binary act as the sandbox init, as the hopper
// binary does with `hopper sandbox-init`.
func TestMain(m *testing.M) {
	if IsInitInvocation() {
		os.Exit(InitMain())
	}
	os.Exit(m.Run())
}

// needStrict skips unless a strict sandbox can be built here (root, PID
// and mount namespaces, cgroups with memory and pids controllers, useradd).
func needStrict(t *testing.T, cfg Config) *Manager {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root (tasks run as per-slot users, cgroups are written)")
	}
	cfg.Isolation = Strict
	cfg.InitCommand = SelfInit()
	if cfg.Name == "" {
		cfg.Name = fmt.Sprintf("hopper-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
	}
	if cfg.Slots == 0 {
		cfg.Slots = 1
	}
	dir := t.TempDir()
	// TempDir's parents are private to root; task users must pass.
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	cfg.TasksDir, cfg.HomesDir = filepath.Join(dir, "tasks"), filepath.Join(dir, "homes")
	require.NoError(t, os.MkdirAll(cfg.TasksDir, 0o755))
	m, err := New(cfg)
	if err != nil {
		t.Skipf("no strict sandbox on this machine: %v", err)
	}
	t.Cleanup(m.Close)
	return m
}

func taskDir(t *testing.T, m *Manager, task *Task) string {
	t.Helper()
	dir, err := os.MkdirTemp(m.cfg.TasksDir, "task-")
	require.NoError(t, err)
	require.NoError(t, task.Own(dir))
	return dir
}

func run(t *testing.T, task *Task, dir, script string) (Result, string) {
	t.Helper()
	var out e2e.SyncBuffer
	p, err := task.Start(Command{Argv: []string{"sh", "-c", script}, Dir: dir,
		Env: []string{"PATH=/usr/bin:/bin", "HOME=" + dir}, Output: &out})
	require.NoError(t, err)
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		p.Kill()
		t.Fatalf("command did not end; output: %s", out.String())
	}
	return p.Wait(), out.String()
}

// heartbeat is a shell loop appending to file every 50 ms through a
// descriptor on which it holds the file's lock: the kernel frees the lock
// when the last process holding the descriptor (the loop, or a daemon it
// left behind) ends, so held tells whether any still runs.
func heartbeat(file string) string {
	return `exec 9>>` + file + `; flock 9; while :; do echo beat >&9; sleep 0.05; done`
}

// held reports whether a process still holds file's lock: false for a
// file not (yet) created, or whose processes all ended.
func held(file string) bool {
	fd, err := os.Open(file)
	if err != nil {
		return false
	}
	defer fd.Close() // frees the lock if this look took it
	err = syscall.Flock(int(fd.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	return errors.Is(err, syscall.EWOULDBLOCK)
}

// waitEnded waits until no process holds file's lock; a process that
// outlived what should have killed it holds it for good.
func waitEnded(t *testing.T, file, what string) {
	t.Helper()
	testclock.WaitFor(t, time.Minute, what, func() bool { return !held(file) })
}

func TestCommandEndKillsDaemonsAndDoubleForks(t *testing.T) {
	t.Parallel()
	m := needStrict(t, Config{})
	task, err := m.NewTask(0, Limits{}, nil)
	require.NoError(t, err)
	defer task.Close()
	dir := taskDir(t, m, task)
	res, out := run(t, task, dir, `
setsid sh -c '`+heartbeat("daemon.hb")+`' >/dev/null 2>&1 < /dev/null &
( ( `+heartbeat("fork.hb")+` ) & ) &
until [ -s daemon.hb ] && [ -s fork.hb ]; do sleep 0.01; done
echo "uid=$(id -u) pid=$$"`)
	require.True(t, res.Started, out)
	require.Equal(t, 0, res.ExitCode, out)
	var uid, pid int
	_, err = fmt.Sscanf(strings.TrimSpace(out), "uid=%d pid=%d", &uid, &pid)
	require.NoError(t, err, out)
	require.Less(t, pid, 50, "the command runs in its own PID namespace, under the init (PID 1)")
	require.Equal(t, m.User(0).UID, uid, "the command runs as the slot user")
	for _, hb := range []string{"daemon.hb", "fork.hb"} {
		require.FileExists(t, filepath.Join(dir, hb))
		waitEnded(t, filepath.Join(dir, hb), hb+"'s process to end with the command")
	}
}

func TestKillEndsEverything(t *testing.T) {
	t.Parallel()
	m := needStrict(t, Config{})
	task, err := m.NewTask(0, Limits{}, nil)
	require.NoError(t, err)
	defer task.Close()
	dir := taskDir(t, m, task)
	var out e2e.SyncBuffer
	p, err := task.Start(Command{Argv: []string{"sh", "-c",
		`setsid sh -c '` + heartbeat("hb") + `' & sleep 60`}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}, Output: &out})
	require.NoError(t, err)
	testclock.WaitFor(t, time.Minute, "the daemon", func() bool { return held(filepath.Join(dir, "hb")) })
	start := time.Now()
	p.Kill()
	res := p.Wait()
	t.Logf("killed in %s", time.Since(start))
	require.Equal(t, -1, res.ExitCode)
	waitEnded(t, filepath.Join(dir, "hb"), "the daemon to end with the kill")
}

func TestProcReadsOnlyTheTask(t *testing.T) {
	t.Parallel()
	m := needStrict(t, Config{})
	task, err := m.NewTask(0, Limits{}, nil)
	require.NoError(t, err)
	defer task.Close()
	dir := taskDir(t, m, task)
	res, out := run(t, task, dir, fmt.Sprintf(`ls /proc | grep -c '^[0-9]'; cat /proc/%d/environ && echo LEAKED; exit 0`, os.Getpid()))
	require.Equal(t, 0, res.ExitCode, out)
	require.NotContains(t, out, "LEAKED")
}

func TestLimitsAndUsage(t *testing.T) {
	t.Parallel()
	m := needStrict(t, Config{MaxMemory: 256 << 20, MaxProcesses: 100})
	lim, err := m.ClampLimits(Limits{Memory: 64 << 20, Processes: 30})
	require.NoError(t, err)
	_, err = m.ClampLimits(Limits{Memory: 1 << 30})
	require.Error(t, err)
	task, err := m.NewTask(0, lim, nil)
	require.NoError(t, err)
	dir := taskDir(t, m, task)
	// A fork bomb stays under the pids limit and ends with the command.
	res, out := run(t, task, dir, `bomb() { bomb | bomb & }; bomb 2>/dev/null; sleep 1; echo survived`)
	require.Contains(t, out, "survived", "the bomb's parent keeps running")
	require.Equal(t, 0, res.ExitCode)
	// Memory beyond the limit is killed by the kernel.
	res, out = run(t, task, dir, `sh -c 'x=$(head -c 100000000 /dev/zero | tr "\\0" a); echo allocated'; echo "child exit $?"`)
	require.Equal(t, 0, res.ExitCode, out)
	require.Contains(t, out, "child exit 137", "the kernel killed the allocation at the limit")
	u := task.Close()
	t.Logf("usage: %s", u)
	require.True(t, u.Known)
	require.LessOrEqual(t, u.PeakProcesses, 30)
	require.Greater(t, u.PeakProcesses, 10, "the bomb reached the limit")
	require.LessOrEqual(t, u.PeakMemory, int64(64<<20))
	require.GreaterOrEqual(t, u.OOMKills, 1)
}

// BenchmarkTaskStart measures what the sandbox adds to a task: preparing
// it (cgroup, emptied home), running `true` in it to the end, and closing
// it (kill, usage, cgroup removal), without isolation and with the strict
// sandbox.
func BenchmarkTaskStart(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the strict sandbox needs root")
	}
	for _, iso := range []Isolation{None, Strict} {
		b.Run(string(iso), func(b *testing.B) {
			dir := b.TempDir()
			require.NoError(b, os.Chmod(filepath.Dir(dir), 0o755))
			require.NoError(b, os.Chmod(dir, 0o755))
			m, err := New(Config{Isolation: iso, Name: fmt.Sprintf("hopper-bench-%d", os.Getpid()), Slots: 1,
				TasksDir: dir, HomesDir: filepath.Join(dir, "homes"), InitCommand: SelfInit(),
				MaxMemory: 512 << 20, MaxProcesses: 256})
			if err != nil {
				b.Skipf("no %s sandbox here: %v", iso, err)
			}
			defer m.Close()
			lim := Limits{Memory: 512 << 20, Processes: 256}
			b.ResetTimer()
			for b.Loop() {
				task, err := m.NewTask(0, lim, nil)
				if err != nil {
					b.Fatal(err)
				}
				p, err := task.Start(Command{Argv: []string{"true"}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}, Output: io.Discard})
				if err != nil {
					b.Fatal(err)
				}
				if res := p.Wait(); res.ExitCode != 0 {
					b.Fatalf("true exited %d (%v)", res.ExitCode, res.StartErr)
				}
				task.Close()
			}
		})
	}
}

// TestIsolationNone is today's behaviour without a sandbox: the command
// runs as the worker's user, and what it left in its process group dies
// when it ends.
func TestIsolationNone(t *testing.T) {
	t.Parallel()
	m, err := New(Config{Isolation: None})
	require.NoError(t, err)
	require.Empty(t, m.Missing())
	require.Contains(t, m.Summary(), "isolation none")
	task, err := m.NewTask(0, Limits{}, nil)
	require.NoError(t, err)
	dir := t.TempDir()
	res, out := run(t, task, dir, `(`+heartbeat("hb")+`) & until [ -s hb ]; do sleep 0.01; done; echo "uid=$(id -u)"`)
	require.Equal(t, 0, res.ExitCode, out)
	require.Contains(t, out, fmt.Sprintf("uid=%d", os.Geteuid()))
	waitEnded(t, filepath.Join(dir, "hb"), "the background child to end with its command")
	require.False(t, task.Close().Known, "no cgroup, no usage")
}

// TestInitOutlivesTheOOMKiller: the kernel picks a victim at the task's
// memory limit among the command's processes only: the init (PID 1 of the
// task) has left the task's cgroups, and its end would lose the command's
// exit status.
func TestInitOutlivesTheOOMKiller(t *testing.T) {
	t.Parallel()
	task, dir := memoryLimitedTask(t)
	// The init leaves right after starting the command: give it a moment.
	res, out := run(t, task, dir, `sleep 0.2; echo "init $(grep '^0::' /proc/1/cgroup | cut -d: -f3)"; echo "command $(grep '^0::' /proc/self/cgroup | cut -d: -f3)"`)
	require.Equal(t, 0, res.ExitCode, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	initCg, _ := strings.CutPrefix(lines[0], "init ")
	commandCg, _ := strings.CutPrefix(lines[1], "command ")
	require.True(t, strings.HasSuffix(commandCg, "/slot-0"), "the command runs in the task's cgroup: %s", out)
	require.Equal(t, commandCg+"-init", initCg, "the init left the task's cgroup")
}

// TestCommandCannotJoinTheInitCgroup: the init's cgroups have no limits,
// so the task's command must not be able to move itself into any of them
// (v2, and the v1 hierarchies that hold memory and pids on a hybrid
// machine): it runs as the slot's user, and their files belong to root.
func TestCommandCannotJoinTheInitCgroup(t *testing.T) {
	t.Parallel()
	task, dir := memoryLimitedTask(t)
	procs := task.cg.initProcs()
	require.NotEmpty(t, procs)
	script := ""
	for _, p := range procs {
		_, err := os.Stat(p)
		require.NoError(t, err, "the init's cgroup is where the test expects it")
		script += `if echo $$ > ` + p + ` 2>/dev/null; then echo "joined ` + p + `"; fi
`
	}
	res, out := run(t, task, dir, script+`echo "command $(grep '^0::' /proc/self/cgroup | cut -d: -f3)"`)
	require.Equal(t, 0, res.ExitCode, out)
	require.NotContains(t, out, "joined", "the command moved itself out of the task's limits")
	require.True(t, strings.HasSuffix(strings.TrimSpace(out), "/slot-0"), "the command is still in the task's cgroup: %s", out)
}

// memoryLimitedTask is a strict task of slot 0 limited to 64 MiB, with a
// directory of its own, where the machine has a cgroup v2 hierarchy.
func memoryLimitedTask(t *testing.T) (*Task, string) {
	t.Helper()
	m := needStrict(t, Config{})
	if m.cg == nil || m.cg.v2 == "" {
		t.Skip("no cgroup v2 hierarchy here")
	}
	task, err := m.NewTask(0, Limits{Memory: 64 << 20}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { task.Close() })
	return task, taskDir(t, m, task)
}
