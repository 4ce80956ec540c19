package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/worker/payload"
)

// compressedExtensions are file types that gain nothing from gzip, so they
// are uploaded with identity encoding by default (docs/contract/worker.md §2.4).
var compressedExtensions = map[string]bool{
	"7z": true, "aab": true, "apk": true, "br": true, "bz2": true, "deb": true, "dmg": true, "flv": true,
	"gif": true, "gz": true, "jar": true, "jpeg": true, "jpg": true, "lz": true, "lz4": true, "mz": true,
	"npz": true, "pkg": true, "png": true, "swf": true, "sz": true, "tbz": true, "tgz": true, "wasm": true,
	"webp": true, "whl": true, "woff": true, "woff2": true, "xpi": true, "xz": true, "zip": true,
	"zst": true, "zz": true,
}

// ContentTypeFor returns the content type of an artifact file: the
// explicit one if given, else by extension (.log → text/plain, .jsonl →
// application/jsonl, then the system MIME table), else
// application/octet-stream.
func ContentTypeFor(name, explicit string) string {
	if explicit != "" {
		return explicit
	}
	ext := strings.ToLower(path.Ext(name))
	switch ext {
	case ".log":
		return "text/plain; charset=utf-8"
	case ".jsonl":
		return "application/jsonl"
	case "":
		return "application/octet-stream"
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}

// ContentEncodingFor returns the upload encoding of an artifact file: the
// explicit one if given, else gzip except for already-compressed types.
func ContentEncodingFor(name, explicit string) string {
	if explicit != "" {
		return explicit
	}
	if compressedExtensions[strings.TrimPrefix(strings.ToLower(path.Ext(name)), ".")] {
		return "identity"
	}
	return "gzip"
}

// artifactUpload is one file to upload, or an error artifact to create.
type artifactUpload struct {
	name        string
	file        string
	contentType string
	encoding    string
	expires     time.Time
	// errReason and errMessage make this an error artifact.
	errReason, errMessage string
	// failure is recorded for the run when set (missing required file).
	failure *runErr
}

// errorUpload is an error artifact named name whose message also fails
// the run.
func errorUpload(name string, expires time.Time, reason, msg string) artifactUpload {
	fe := failure("%s", msg)
	return artifactUpload{name: name, expires: expires, errReason: reason, errMessage: msg, failure: &fe}
}

// ExpandArtifacts turns payload artifacts into the list of uploads for a run
// whose task directory is dir: directory artifacts become one upload per
// file, named <name>/<relative path>; missing or wrong-type paths become
// error artifacts (unless optional). Results are sorted by name.
func ExpandArtifacts(dir string, arts []payload.Artifact, defaultExpires time.Time) []artifactUpload {
	var out []artifactUpload
	for _, a := range arts {
		expires := defaultExpires
		if !a.Expires.IsZero() {
			expires = a.Expires.Time
		}
		p := a.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		errArt := func(reason, format string, args ...any) {
			out = append(out, errorUpload(a.Name, expires, reason, fmt.Sprintf(format, args...)))
		}
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if a.Optional {
				continue
			}
			errArt(tcclient.ArtifactFileMissing, "Could not read %s %s (artifact %s): it does not exist", a.Type, a.Path, a.Name)
			continue
		case err != nil:
			if a.Optional {
				continue
			}
			errArt(tcclient.ArtifactNotReadable, "Could not read %s %s (artifact %s): %v", a.Type, a.Path, a.Name, err)
			continue
		}
		if a.Type == "file" {
			if fi.IsDir() {
				errArt(tcclient.ArtifactInvalidResource, "Artifact %s: %s is a directory, but the artifact type is file", a.Name, a.Path)
				continue
			}
			if f, err := os.Open(p); err != nil {
				errArt(tcclient.ArtifactNotReadable, "Artifact %s: %s is not readable: %v", a.Name, a.Path, err)
				continue
			} else {
				f.Close()
			}
			out = append(out, artifactUpload{name: a.Name, file: p, expires: expires,
				contentType: ContentTypeFor(a.Path, a.ContentType), encoding: ContentEncodingFor(a.Path, a.ContentEncoding)})
			continue
		}
		if !fi.IsDir() {
			errArt(tcclient.ArtifactInvalidResource, "Artifact %s: %s is a file, but the artifact type is directory", a.Name, a.Path)
			continue
		}
		walkErr := filepath.WalkDir(p, func(fp string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.Type().IsRegular() {
				return nil
			}
			rel, err := filepath.Rel(p, fp)
			if err != nil {
				return err
			}
			name := strings.TrimSuffix(a.Name, "/") + "/" + filepath.ToSlash(rel)
			out = append(out, artifactUpload{name: name, file: fp, expires: expires,
				contentType: ContentTypeFor(fp, a.ContentType), encoding: ContentEncodingFor(fp, a.ContentEncoding)})
			return nil
		})
		if walkErr != nil {
			errArt(tcclient.ArtifactNotReadable, "Artifact %s: could not read directory %s: %v", a.Name, a.Path, walkErr)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// uploadErr classifies an artifact upload failure (docs/contract/worker.md §1.6): a
// conflict or a rejected request is the payload's fault, anything transient
// that survived retries is resource-unavailable.
func uploadErr(err error) runErr {
	code := tcclient.StatusCode(err)
	switch {
	case code == 409 || code == 400:
		return malformed("Artifact upload rejected: %v", err)
	case tcclient.IsTransient(err):
		return runErr{reason: tcclient.ReasonResourceUnavailable, msg: fmt.Sprintf("Artifact upload failed after retries: %v", err)}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return runErr{reason: tcclient.ReasonWorkerShutdown, aborted: true, msg: fmt.Sprintf("Artifact upload interrupted: %v", err)}
	}
	return internalError("Artifact upload failed: %v", err)
}

func (r *taskRun) uploadArtifacts(ctx context.Context, uploads []artifactUpload) {
	reserved := map[string]bool{r.logs.Backing: true, r.logs.Live: true}
	var todo []artifactUpload
	for _, u := range uploads {
		if reserved[u.name] {
			r.log.Warnf("Artifact %s is reserved for the task logs and was skipped", u.name)
			continue
		}
		todo = append(todo, u)
	}
	results := make([]error, len(todo))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = r.uploadOne(ctx, &todo[i])
		}()
	}
	wg.Wait()
	// Record in name order so the first error is deterministic.
	for i, u := range todo {
		if u.failure != nil {
			r.record(*u.failure)
		}
		if err := results[i]; err != nil {
			if r.lost() {
				return
			}
			r.record(uploadErr(err))
			continue
		}
		if u.errReason == "" {
			r.log.Infof("Uploaded artifact %s (%s, %s)", u.name, u.contentType, u.encoding)
		}
	}
}

func (r *taskRun) uploadOne(ctx context.Context, u *artifactUpload) error {
	q := r.claim.Queue()
	if u.errReason != "" {
		msg := u.errMessage
		if len(msg) > 4096 {
			msg = msg[:4096]
		}
		_, err := q.CreateArtifact(ctx, r.claim.TaskID, r.claim.RunID, u.name, &tcclient.CreateArtifactRequest{
			StorageType: tcclient.StorageError, Expires: tcclient.NewTime(u.expires), Reason: u.errReason, Message: msg,
		})
		return err
	}
	return r.uploadFile(ctx, u.name, u.file, u.contentType, u.encoding, u.expires)
}

// uploadFile creates an s3 artifact and PUTs the file, compressing it on
// the fly when encoding is gzip.
func (r *taskRun) uploadFile(ctx context.Context, name, file, contentType, encoding string, expires time.Time) error {
	resp, err := r.claim.Queue().CreateArtifact(ctx, r.claim.TaskID, r.claim.RunID, name, &tcclient.CreateArtifactRequest{
		StorageType: tcclient.StorageS3, Expires: tcclient.NewTime(expires), ContentType: contentType,
	})
	if err != nil {
		return err
	}
	if resp.PutURL == "" {
		return fmt.Errorf("createArtifact for %s returned no putUrl", name)
	}
	var up *tcclient.Upload
	if encoding == "gzip" {
		up, err = gzipUpload(resp.PutURL, contentType, openFile(file))
	} else {
		// identity means "send no Content-Encoding header".
		up, err = tcclient.FileUpload(resp.PutURL, contentType, "", file)
	}
	if err != nil {
		return err
	}
	up.HTTPClient = r.w.HTTPClient
	up.RetryDelay = r.w.queueRetryDelay
	if err := up.Do(ctx); err != nil {
		return fmt.Errorf("uploading artifact %s: %w", name, err)
	}
	return nil
}

// uploadBackingLog uploads the closed task log, compressed on the fly from
// the log's own file descriptor.
func (r *taskRun) uploadBackingLog(ctx context.Context) error {
	resp, err := r.claim.Queue().CreateArtifact(ctx, r.claim.TaskID, r.claim.RunID, r.logs.Backing, &tcclient.CreateArtifactRequest{
		StorageType: tcclient.StorageS3, Expires: r.claim.Task.Expires, ContentType: "text/plain; charset=utf-8",
	})
	if err != nil {
		return err
	}
	up, err := gzipUpload(resp.PutURL, "text/plain; charset=utf-8", func() (io.ReadCloser, error) {
		return io.NopCloser(r.log.Reader()), nil
	})
	if err != nil {
		return err
	}
	up.HTTPClient = r.w.HTTPClient
	up.RetryDelay = r.w.queueRetryDelay
	if err := up.Do(ctx); err != nil {
		return fmt.Errorf("uploading backing log: %w", err)
	}
	return nil
}
