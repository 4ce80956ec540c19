package worker

import (
	"archive/tar"
	"archive/zip"
	"compress/bzip2"
	"compress/gzip"
	"compress/zlib"
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

	"github.com/klauspost/compress/zstd"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/worker/payload"
)

// Decompression formats this worker supports for file mounts, and archive
// formats for directory mounts and cache preloads. The schema admits more
// (br, lz, lz4, mz, sz, xz, 7z, rar); those are refused as malformed-payload
// with a message naming the format, because no implementation is available
// to this build.
var (
	fileFormats    = []string{"bz2", "gz", "zst", "zz"}
	archiveFormats = []string{"tar", "tar.bz2", "tar.gz", "tar.zst", "tar.zz", "zip"}
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

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// decompressor wraps rd for the named format ("" = none).
func decompressor(format string, rd io.Reader) (io.ReadCloser, error) {
	switch format {
	case "":
		return io.NopCloser(rd), nil
	case "gz":
		zr, err := gzip.NewReader(rd)
		if err != nil {
			return nil, permanent("not gzip data: %v", err)
		}
		return zr, nil
	case "bz2":
		return io.NopCloser(bzip2.NewReader(rd)), nil
	case "zz":
		zr, err := zlib.NewReader(rd)
		if err != nil {
			return nil, permanent("not zlib data: %v", err)
		}
		return zr, nil
	case "zst":
		zr, err := zstd.NewReader(rd)
		if err != nil {
			return nil, permanent("not zstd data: %v", err)
		}
		return zr.IOReadCloser(), nil
	}
	return nil, permanent("unsupported compression format %q", format)
}

// decompressFile writes src, decompressed per format, to dst.
func decompressFile(format, src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("opening mount content: %w", err)
	}
	defer in.Close()
	rd, err := decompressor(format, in)
	if err != nil {
		return err
	}
	defer rd.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return permanent("cannot write file mount %s: %v", dst, err)
	}
	if _, err := io.Copy(out, rd); err != nil {
		out.Close()
		return permanent("decompressing (%s) into %s: %v", format, dst, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	return nil
}

func gzipStream(w io.Writer, r io.Reader) error {
	zw := gzip.NewWriter(w)
	if _, err := io.Copy(zw, r); err != nil {
		return fmt.Errorf("compressing: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compressing: %w", err)
	}
	return nil
}

// extractArchive unpacks src into dst. Extraction goes through os.Root, so
// no entry (including via symlinks planted by earlier entries) can write
// outside dst.
func extractArchive(format, src, dst string) error {
	root, err := os.OpenRoot(dst)
	if err != nil {
		return fmt.Errorf("opening extraction target %s: %w", dst, err)
	}
	defer root.Close()
	if format == "zip" {
		return extractZip(src, root)
	}
	compression, ok := strings.CutPrefix(format, "tar")
	if !ok {
		return permanent("unsupported archive format %q", format)
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("opening archive: %w", err)
	}
	defer in.Close()
	rd, err := decompressor(strings.TrimPrefix(compression, "."), in)
	if err != nil {
		return err
	}
	defer rd.Close()
	tr := tar.NewReader(rd)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return permanent("reading %s archive: %v", format, err)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return err
		}
		if name == "." {
			continue
		}
		mode := os.FileMode(hdr.Mode).Perm() | 0o200
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, mode|0o700); err != nil {
				return permanent("extracting %s: %v", hdr.Name, err)
			}
		case tar.TypeReg:
			if err := writeEntry(root, name, mode, tr); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := mkParent(root, name); err != nil {
				return err
			}
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return permanent("extracting symlink %s: %v", hdr.Name, err)
			}
		case tar.TypeLink:
			target, err := entryName(hdr.Linkname)
			if err != nil {
				return err
			}
			if err := mkParent(root, name); err != nil {
				return err
			}
			if err := root.Link(target, name); err != nil {
				return permanent("extracting hard link %s: %v", hdr.Name, err)
			}
		default:
			// Devices, FIFOs and the like have no place in a mount.
		}
	}
}

func extractZip(src string, root *os.Root) error {
	zr, err := zip.OpenReader(src)
	if err != nil {
		return permanent("reading zip archive: %v", err)
	}
	defer zr.Close()
	for _, f := range zr.File {
		name, err := entryName(f.Name)
		if err != nil {
			return err
		}
		if name == "." {
			continue
		}
		if f.FileInfo().IsDir() {
			if err := root.MkdirAll(name, 0o755); err != nil {
				return permanent("extracting %s: %v", f.Name, err)
			}
			continue
		}
		if f.Mode()&os.ModeSymlink != 0 {
			rc, err := f.Open()
			if err != nil {
				return permanent("extracting %s: %v", f.Name, err)
			}
			target, err := io.ReadAll(io.LimitReader(rc, 4096))
			rc.Close()
			if err != nil {
				return permanent("extracting %s: %v", f.Name, err)
			}
			if err := mkParent(root, name); err != nil {
				return err
			}
			if err := root.Symlink(string(target), name); err != nil {
				return permanent("extracting symlink %s: %v", f.Name, err)
			}
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return permanent("extracting %s: %v", f.Name, err)
		}
		err = writeEntry(root, name, f.Mode().Perm()|0o200, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// entryName cleans an archive entry name and refuses absolute or escaping
// names outright (os.Root would refuse them too, with a worse message).
func entryName(n string) (string, error) {
	clean := filepath.Clean(filepath.FromSlash(strings.TrimPrefix(n, "./")))
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", permanent("archive entry %q points outside the mount directory", n)
	}
	return clean, nil
}

func mkParent(root *os.Root, name string) error {
	if dir := filepath.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return permanent("creating %s: %v", dir, err)
		}
	}
	return nil
}

func writeEntry(root *os.Root, name string, mode os.FileMode, rd io.Reader) error {
	if err := mkParent(root, name); err != nil {
		return err
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return permanent("extracting %s: %v", name, err)
	}
	if _, err := io.Copy(f, rd); err != nil {
		f.Close()
		return permanent("extracting %s: %v", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}
