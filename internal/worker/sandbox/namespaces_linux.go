package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Namespaces are the IPC and network namespaces one task's commands share
// (each command has PID and mount namespaces of its own, made by its init):
// SysV shared memory, semaphores, message queues and POSIX message queues
// die with the task, and the task's network is its own, with a loopback
// that is not the machine's. The worker holds them open with descriptors;
// they end when the worker closes those and the task's processes are gone.
type Namespaces struct {
	ipc, net *os.File
	network  Network
	// helper is the user-mode network stack (slirp4netns) of an outbound
	// network; closing helperExit stops it.
	helper     *exec.Cmd
	helperExit *os.File
	closeOnce  sync.Once
}

// NewNamespaces makes a task's IPC and network namespaces, with the
// machine's network reachable as the worker's Network setting says. It
// returns nil (and no error) when tasks share the worker's namespaces:
// isolation none, or auto where the machine cannot make them.
func (m *Manager) NewNamespaces() (*Namespaces, error) {
	if !m.taskNamespaces {
		return nil, nil
	}
	ns, err := makeNamespaces(!m.sharedNet)
	if err != nil {
		return nil, err
	}
	if m.sharedNet {
		return ns, nil
	}
	ns.network = m.cfg.Network
	if m.cfg.Network == NetworkOutbound {
		if err := ns.startSlirp(m.slirp); err != nil {
			ns.Close()
			return nil, err
		}
	}
	return ns, nil
}

// Network is the task's network: NetworkNone or NetworkOutbound, or ""
// when the task shares the worker's network namespace.
func (ns *Namespaces) Network() Network { return ns.network }

// OwnNetwork reports whether the task has a network namespace of its own.
func (ns *Namespaces) OwnNetwork() bool { return ns != nil && ns.net != nil }

// Close stops the network helper and lets the namespaces go (once the
// task's processes are gone). Safe to call more than once and on nil.
func (ns *Namespaces) Close() {
	if ns == nil {
		return
	}
	ns.closeOnce.Do(func() {
		if ns.helper != nil {
			// Its exit descriptor's end makes slirp4netns exit.
			ns.helperExit.Close()
			done := make(chan struct{})
			go func() { _ = ns.helper.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = ns.helper.Process.Kill()
				<-done
			}
		}
		ns.closeFiles()
	})
}

func (ns *Namespaces) closeFiles() {
	for _, f := range []*os.File{ns.ipc, ns.net} {
		if f != nil {
			f.Close()
		}
	}
}

// files are the descriptors an init joins, in the order it expects them.
func (ns *Namespaces) files() []*os.File {
	if ns.net == nil {
		return []*os.File{ns.ipc}
	}
	return []*os.File{ns.ipc, ns.net}
}

// Listen opens a TCP listener inside the task's network namespace (the
// taskcluster proxy's): the task reaches it on its own loopback, and
// nothing else on the machine can.
func (ns *Namespaces) Listen(address string) (net.Listener, error) {
	if ns.net == nil {
		return nil, errors.New("the task shares the worker's network namespace")
	}
	var ln net.Listener
	err := inNamespace(ns.net, unix.CLONE_NEWNET, func() error {
		var err error
		ln, err = net.Listen("tcp", address)
		return err
	})
	return ln, err
}

// makeNamespaces creates the IPC namespace, and the network namespace if
// withNet, on a thread of their own, brings the new loopback up, and
// returns the thread to the worker's namespaces.
func makeNamespaces(withNet bool) (*Namespaces, error) {
	type result struct {
		ns  *Namespaces
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread is never unlocked if it could not go back to the
		// worker's namespaces: it then ends with this goroutine.
		runtime.LockOSThread()
		ns, restored, err := unshareThread(withNet)
		if restored {
			runtime.UnlockOSThread()
		}
		ch <- result{ns, err}
	}()
	r := <-ch
	return r.ns, r.err
}

