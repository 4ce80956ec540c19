package sandbox

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// Manager runs the tasks of one worker in sandboxes. Create it with New at
// worker start; it is safe for concurrent use by the tasks of different
// slots.
type Manager struct {
	cfg Config
	// missing lists what the machine could not provide (auto mode).
	missing []string
	// namespaces says commands run under the init in new PID and mount
	// namespaces.
	namespaces bool
	// taskNamespaces says each task gets IPC and network namespaces
	// (NewNamespaces), with slirp4netns at slirp for NetworkOutbound;
	// restrict says commands run with no-new-privileges and the seccomp
	// filter.
	taskNamespaces bool
	// sharedNet (auto mode without slirp4netns for an outbound network)
	// leaves tasks in the worker's network namespace.
	sharedNet bool
	slirp     string
	// resolvConf, when set, is what tasks with an outbound network see
	// at /etc/resolv.conf (the machine\'s resolvers are on its loopback).
	resolvConf string
	restrict   bool
	cg         *cgroups
	users      []*User
	logger     *slog.Logger
	// mu guards spares: each slot's next sandbox init, started ahead.
	mu     sync.Mutex
	spares map[int]*spare
}

// New detects what the machine offers, cleans up after a crashed
// predecessor (leftover task cgroups) and prepares the task users. In
// strict mode anything missing is an error; in auto mode it is reported by
// Missing.
func New(cfg Config) (*Manager, error) {
	if cfg.Isolation == "" {
		cfg.Isolation = Auto
	}
	if _, err := ParseIsolation(string(cfg.Isolation)); err != nil {
		return nil, err
	}
	if cfg.Slots < 1 {
		cfg.Slots = 1
	}
	if cfg.UserPrefix == "" {
		cfg.UserPrefix = "hopper-task-"
	}
	if cfg.Name == "" {
		cfg.Name = "hopper-worker"
	}
	network, err := ParseNetwork(string(cfg.Network))
	if err != nil {
		return nil, err
	}
	cfg.Network = network
	m := &Manager{cfg: cfg, logger: cfg.Logger, spares: map[int]*spare{}}
	if m.logger == nil {
		m.logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Isolation == None {
		return m, nil
	}
	m.setup()
	if cfg.Isolation == Strict && len(m.missing) > 0 {
		m.Close()
		return nil, errors.New("isolation strict: this machine cannot provide: " + strings.Join(m.missing, "; "))
	}
	return m, nil
}

// Namespaces reports whether commands run in their own PID and mount
// namespaces.
func (m *Manager) Namespaces() bool { return m.namespaces }

// Isolation returns the mode the manager runs in.
func (m *Manager) Isolation() Isolation { return m.cfg.Isolation }

// Missing lists the protections the machine could not provide (empty in
// strict mode, and in none mode where nothing is attempted).
func (m *Manager) Missing() []string { return append([]string(nil), m.missing...) }

// Summary describes in one line what protects a task, for the task log.
func (m *Manager) Summary() string {
	if m.cfg.Isolation == None {
		return "isolation none: commands run as the worker's user in a process group, without namespaces, cgroups or limits"
	}
	var have []string
	if m.namespaces {
		have = append(have, "own PID namespace and /proc")
	}
	switch {
	case m.taskNamespaces && m.sharedNet:
		have = append(have, "own IPC namespace")
	case m.taskNamespaces:
		have = append(have, fmt.Sprintf("own IPC and network namespaces (network: %s)", m.cfg.Network))
	}
	if m.restrict {
		have = append(have, "no new privileges, no user namespaces")
	}
	if m.cg != nil {
		have = append(have, "own cgroup")
	}
	if len(m.users) > 0 {
		have = append(have, "unprivileged user per slot")
	}
	if len(have) == 0 {
		have = append(have, "nothing beyond a process group")
	}
	s := fmt.Sprintf("isolation %s: %s", m.cfg.Isolation, strings.Join(have, ", "))
	if len(m.missing) > 0 {
		s += "; NOT available: " + strings.Join(m.missing, "; ")
	}
	return s
}

// ClampLimits applies the worker's ceilings to what a payload asked for:
// zero fields take the ceiling, larger ones are an error.
func (m *Manager) ClampLimits(asked Limits) (Limits, error) {
	out := Limits{Memory: m.cfg.MaxMemory, Processes: m.cfg.MaxProcesses}
	var bad []string
	if asked.Memory > 0 {
		if m.cfg.MaxMemory > 0 && asked.Memory > m.cfg.MaxMemory {
			bad = append(bad, fmt.Sprintf("memory limit %s exceeds this worker's maximum of %s", FormatBytes(asked.Memory), FormatBytes(m.cfg.MaxMemory)))
		} else {
			out.Memory = asked.Memory
		}
	}
	if asked.Processes > 0 {
		if m.cfg.MaxProcesses > 0 && asked.Processes > m.cfg.MaxProcesses {
			bad = append(bad, fmt.Sprintf("process limit %d exceeds this worker's maximum of %d", asked.Processes, m.cfg.MaxProcesses))
		} else {
			out.Processes = asked.Processes
		}
	}
	if len(bad) > 0 {
		return out, errors.New(strings.Join(bad, "; "))
	}
	return out, nil
}

// User returns the task user of slot (0-based), or nil when tasks run as
// the worker's own user.
func (m *Manager) User(slot int) *User {
	if slot < 0 || slot >= len(m.users) {
		return nil
	}
	return m.users[slot]
}
