// Package artifacts stores the bytes of Taskcluster "s3" artifacts.
//
// The queue never sees artifact bytes: createArtifact hands the uploader a
// URL it can PUT to without Taskcluster credentials, and getArtifact
// redirects downloaders to a short-lived URL that serves the stored bytes.
// A Backend mints those URLs and can inspect or delete what was stored.
//
// Two backends exist. Local keeps blobs on disk and serves them itself
// through HMAC-signed URLs on hopper's own HTTP server (it implements
// Mountable; the API server mounts it at MountPath). S3 keeps blobs in an
// S3-compatible bucket and hands out presigned URLs of that service (object
// uploads excepted: see S3.PutURLWithLength).
//
// Keys have the form "<taskId>/<runId>/<artifact name>". Artifact names may
// contain "/", "..", "%" and other characters that mean something to file
// systems and URLs, so neither backend uses a key verbatim as a path: Local
// names files after a hash of the key and S3 escapes dangerous segments.
package artifacts

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ObjectKeyPrefix starts the keys of the object service's data (artifact
// keys start with a taskId, never with it). Uploads of such keys through a
// Local PutURL may come without a Content-Length (chunked), as
// Taskcluster's Go client sends object data.
const ObjectKeyPrefix = "objects/"

// unknownSize marks an upload whose length was not declared.
const unknownSize = -1

// errTooLarge reports an upload beyond the size limit.
var errTooLarge = errors.New("upload too large")

// MaxKeyLen bounds the length of a key in bytes. Artifact names are at most
// 1024 characters; the extra room covers "<taskId>/<runId>/".
const MaxKeyLen = 1100

// ErrNotFound is returned (wrapped) by Stat when no blob is stored under the
// key.
var ErrNotFound = errors.New("blob not found")

// ErrInvalidKey is returned (wrapped) for keys that cannot name a blob: empty,
// too long, not UTF-8, or containing NUL.
var ErrInvalidKey = errors.New("invalid blob key")

// Backend stores artifact bytes.
type Backend interface {
	// PutURL returns a URL an uploader can PUT the bytes to without
	// Taskcluster credentials until exp; the PUT must carry exactly
	// contentType as its Content-Type header.
	PutURL(ctx context.Context, key, contentType string, exp time.Time) (string, error)
	// GetURL returns a URL that serves the stored bytes to a GET until exp
	// (Local URLs also answer HEAD). It does not check that the blob exists.
	GetURL(ctx context.Context, key string, exp time.Time) (string, error)
	// Delete removes the blob; deleting an absent blob is not an error.
	Delete(ctx context.Context, key string) error
	// Stat describes a stored blob, or returns an error wrapping ErrNotFound.
	Stat(ctx context.Context, key string) (BlobInfo, error)
}

// Mountable is implemented by backends that serve their URLs from hopper's
// own HTTP server: the server must route every request whose path starts
// with MountPath to the backend.
type Mountable interface {
	http.Handler
	// MountPath returns the path prefix, beginning and ending with "/",
	// under which the backend's URLs live.
	MountPath() string
}

// BlobInfo describes a stored blob.
type BlobInfo struct {
	// Size is the length of the stored bytes (after any content encoding).
	Size int64
	// ContentType is the Content-Type the uploader sent.
	ContentType string
	// ContentEncoding is the Content-Encoding the uploader sent, if any.
	ContentEncoding string
	// SHA256 is the lowercase hex SHA-256 of the stored bytes, or "" when the
	// backend does not know it (S3 uploads through a presigned URL carry no
	// checksum).
	SHA256 string
	// Modified is when the blob was last written.
	Modified time.Time
}

// validateKey rejects keys no backend can store safely. It deliberately
// accepts "..", "%", spaces and the like: those are legal in artifact names
// and the backends encode them.
func validateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidKey, len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidKey)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w: contains NUL", ErrInvalidKey)
	}
	return nil
}

// validateExpiry rejects URL expiry times that are not in the future.
func validateExpiry(exp, now time.Time) error {
	if !exp.After(now) {
		return fmt.Errorf("URL expiry %s is not after now (%s)", exp.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return nil
}

// BlobKey is the blob-store key of an s3 artifact's data: the queue writes
// and serves it under this key, and data expiration deletes it.
func BlobKey(taskID string, runID int, name string) string {
	return taskID + "/" + strconv.Itoa(runID) + "/" + name
}
