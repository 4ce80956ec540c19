package worker

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/worker/payload"
)

// mountError is a mount failure: malformed-payload when a rerun would fail
// the same way, resource-unavailable for temporary trouble.
type mountError struct {
	temporary bool
	err       error
}

func (e *mountError) Error() string { return e.err.Error() }

func (e *mountError) Unwrap() error { return e.err }

func permanent(format string, args ...any) error {
	return &mountError{err: fmt.Errorf(format, args...)}
}

func temporary(format string, args ...any) error {
	return &mountError{temporary: true, err: fmt.Errorf(format, args...)}
}

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

// releaseCaches moves caches back to the pool, or purges them when the run
// asked for it (onExitStatus.purgeCaches, maxRunTime, abort).
func (r *taskRun) releaseCaches() {
	for _, mc := range r.caches {
		purge := r.purge
		// A bind-mounted cache (docker engine) never left its entry.
		if !purge && mc.target != mc.entry {
			if err := os.Rename(mc.target, mc.entry); err != nil {
				r.logger.Warn("returning cache to the pool failed; purging it", "cache", mc.name, "error", err)
				purge = true
			}
		}
		if purge {
			_ = os.RemoveAll(mc.target)
		}
		r.w.caches.release(mc.name, mc.entry, purge)
	}
	r.caches = nil
}

// fetchContent returns the path of a local file holding the content.
func (r *taskRun) fetchContent(c *payload.Content) (string, error) {
	switch {
	case c.Raw != nil:
		return r.writeTemp([]byte(*c.Raw))
	case c.Base64 != nil:
		data, err := base64.StdEncoding.DecodeString(*c.Base64)
		if err != nil {
			return "", permanent("base64 content does not decode: %v", err)
		}
		return r.writeTemp(data)
	case c.URL != "":
		return r.download("url:"+c.URL, c.SHA256, func(ctx context.Context) (string, error) { return c.URL, nil })
	case c.TaskID != "":
		return r.download("artifact:"+c.TaskID+"/"+c.Artifact, c.SHA256, func(ctx context.Context) (string, error) {
			red, err := r.claim.Queue().GetLatestArtifact(ctx, c.TaskID, c.Artifact)
			if err != nil {
				if tcclient.IsTransient(err) {
					return "", temporary("locating artifact %s of task %s: %v", c.Artifact, c.TaskID, err)
				}
				return "", permanent("locating artifact %s of task %s: %v", c.Artifact, c.TaskID, err)
			}
			return red.URL, nil
		})
	}
	return "", permanent("mount content has no source")
}

func (r *taskRun) writeTemp(data []byte) (string, error) {
	f, err := os.CreateTemp(r.tmpDir, "mount-*")
	if err != nil {
		return "", fmt.Errorf("creating temporary file: %w", err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return "", fmt.Errorf("writing temporary file: %w", err)
	}
	return f.Name(), nil
}

// download fetches content into the downloads cache. With an expected
// SHA-256 a cached copy with that digest is reused; without one the
// computed digest is logged as a warning, since nothing pins the content.
func (r *taskRun) download(key, wantSHA string, locate func(context.Context) (string, error)) (string, error) {
	sum := sha256.Sum256([]byte(key))
	cached := filepath.Join(r.w.cfg.DownloadsDir, hex.EncodeToString(sum[:]))
	if wantSHA != "" {
		if got, err := fileSHA256(cached); err == nil && got == wantSHA {
			r.log.Infof("Using cached download of %s (sha256 %s)", key, got)
			return cached, nil
		}
	}
	ctx := r.workCtx
	var lastErr error
	delay := 200 * time.Millisecond
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return "", fmt.Errorf("downloading %s: %w", key, ctx.Err())
			case <-time.After(delay):
			}
			delay *= 2
		}
		url, err := locate(ctx)
		if err != nil {
			var me *mountError
			if errors.As(err, &me) && !me.temporary {
				return "", err
			}
			lastErr = err
			continue
		}
		tmp, err := r.fetchURL(ctx, url)
		if err != nil {
			var me *mountError
			if errors.As(err, &me) && !me.temporary {
				return "", err
			}
			lastErr = err
			continue
		}
		got, err := fileSHA256(tmp)
		if err != nil {
			os.Remove(tmp)
			return "", fmt.Errorf("hashing download: %w", err)
		}
		if wantSHA != "" && got != wantSHA {
			os.Remove(tmp)
			return "", permanent("content of %s has sha256 %s, but the payload requires %s", key, got, wantSHA)
		}
		if wantSHA == "" {
			r.log.Warnf("Downloaded %s without a sha256 in the payload; its sha256 is %s", key, got)
		} else {
			r.log.Infof("Downloaded %s (sha256 %s verified)", key, got)
		}
		if err := os.Rename(tmp, cached); err != nil {
			os.Remove(tmp)
			return "", fmt.Errorf("storing download: %w", err)
		}
		return cached, nil
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("downloading %s: %w", key, ctx.Err())
	}
	return "", temporary("downloading %s failed after retries: %v", key, lastErr)
}

func (r *taskRun) fetchURL(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", permanent("bad URL %q: %v", url, err)
	}
	hc := r.w.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", temporary("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return "", temporary("GET %s: %s", url, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return "", permanent("GET %s: %s", url, resp.Status)
	}
	f, err := os.CreateTemp(r.w.cfg.DownloadsDir, "partial-*")
	if err != nil {
		return "", fmt.Errorf("creating download file: %w", err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", temporary("reading %s: %v", url, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("writing download: %w", err)
	}
	return f.Name(), nil
}
