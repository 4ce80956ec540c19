package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A task must not make user namespaces: inside one an unprivileged user is
// root, and every kernel path that trusts "root in some namespace" (new
// mounts, network and netfilter set-up, ...) opens up to it, which is where
// most local privilege escalations of recent years started. Two ways exist:
//
//   - user.max_user_namespaces = 0. The count is per user namespace and
//     checked up the chain: set in the machine's namespace it takes user
//     namespaces from every program on the machine (rootless containers,
//     browsers' sandboxes, the worker's own tools), and set only for the
//     task it needs the task to run inside a user namespace of its own,
//     which changes how every file's owner looks to it.
//   - a seccomp filter on the task's processes that refuses the calls that
//     make or join a user namespace. It is inherited by everything the
//     command starts, cannot be lifted, and touches nothing else.
//
// The filter is the one used. clone3 passes its flags in memory, out of a
// filter's sight, so it answers ENOSYS, and C libraries fall back to clone,
// whose flags a filter sees (systemd and container runtimes do the same).

// seccomp_data offsets (linux/seccomp.h): nr, arch, instruction pointer,
// then the arguments, 8 bytes each; a 32-bit load at an argument's offset
// reads its low half on these little-endian machines.
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
	offArg1 = 24
)

// syscallABI is one system call table a process may use on this machine.
type syscallABI struct {
	arch uint32
	// unshare, clone (flags in the first argument), clone3 and setns.
	unshare, clone, clone3, setns uint32
	// x32 marks the x86_64 table, whose x32 variant (numbers with bit 30
	// set) is refused outright.
	x32 bool
}

// abis lists the tables of the running architecture: a 64-bit process may
// still enter the kernel through the 32-bit table.
func abis() []syscallABI {
	switch runtime.GOARCH {
	case "amd64":
		return []syscallABI{
			{arch: unix.AUDIT_ARCH_X86_64, unshare: 272, clone: 56, clone3: 435, setns: 308, x32: true},
			{arch: unix.AUDIT_ARCH_I386, unshare: 310, clone: 120, clone3: 435, setns: 346},
		}
	case "arm64":
		return []syscallABI{
			{arch: unix.AUDIT_ARCH_AARCH64, unshare: 97, clone: 220, clone3: 435, setns: 268},
			{arch: unix.AUDIT_ARCH_ARM, unshare: 337, clone: 120, clone3: 435, setns: 375},
		}
	}
	return nil
}

// bpfProgram assembles a classic BPF program with symbolic jump targets.
type bpfProgram struct {
	ins    []unix.SockFilter
	labels map[string]int
	// fixups are conditional jumps whose targets are labels: index,
	// true target, false target ("" falls through).
	fixups []fixup
}

type fixup struct {
	at     int
	jt, jf string
}

func (p *bpfProgram) stmt(code uint16, k uint32) {
	p.ins = append(p.ins, unix.SockFilter{Code: code, K: k})
}

// jump adds "if A <op> k goto jt else goto jf"; an empty label means the
// next instruction.
func (p *bpfProgram) jump(op uint16, k uint32, jt, jf string) {
	p.fixups = append(p.fixups, fixup{at: len(p.ins), jt: jt, jf: jf})
	p.ins = append(p.ins, unix.SockFilter{Code: unix.BPF_JMP | op | unix.BPF_K, K: k})
}

func (p *bpfProgram) label(name string) { p.labels[name] = len(p.ins) }

func (p *bpfProgram) ret(v uint32) { p.stmt(unix.BPF_RET|unix.BPF_K, v) }

func (p *bpfProgram) assemble() ([]unix.SockFilter, error) {
	for _, f := range p.fixups {
		for _, j := range []struct {
			label string
			dst   *uint8
		}{{f.jt, &p.ins[f.at].Jt}, {f.jf, &p.ins[f.at].Jf}} {
			if j.label == "" {
				continue
			}
			target, ok := p.labels[j.label]
			off := target - f.at - 1
			if !ok || off < 0 || off > 255 {
				return nil, fmt.Errorf("seccomp filter: bad jump to %q", j.label)
			}
			*j.dst = uint8(off)
		}
	}
	return p.ins, nil
}

// userNamespaceFilter builds the filter that refuses user namespaces:
// unshare and clone with CLONE_NEWUSER and setns into a user namespace (or
// into a namespace of any type, which may be one) fail with EPERM, clone3
// with ENOSYS; everything else is allowed.
func userNamespaceFilter() ([]unix.SockFilter, error) {
	tables := abis()
	if len(tables) == 0 {
		return nil, fmt.Errorf("no seccomp filter is written for %s", runtime.GOARCH)
	}
	const (
		allow  = unix.SECCOMP_RET_ALLOW
		eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	)
	p := &bpfProgram{labels: map[string]int{}}
	p.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArch)
	for i, t := range tables {
		next := fmt.Sprintf("abi%d", i+1)
		p.jump(unix.BPF_JEQ, t.arch, "", next)
		p.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offNr)
		if t.x32 {
			p.jump(unix.BPF_JGE, 0x40000000, "enosys", "")
		}
		p.jump(unix.BPF_JEQ, t.clone3, "enosys", "")
		p.jump(unix.BPF_JEQ, t.unshare, "flags0", "")
		p.jump(unix.BPF_JEQ, t.clone, "flags0", "")
		p.jump(unix.BPF_JEQ, t.setns, "setns", "")
		p.ret(allow)
		p.label(next)
	}
	// An ABI not listed: refuse nothing (its numbers mean other calls).
	p.ret(allow)
	p.label("flags0")
	p.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArg0)
	p.jump(unix.BPF_JSET, unix.CLONE_NEWUSER, "eperm", "")
	p.ret(allow)
	p.label("setns")
	p.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArg1)
	p.jump(unix.BPF_JEQ, 0, "eperm", "")
	p.jump(unix.BPF_JSET, unix.CLONE_NEWUSER, "eperm", "")
	p.ret(allow)
	p.label("eperm")
	p.ret(eperm)
	p.label("enosys")
	p.ret(enosys)
	return p.assemble()
}

// restrictThread sets no-new-privileges on the calling thread (no setuid
// binary or file capability raises a task's privileges) and installs the
// user namespace filter; both are inherited by the processes the thread
// starts. The caller must hold its thread locked.
func restrictThread() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no-new-privileges: %w", err)
	}
	filter, err := userNamespaceFilter()
	if err != nil {
		return err
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("installing the seccomp filter that refuses user namespaces: %w", err)
	}
	runtime.KeepAlive(filter)
	return nil
}
