package worker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/worker/payload"
)

func (r *taskRun) resolvePath(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(r.dir, p)
}

// checkMounts finds declaration problems before anything is downloaded.
func (r *taskRun) checkMounts() []string {
	var bad []string
	task := &r.claim.Task
	for i, m := range r.pl.Mounts {
		where := fmt.Sprintf("payload.mounts[%d]", i)
		if m.Kind == payload.MountCache {
			scope := "generic-worker:cache:" + m.CacheName
			if !scopeSatisfied(task.Scopes, scope) {
				bad = append(bad, fmt.Sprintf("%s: writable cache %q requires scope %s, but task.scopes are %q", where, m.CacheName, scope, task.Scopes))
			}
		}
		if c := m.Content; c != nil {
			if c.Namespace != "" {
				bad = append(bad, fmt.Sprintf("%s: indexed content (namespace %q) is not supported by this worker", where, c.Namespace))
			}
			if c.TaskID != "" && !slices.Contains(task.Dependencies, c.TaskID) {
				bad = append(bad, fmt.Sprintf("%s: content comes from task %s, which must be listed in task.dependencies", where, c.TaskID))
			}
		}
		switch m.Kind {
		case payload.MountFile:
			if m.Format != "" && !slices.Contains(fileFormats, m.Format) {
				bad = append(bad, fmt.Sprintf("%s: decompression format %q is not supported by this worker (supported: %s)", where, m.Format, strings.Join(fileFormats, ", ")))
			}
		default:
			if m.Format != "" && !slices.Contains(archiveFormats, m.Format) {
				bad = append(bad, fmt.Sprintf("%s: archive format %q is not supported by this worker (supported: %s)", where, m.Format, strings.Join(archiveFormats, ", ")))
			}
		}
	}
	return bad
}

// targetPathError classifies a failure to create a path the payload names.
// The task author chose the path, so a path that cannot exist (no
// permission, a file where a directory must be, a read-only or virtual
// file system) fails every rerun the same way: malformed-payload. Only a
// failure of the worker's own disk (full, I/O error) is an internal error;
// otherwise any task author could stop a worker by tripping its limit of
// consecutive internal errors.
func targetPathError(cause error, format string, args ...any) error {
	if errors.Is(cause, syscall.ENOSPC) || errors.Is(cause, syscall.EIO) || errors.Is(cause, syscall.EDQUOT) {
		return fmt.Errorf(format, args...)
	}
	return permanent(format, args...)
}

// applyMounts downloads and installs every mount.
func (r *taskRun) applyMounts() *runErr {
	for i, m := range r.pl.Mounts {
		if err := r.applyMount(m); err != nil {
			var me *mountError
			if errors.As(err, &me) && me.temporary {
				e := runErr{reason: tcclient.ReasonResourceUnavailable, msg: fmt.Sprintf("payload.mounts[%d]: %v", i, err)}
				return &e
			}
			if errors.As(err, &me) {
				e := malformed("payload.mounts[%d]: %v", i, err)
				return &e
			}
			e := internalError("payload.mounts[%d]: %v", i, err)
			return &e
		}
	}
	return nil
}

func (r *taskRun) applyMount(m payload.Mount) error {
	switch m.Kind {
	case payload.MountFile:
		target := r.resolvePath(m.File)
		if fi, err := os.Stat(target); err == nil && fi.IsDir() {
			return permanent("file mount target %s is an existing directory", m.File)
		}
		src, err := r.fetchContent(m.Content)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return targetPathError(err, "creating parent of %s: %w", m.File, err)
		}
		if err := decompressFile(m.Format, src, target); err != nil {
			return err
		}
		r.log.Infof("Mounted %s at file %s", m.Content.Describe(), m.File)
	case payload.MountDirectory:
		target := r.resolvePath(m.Directory)
		src, err := r.fetchContent(m.Content)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(target, 0o755); err != nil {
			return targetPathError(err, "creating %s: %w", m.Directory, err)
		}
		if err := extractArchive(m.Format, src, target); err != nil {
			return err
		}
		r.log.Infof("Extracted %s (%s) into directory %s", m.Content.Describe(), m.Format, m.Directory)
	case payload.MountCache:
		target := r.resolvePath(m.Directory)
		if _, err := os.Lstat(target); err == nil {
			return permanent("cache %q cannot be mounted at %s: the path already exists", m.CacheName, m.Directory)
		}
		entry, fresh, err := r.w.caches.acquire(m.CacheName)
		if err != nil {
			return err
		}
		mc := &mountedCache{name: m.CacheName, entry: entry, target: target}
		if fresh && m.Content != nil {
			src, err := r.fetchContent(m.Content)
			if err == nil {
				err = extractArchive(m.Format, src, entry)
			}
			if err != nil {
				r.w.caches.release(mc.name, entry, true)
				return err
			}
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			r.w.caches.release(mc.name, entry, false)
			return targetPathError(err, "creating parent of %s: %w", m.File, err)
		}
		if err := os.Rename(entry, target); err != nil {
			r.w.caches.release(mc.name, entry, false)
			return fmt.Errorf("moving cache %q into place: %w", m.CacheName, err)
		}
		r.caches = append(r.caches, mc)
		if fresh {
			r.log.Infof("Created new writable cache %q at %s", m.CacheName, m.Directory)
		} else {
			r.log.Infof("Reusing writable cache %q at %s", m.CacheName, m.Directory)
		}
	}
	return nil
}
