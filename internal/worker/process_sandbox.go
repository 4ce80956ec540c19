package worker

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hopper-ci/hopper/internal/worker/sandbox"
)

// newSandbox builds the worker's sandbox manager from its config and says
// in the worker log what auto mode could not provide.
func newSandbox(cfg Config, logger *slog.Logger) (*sandbox.Manager, error) {
	m, err := sandbox.New(sandbox.Config{
		Isolation:    sandbox.Isolation(cfg.Isolation),
		Name:         CgroupName(cfg.WorkDir),
		Slots:        cfg.Capacity,
		HomesDir:     filepath.Join(cfg.WorkDir, "homes"),
		TasksDir:     cfg.TasksDir,
		MaxMemory:    int64(cfg.MaxTaskMemoryMB) << 20,
		MaxProcesses: max(cfg.MaxTaskProcesses, 0),
		Network:      sandbox.Network(cfg.TaskNetwork),
		InitCommand:  cfg.SandboxInit,
		Hide:         hiddenFiles(cfg),
		Logger:       logger,
	})
	if err != nil {
		return nil, fmt.Errorf("setting up the task sandbox: %w", err)
	}
	for _, miss := range m.Missing() {
		logger.Warn("task sandbox incomplete", "missing", miss)
	}
	if !m.Namespaces() && cfg.ConfigFile != "" && m.Isolation() != sandbox.None {
		if fi, err := os.Stat(cfg.ConfigFile); err == nil && fi.Mode().Perm()&0o004 != 0 {
			logger.Warn("task sandbox incomplete", "missing", fmt.Sprintf(
				"the worker config %s (with the worker's credentials) is readable by every user, tasks included: chmod 600 it", cfg.ConfigFile))
		}
	}
	if m.User(0) != nil {
		// Task users may reach their own task directory only: the
		// caches and downloads stay the worker's until handed over.
		for _, d := range []string{cfg.CachesDir, cfg.DownloadsDir} {
			if err := os.Chmod(d, 0o700); err != nil {
				return nil, fmt.Errorf("making %s private: %w", d, err)
			}
		}
		if err := os.Chmod(cfg.TasksDir, 0o711); err != nil {
			return nil, fmt.Errorf("making %s unlistable: %w", cfg.TasksDir, err)
		}
	}
	return m, nil
}

// hiddenFiles are the files a task must not read even if their mode lets
// it: the worker's config, which holds its credentials.
func hiddenFiles(cfg Config) []string {
	if cfg.ConfigFile == "" {
		return nil
	}
	abs, err := filepath.Abs(cfg.ConfigFile)
	if err != nil {
		return nil
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	return []string{abs}
}

// CgroupName names the cgroups of the worker whose work dir is workDir.
// Two workers on one machine must not share (and so not clean up) each
// other's cgroups, while a worker restarted on the same work dir must find
// its crashed predecessor's: the name is the work dir's hash.
func CgroupName(workDir string) string {
	sum := sha256.Sum256([]byte(workDir))
	return "hopper-worker-" + hex.EncodeToString(sum[:4])
}

// openSandbox prepares the task's sandbox before its first command: the
// limits (the worker's, or tighter ones from payload.limits), the cgroup,
// and the task directory handed to the slot's user (all but the worker's
// own log directory).
func (r *taskRun) openSandbox(m *sandbox.Manager) {
	asked := sandbox.Limits{Memory: int64(r.pl.Limits.MemoryMB) << 20, Processes: r.pl.Limits.MaxProcesses}
	lim, err := m.ClampLimits(asked)
	if err != nil {
		r.record(malformed("payload.limits: %v", err))
		return
	}
	box, err := m.NewTask(r.slot, lim, r.namespaces)
	if err != nil {
		r.record(internalError("Could not prepare the task sandbox: %v", err))
		return
	}
	r.box = box
	if err := box.Own(r.dir, filepath.Join(r.dir, "generic-worker")); err != nil {
		r.record(internalError("Could not hand the task directory to the task user: %v", err))
		return
	}
	if u := box.User(); u != nil {
		r.confined = true
		r.log.Infof("Commands run as user %s (uid %d) with home %s", u.Name, u.UID, u.Home)
	}
	if lim.Memory > 0 || lim.Processes > 0 {
		r.log.Infof("Limits: memory %s, processes %s", limitText(lim.Memory > 0, sandbox.FormatBytes(lim.Memory)),
			limitText(lim.Processes > 0, fmt.Sprint(lim.Processes)))
	}
}

func limitText(set bool, v string) string {
	if !set {
		return "unlimited"
	}
	return v
}

// closeSandbox kills whatever the task left running and records what the
// task used, for the end of the log.
func (r *taskRun) closeSandbox() {
	if r.box == nil {
		r.namespaces.Close()
		return
	}
	defer r.namespaces.Close()
	r.usage = r.box.Close()
	r.box = nil
	r.usageKnown = true
}

// sandboxFooter writes what the task used at the end of the log.
func (r *taskRun) sandboxFooter() {
	if r.usageKnown {
		r.log.Infof("Resources used: %s", r.usage)
	}
}