// unshareThread is makeNamespaces on a locked thread; restored says the
// thread is back in the worker's namespaces.
func unshareThread(withNet bool) (ns *Namespaces, restored bool, err error) {
	origNet, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, true, fmt.Errorf("opening the worker's network namespace: %w", err)
	}
	defer origNet.Close()
	origIPC, err := os.Open("/proc/thread-self/ns/ipc")
	if err != nil {
		return nil, true, fmt.Errorf("opening the worker's IPC namespace: %w", err)
	}
	defer origIPC.Close()
	flags := unix.CLONE_NEWIPC
	if withNet {
		flags |= unix.CLONE_NEWNET
	}
	if err := unix.Unshare(flags); err != nil {
		return nil, true, fmt.Errorf("creating the task's namespaces: %w", err)
	}
	defer func() {
		restored = unix.Setns(int(origNet.Fd()), unix.CLONE_NEWNET) == nil &&
			unix.Setns(int(origIPC.Fd()), unix.CLONE_NEWIPC) == nil
		if !restored && err == nil {
			err = errors.New("returning to the worker's namespaces failed")
		}
		if err != nil && ns != nil {
			ns.closeFiles()
			ns = nil
		}
	}()
	ns = &Namespaces{}
	if ns.ipc, err = os.Open("/proc/thread-self/ns/ipc"); err != nil {
		return ns, false, fmt.Errorf("opening the task's IPC namespace: %w", err)
	}
	if !withNet {
		return ns, false, nil
	}
	if ns.net, err = os.Open("/proc/thread-self/ns/net"); err != nil {
		return ns, false, fmt.Errorf("opening the task's network namespace: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return ns, false, err
	}
	return ns, false, nil
}

// loopbackUp brings up the loopback interface of the calling thread's
// network namespace (a new one has it down).
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bringing up the task's loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing up the task's loopback: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing up the task's loopback: %w", err)
	}
	return nil
}

// inNamespace runs fn on a thread joined to the namespace ns (of type
// nstype) and returns the thread to its own namespace afterwards.
func inNamespace(ns *os.File, nstype int, fn func() error) error {
	path := "/proc/thread-self/ns/net"
	if nstype == unix.CLONE_NEWIPC {
		path = "/proc/thread-self/ns/ipc"
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(path)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(ns.Fd()), nstype); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("joining the task's namespace: %w", err)
			return
		}
		err = fn()
		if unix.Setns(int(orig.Fd()), nstype) == nil {
			runtime.UnlockOSThread()
		} else if err == nil {
			err = errors.New("returning to the worker's namespace failed")
		}
		errc <- err
	}()
	return <-errc
}

// startSlirp connects the task's network namespace to the machine's
// network through slirp4netns, a user-mode TCP/IP stack: the task's
// connections become ordinary sockets of the slirp4netns process. Its
// alias for the machine's loopback (10.0.2.2) is disabled, so loopback
// services stay out of reach; slirp4netns drops its capabilities and
// confines itself (sandbox, seccomp), as it parses what the task sends.
func (ns *Namespaces) startSlirp(path string) error {
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("starting slirp4netns: %w", err)
	}
	defer readyR.Close()
	exitR, exitW, err := os.Pipe()
	if err != nil {
		readyW.Close()
		return fmt.Errorf("starting slirp4netns: %w", err)
	}
	// Descriptors 3, 4 and 5 of slirp4netns.
	cmd := exec.Command(path, "--configure", "--mtu=65520", "--disable-host-loopback",
		"--enable-sandbox", "--enable-seccomp", "--ready-fd=3", "--exit-fd=4",
		"--netns-type=path", "/proc/self/fd/5", "tap0")
	cmd.ExtraFiles = []*os.File{readyW, exitR, ns.net}
	var out limitedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// If the worker dies, the exit descriptor's end stops it as well.
	cmd.SysProcAttr = &unix.SysProcAttr{Pdeathsig: unix.SIGKILL}
	err = cmd.Start()
	readyW.Close()
	exitR.Close()
	if err != nil {
		exitW.Close()
		return fmt.Errorf("starting slirp4netns: %w", err)
	}
	ns.helper, ns.helperExit = cmd, exitW
	ready := make(chan error, 1)
	go func() {
		b := make([]byte, 1)
		_, err := readyR.Read(b)
		ready <- err
	}()
	select {
	case err = <-ready:
	case <-time.After(10 * time.Second):
		err = errors.New("timed out")
	}
	if err != nil {
		return fmt.Errorf("slirp4netns did not configure the task's network: %v: %s", err, out.String())
	}
	return nil
}

// limitedBuffer keeps the first 4 KiB written to it (a helper's messages).
type limitedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := 4096 - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
