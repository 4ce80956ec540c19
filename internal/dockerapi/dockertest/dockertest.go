// Package dockertest starts a private Docker daemon for tests and builds
// small images without a registry: a root file system holding Debian's
// statically linked busybox (package busybox-static) and its applets,
// imported as an image.
package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hopper-ci/hopper/internal/dockerapi"
)

// BusyboxPath is where Debian's busybox-static installs the binary.
const BusyboxPath = "/bin/busybox"

// Daemon is a running private dockerd.
type Daemon struct {
	// Host is the daemon's address, unix://<dir>/docker.sock.
	Host   string
	Client *dockerapi.Client
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
	// turn holds the machine-wide lock while the daemon runs (see Start).
	turn *os.File
}

// lockPath is the lock every test daemon on the machine holds while it
// runs.
const lockPath = "/tmp/hopper-dockertest.lock"

// takeTurn waits until no other test daemon runs on this machine. On
// these hosts (Debian's docker.io 20.10 with runc 1.1 on a 6.x kernel) a
// container start now and then fails on a root file system runc did not
// see whole ("exec: sh: executable file not found", "stat /hopper:
// permission denied") while other mount namespaces are being created —
// by other containers' starts or by sandboxed process-engine tasks. One
// daemon at a time keeps the test packages' container starts from
// multiplying that; the worker and the pool provider try such a start
// once more in a new container (dockerapi.IsRuntimeStartFailure).
func takeTurn() (*os.File, error) {
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the test daemons' lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("waiting for the test daemons' lock: %w", err)
	}
	return f, nil
}

// Missing says what is missing to run a daemon here ("" when nothing is):
// dockerd, root privileges or a static busybox for test images.
func Missing() string {
	if _, err := exec.LookPath("dockerd"); err != nil {
		return "dockerd is not installed (apt-get install docker.io)"
	}
	if os.Geteuid() != 0 {
		return "dockerd needs root"
	}
	if _, err := os.Stat(BusyboxPath); err != nil {
		return "no static busybox for test images (apt-get install busybox-static)"
	}
	return ""
}

// Start runs dockerd with its data, state and socket in a new temporary
// directory, without iptables rules or a bridge (so it touches nothing of
// the host's network), and waits until it answers. Stop it with Stop.
func Start() (*Daemon, error) {
	if m := Missing(); m != "" {
		return nil, errors.New(m)
	}
	turn, err := takeTurn()
	if err != nil {
		return nil, err
	}
	d, err := start(turn)
	if err != nil {
		turn.Close()
		return nil, err
	}
	return d, nil
}

func start(turn *os.File) (*Daemon, error) {
	// Short path: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "hd-")
	if err != nil {
		return nil, fmt.Errorf("creating daemon directory: %w", err)
	}
	sock := filepath.Join(dir, "docker.sock")
	logFile, err := os.Create(filepath.Join(dir, "dockerd.log"))
	if err != nil {
		return nil, fmt.Errorf("creating daemon log: %w", err)
	}
	defer logFile.Close()
	// The vfs storage driver gives each container a plain directory as
	// its root file system: with overlay2, container starts on these
	// hosts (Debian's docker.io 20.10, runc 1.1, a 6.x kernel) now and
	// then found a root file system without its files while other mount
	// namespaces were being created (160 starts beside a loop creating
	// mount namespaces: 0 to 33 failed with overlay2, 0 of 480 with vfs).
	// The test images are a few MiB, so copying them per container costs
	// little.
	cmd := exec.Command("dockerd", "--storage-driver=vfs", "--iptables=false", "--ip6tables=false", "--bridge=none",
		"--data-root", filepath.Join(dir, "data"), "--exec-root", filepath.Join(dir, "exec"),
		"-H", "unix://"+sock, "--pidfile", filepath.Join(dir, "pid"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own temporary directory, removed with the rest: containerd
	// writes containerd.<pid>.stacks.log there when it dumps its stacks
	// (one was left in the system's after a run).
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("creating daemon temporary directory: %w", err)
	}
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	// Its own process group, so a test binary's signals do not reach it
	// before Stop does; and told to stop (SIGTERM, so it takes its
	// containerd and containers with it) when the test binary dies
	// without calling Stop (go test's -timeout, a kill), instead of
	// running on with its mounts.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	d := &Daemon{Host: "unix://" + sock, dir: dir, cmd: cmd, exited: make(chan struct{}), turn: turn}
	if err := startLocked(cmd, d.exited); err != nil {
		return nil, fmt.Errorf("starting dockerd: %w", err)
	}
	d.Client, err = dockerapi.New(d.Host)
	if err != nil {
		d.Stop()
		return nil, err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := d.Client.Version(ctx)
		cancel()
		if err == nil {
			return d, nil
		}
		select {
		case <-d.exited:
			log, _ := os.ReadFile(filepath.Join(dir, "dockerd.log"))
			d.Stop()
			return nil, fmt.Errorf("dockerd exited at start-up: %s", tail(string(log), 2000))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.Stop()
			return nil, fmt.Errorf("dockerd did not answer within 60 s: %w", err)
		}
	}
}

// startLocked starts cmd from a goroutine locked to its OS thread that
// then waits for it, closing exited when it ends. The parent-death
// signal is sent when the thread that started the child ends, not the
// process: the thread must outlive the child, and a locked goroutine
// keeps its thread until it returns.
func startLocked(cmd *exec.Cmd, exited chan struct{}) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			_ = cmd.Wait()
		}
		close(exited)
	}()
	return <-started
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Stop stops the daemon (its containers die with it) and removes its
// directory. Safe to call twice.
func (d *Daemon) Stop() {
	if d.cmd.Process != nil {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(20 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
	}
	// dockerd leaves its default network namespace bind-mounted under
	// the exec root; unmount what remains below the directory first, or
	// it cannot be removed.
	unmountBelow(d.dir)
	_ = os.RemoveAll(d.dir)
	if d.turn != nil {
		// Closing the file releases the lock for the next daemon.
		_ = d.turn.Close()
		d.turn = nil
	}
}

// unmountBelow detaches every mount point under dir, deepest first.
func unmountBelow(dir string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			points = append(points, fields[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	for _, p := range points {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}

// BusyboxRootfs returns a tar of a minimal root file system: busybox at
// /bin/busybox, a symbolic link per applet in /bin, /tmp, and the extra
// files given (path → content).
func BusyboxRootfs(extra map[string]string) ([]byte, error) {
	bin, err := os.ReadFile(BusyboxPath)
	if err != nil {
		return nil, fmt.Errorf("reading busybox: %w", err)
	}
	out, err := exec.Command(BusyboxPath, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("listing busybox applets: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	for _, d := range []string{"bin", "tmp", "etc", "proc", "sys", "dev"} {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, ModTime: now}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(bin)), ModTime: now}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet == "busybox" || strings.Contains(applet, "/") {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + applet, Linkname: "busybox", ModTime: now}); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(extra))
	for name := range extra {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		body := extra[name]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(name, "/"), Mode: 0o644, Size: int64(len(body)), ModTime: now}); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ImportBusybox builds a busybox image named repo:tag in the daemon, with
// the extra files given.
func (d *Daemon) ImportBusybox(ctx context.Context, repo, tag string, extra map[string]string) error {
	rootfs, err := BusyboxRootfs(extra)
	if err != nil {
		return err
	}
	return d.Client.ImportImage(ctx, bytes.NewReader(rootfs), repo, tag)
}
