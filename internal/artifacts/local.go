package artifacts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// DefaultMountPath is where the API server mounts a Local backend unless
// LocalOptions.MountPath says otherwise.
const DefaultMountPath = "/blobs/"

// MinSigningKeyLen is the shortest HMAC key NewLocal accepts, in bytes.
const MinSigningKeyLen = 32

// copyBufferSize is the buffer used to stream one upload to disk; it is the
// only per-upload allocation that scales with nothing, keeping memory flat.
const copyBufferSize = 256 << 10

// lockStripes is the number of mutexes serialising metadata commits. Commits
// are short (a rename and an unlink), so a small fixed set suffices.
const lockStripes = 64

// LocalOptions configures a Local backend.
type LocalOptions struct {
	// Dir is the directory holding the blobs; it is created if missing.
	Dir string
	// BaseURL is the root URL under which hopper's HTTP server is reachable
	// by uploaders and downloaders (for example "https://tc.example.com").
	// Signed URLs are BaseURL + MountPath + ….
	BaseURL string
	// SigningKey is the HMAC-SHA256 key for signed URLs, at least
	// MinSigningKeyLen bytes. Every replica serving the same Dir must use the
	// same key, and changing it invalidates outstanding URLs.
	SigningKey []byte
	// MountPath is the path prefix the handler is mounted under; it must
	// start and end with "/". Empty means DefaultMountPath.
	MountPath string
	// MaxSize, when positive, is the largest upload accepted (413 above it).
	MaxSize int64
	// NowFunc returns the current time; nil means time.Now. Tests inject a
	// fake clock to expire URLs without sleeping.
	NowFunc func() time.Time
	// Logger receives server-side failures of the HTTP handler; nil
	// discards them.
	Logger *slog.Logger
}

// Local stores blobs in a directory and serves them through HMAC-signed
// URLs handled by its ServeHTTP method.
//
// Layout under Dir: "tmp/" holds uploads in flight; "blobs/ab/<h>.json" is
// the metadata of the key whose SHA-256 is <h> (first byte "ab") and
// "blobs/ab/<h>.<version>.data" its bytes. File names derive only from the
// hash, so no key can name a path outside Dir. The metadata file points at
// the current version and is replaced by an atomic rename: that rename is
// the commit point of an upload, so readers always see a consistent pair of
// bytes and metadata, and the last committed upload wins.
type Local struct {
	dir      string
	tmpDir   string
	blobsDir string
	baseURL  string // without trailing slash
	mount    string
	key      []byte
	maxSize  int64
	now      func() time.Time
	log      *slog.Logger
	locks    [lockStripes]sync.Mutex
}

// localMeta is the JSON sidecar stored next to each blob.
type localMeta struct {
	Key             string    `json:"key"`
	Version         string    `json:"version"`
	Size            int64     `json:"size"`
	ContentType     string    `json:"contentType"`
	ContentEncoding string    `json:"contentEncoding,omitempty"`
	SHA256          string    `json:"sha256"`
	Modified        time.Time `json:"modified"`
}

// versionPattern is what a version in a metadata file must look like; it is
// checked before the version is used in a file name.
var versionPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)

// errShortBody reports an upload whose body ended before its declared length.
var errShortBody = errors.New("request body shorter than Content-Length")

// NewLocal creates a Local backend, creating its directories if needed.
func NewLocal(opts LocalOptions) (*Local, error) {
	if opts.Dir == "" {
		return nil, errors.New("local blob storage: no directory configured")
	}
	if len(opts.SigningKey) < MinSigningKeyLen {
		return nil, fmt.Errorf("local blob storage: signing key has %d bytes, need at least %d", len(opts.SigningKey), MinSigningKeyLen)
	}
	base, err := url.Parse(opts.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("local blob storage: parsing base URL: %w", err)
	}
	if (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" || base.RawQuery != "" || base.Fragment != "" {
		return nil, fmt.Errorf("local blob storage: base URL %q must be an absolute http(s) URL without query or fragment", opts.BaseURL)
	}
	mount := opts.MountPath
	if mount == "" {
		mount = DefaultMountPath
	}
	if !strings.HasPrefix(mount, "/") || !strings.HasSuffix(mount, "/") || len(mount) < 2 {
		return nil, fmt.Errorf("local blob storage: mount path %q must start and end with /", mount)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("local blob storage: resolving %q: %w", opts.Dir, err)
	}
	l := &Local{
		dir:      dir,
		tmpDir:   filepath.Join(dir, "tmp"),
		blobsDir: filepath.Join(dir, "blobs"),
		baseURL:  strings.TrimRight(opts.BaseURL, "/"),
		mount:    mount,
		key:      append([]byte(nil), opts.SigningKey...),
		maxSize:  opts.MaxSize,
		now:      opts.NowFunc,
		log:      opts.Logger,
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	for _, d := range []string{l.tmpDir, l.blobsDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("local blob storage: creating %s: %w", d, err)
		}
	}
	l.sweepTmp()
	return l, nil
}

// staleTmpAge is how old a temporary file must be before NewLocal deletes
// it: far beyond any upload through a 45-minute URL, so that a replica
// starting next to one that is mid-upload leaves its file alone.
const staleTmpAge = 24 * time.Hour

// sweepTmp removes temporary files left behind by a crash.
func (l *Local) sweepTmp() {
	entries, err := os.ReadDir(l.tmpDir)
	if err != nil {
		l.log.Warn("listing temporary blob files", "dir", l.tmpDir, "error", err)
		return
	}
	cutoff := l.now().Add(-staleTmpAge)
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || info.IsDir() || !info.ModTime().Before(cutoff) {
			continue
		}
		if err := os.Remove(filepath.Join(l.tmpDir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.log.Warn("removing stale temporary blob file", "file", e.Name(), "error", err)
		}
	}
}

// MountPath returns the path prefix under which the API server must route
// requests to l.
func (l *Local) MountPath() string { return l.mount }

// PutURL returns a signed URL accepting one or more PUTs of the blob until
// exp; each PUT must carry exactly contentType.
func (l *Local) PutURL(_ context.Context, key, contentType string, exp time.Time) (string, error) {
	if err := validateKey(key); err != nil {
		return "", err
	}
	if err := validateContentType(contentType); err != nil {
		return "", err
	}
	if err := validateExpiry(exp, l.now()); err != nil {
		return "", fmt.Errorf("signing upload URL for %q: %w", key, err)
	}
	return l.signedURL(opPut, key, contentType, exp.Unix()), nil
}

// GetURL returns a signed URL serving the blob (GET and HEAD) until exp.
func (l *Local) GetURL(_ context.Context, key string, exp time.Time) (string, error) {
	if err := validateKey(key); err != nil {
		return "", err
	}
	if err := validateExpiry(exp, l.now()); err != nil {
		return "", fmt.Errorf("signing download URL for %q: %w", key, err)
	}
	return l.signedURL(opGet, key, "", exp.Unix()), nil
}

// Stat describes the blob stored under key.
func (l *Local) Stat(_ context.Context, key string) (BlobInfo, error) {
	if err := validateKey(key); err != nil {
		return BlobInfo{}, err
	}
	m, err := l.readMeta(key)
	if err != nil {
		return BlobInfo{}, err
	}
	return m.info(), nil
}

// Delete removes the blob stored under key, if any.
func (l *Local) Delete(_ context.Context, key string) error {
	if err := validateKey(key); err != nil {
		return err
	}
	h := keyHash(key)
	mu := l.lock(h)
	mu.Lock()
	defer mu.Unlock()
	m, err := l.readMeta(key)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting blob %q: %w", key, err)
	}
	if err := os.Remove(l.metaPath(h)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("deleting metadata of blob %q: %w", key, err)
	}
	if err := os.Remove(l.dataPath(h, m.Version)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("deleting data of blob %q: %w", key, err)
	}
	return nil
}

// Put stores size bytes read from r under key, exactly as an upload through
// a PutURL would. It fails with an error wrapping io.ErrUnexpectedEOF if r
// ends early; bytes beyond size are not read. The queue does not need it
// (workers upload through URLs); it exists for tools and tests that hold
// the bytes server-side.
func (l *Local) Put(ctx context.Context, key, contentType, contentEncoding string, size int64, r io.Reader) (BlobInfo, error) {
	if err := validateKey(key); err != nil {
		return BlobInfo{}, err
	}
	if err := validateContentType(contentType); err != nil {
		return BlobInfo{}, err
	}
	m, err := l.store(ctx, key, contentType, contentEncoding, size, r)
	if err != nil {
		return BlobInfo{}, err
	}
	return m.info(), nil
}

// store streams the body into a temporary file, moves it to a fresh
// versioned data file and commits it by replacing the metadata file.
func (l *Local) store(ctx context.Context, key, contentType, contentEncoding string, size int64, r io.Reader) (localMeta, error) {
	if size < 0 && size != unknownSize {
		return localMeta{}, fmt.Errorf("storing blob %q: negative size %d", key, size)
	}
	tmp, err := os.CreateTemp(l.tmpDir, "upload-*")
	if err != nil {
		return localMeta{}, fmt.Errorf("storing blob %q: creating temporary file: %w", key, err)
	}
	tmpName := tmp.Name()
	moved := false
	defer func() {
		if !moved {
			_ = tmp.Close()
			_ = os.Remove(tmpName)
		}
	}()

	sum := sha256.New()
	limit := size
	if size == unknownSize {
		// Read to the end, but never past the size limit.
		limit = math.MaxInt64
		if l.maxSize > 0 {
			limit = l.maxSize + 1
		}
	}
	n, err := copyN(ctx, io.MultiWriter(tmp, sum), r, limit)
	if err != nil {
		return localMeta{}, fmt.Errorf("storing blob %q: receiving bytes: %w", key, err)
	}
	if size == unknownSize && l.maxSize > 0 && n > l.maxSize {
		return localMeta{}, fmt.Errorf("storing blob %q: more than %d bytes: %w", key, l.maxSize, errTooLarge)
	}
	if size != unknownSize && n != size {
		return localMeta{}, fmt.Errorf("storing blob %q: got %d of %d bytes: %w: %w", key, n, size, errShortBody, io.ErrUnexpectedEOF)
	}
	// Flush to disk before the rename so a crash never leaves metadata
	// pointing at a truncated file.
	if err := tmp.Sync(); err != nil {
		return localMeta{}, fmt.Errorf("storing blob %q: syncing: %w", key, err)
	}
	if err := tmp.Close(); err != nil {
		return localMeta{}, fmt.Errorf("storing blob %q: closing: %w", key, err)
	}

	h := keyHash(key)
	version, err := newVersion()
	if err != nil {
		return localMeta{}, fmt.Errorf("storing blob %q: %w", key, err)
	}
	if err := os.MkdirAll(l.fanoutDir(h), 0o750); err != nil {
		return localMeta{}, fmt.Errorf("storing blob %q: creating directory: %w", key, err)
	}
	data := l.dataPath(h, version)
	if err := os.Rename(tmpName, data); err != nil {
		return localMeta{}, fmt.Errorf("storing blob %q: moving data into place: %w", key, err)
	}
	moved = true // tmpName is gone; a failed commit removes data below.

	m := localMeta{
		Key:             key,
		Version:         version,
		Size:            n,
		ContentType:     contentType,
		ContentEncoding: contentEncoding,
		SHA256:          hex.EncodeToString(sum.Sum(nil)),
		Modified:        l.now().UTC(),
	}
	if err := l.commit(h, m); err != nil {
		_ = os.Remove(data)
		return localMeta{}, fmt.Errorf("storing blob %q: %w", key, err)
	}
	return m, nil
}

// commit makes m the current version of its key and deletes the data of
// the version it replaces. The stripe lock makes "read the old version,
// replace it, delete its data" atomic with respect to other commits and
// deletes of the same key, so no data file is orphaned or deleted while
// current.
func (l *Local) commit(h string, m localMeta) error {
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding metadata: %w", err)
	}
	mu := l.lock(h)
	mu.Lock()
	defer mu.Unlock()

	old, oldErr := l.readMeta(m.Key)
	if oldErr != nil && !errors.Is(oldErr, ErrNotFound) {
		// A corrupt or unreadable previous version must not block a new
		// upload; its data file, if any, is left behind.
		l.log.Warn("replacing unreadable blob metadata", "key", m.Key, "error", oldErr)
	}
	if err := writeFileAtomic(l.tmpDir, l.metaPath(h), body); err != nil {
		return fmt.Errorf("writing metadata: %w", err)
	}
	if oldErr == nil && old.Version != m.Version {
		if err := os.Remove(l.dataPath(h, old.Version)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.log.Warn("removing replaced blob data", "key", m.Key, "error", err)
		}
	}
	return nil
}

// open returns the current data file of key and its metadata. A concurrent
// commit may delete the data file between reading the metadata and opening
// it; the lookup is then retried against the newer metadata.
func (l *Local) open(key string) (*os.File, localMeta, error) {
	h := keyHash(key)
	var lastErr error
	for range 5 {
		m, err := l.readMeta(key)
		if err != nil {
			return nil, localMeta{}, err
		}
		f, err := os.Open(l.dataPath(h, m.Version))
		if err == nil {
			return f, m, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, localMeta{}, fmt.Errorf("opening blob %q: %w", key, err)
		}
		lastErr = err
	}
	return nil, localMeta{}, fmt.Errorf("opening blob %q: replaced repeatedly while opening: %w", key, lastErr)
}

// readMeta loads and checks the metadata of key.
func (l *Local) readMeta(key string) (localMeta, error) {
	h := keyHash(key)
	body, err := os.ReadFile(l.metaPath(h))
	if errors.Is(err, fs.ErrNotExist) {
		return localMeta{}, fmt.Errorf("blob %q: %w", key, ErrNotFound)
	}
	if err != nil {
		return localMeta{}, fmt.Errorf("reading metadata of blob %q: %w", key, err)
	}
	var m localMeta
	if err := json.Unmarshal(body, &m); err != nil {
		return localMeta{}, fmt.Errorf("decoding metadata of blob %q: %w", key, err)
	}
	if m.Key != key || !versionPattern.MatchString(m.Version) {
		return localMeta{}, fmt.Errorf("metadata of blob %q is inconsistent (key %q, version %q)", key, m.Key, m.Version)
	}
	return m, nil
}

func (m localMeta) info() BlobInfo {
	return BlobInfo{
		Size:            m.Size,
		ContentType:     m.ContentType,
		ContentEncoding: m.ContentEncoding,
		SHA256:          m.SHA256,
		Modified:        m.Modified,
	}
}

func (l *Local) lock(h string) *sync.Mutex {
	b, _ := hex.DecodeString(h[:2])
	return &l.locks[int(b[0])%lockStripes]
}

func (l *Local) fanoutDir(h string) string { return filepath.Join(l.blobsDir, h[:2]) }

func (l *Local) metaPath(h string) string { return filepath.Join(l.fanoutDir(h), h+".json") }

func (l *Local) dataPath(h, version string) string {
	return filepath.Join(l.fanoutDir(h), h+"."+version+".data")
}

// keyHash names a key on disk. Only this hex digest ever reaches a file
// name, which is what keeps hostile artifact names inside the store.
func keyHash(key string) string {
	s := sha256.Sum256([]byte(key))
	return hex.EncodeToString(s[:])
}

func newVersion() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating version: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// copyN copies up to n bytes from src to dst with a fixed buffer, checking
// ctx between chunks. It returns the number of bytes copied; reaching EOF
// early is not an error here (the caller compares the count).
func copyN(ctx context.Context, dst io.Writer, src io.Reader, n int64) (int64, error) {
	buf := make([]byte, copyBufferSize)
	var written int64
	for written < n {
		if err := ctx.Err(); err != nil {
			return written, err
		}
		chunk := buf
		if rest := n - written; rest < int64(len(chunk)) {
			chunk = chunk[:rest]
		}
		nr, rerr := src.Read(chunk)
		if nr > 0 {
			nw, werr := dst.Write(chunk[:nr])
			written += int64(nw)
			if werr != nil {
				return written, werr
			}
			if nw != nr {
				return written, io.ErrShortWrite
			}
		}
		if errors.Is(rerr, io.EOF) {
			return written, nil
		}
		if rerr != nil {
			return written, rerr
		}
	}
	return written, nil
}

// writeFileAtomic replaces path with body via a synced temporary file in
// tmpDir (same file system) and a rename.
func writeFileAtomic(tmpDir, path string, body []byte) error {
	f, err := os.CreateTemp(tmpDir, "meta-*")
	if err != nil {
		return fmt.Errorf("creating temporary file: %w", err)
	}
	name := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = os.Remove(name)
		}
	}()
	if _, err := f.Write(body); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", name, err)
	}
	if err := os.Rename(name, path); err != nil {
		return fmt.Errorf("renaming into %s: %w", path, err)
	}
	ok = true
	return nil
}

// validateContentType rejects content types that cannot travel in an HTTP
// header: empty, or containing control characters.
func validateContentType(ct string) error {
	if ct == "" {
		return errors.New("content type is required")
	}
	if len(ct) > 1024 {
		return fmt.Errorf("content type is %d bytes long", len(ct))
	}
	for i := 0; i < len(ct); i++ {
		if c := ct[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("content type %q contains a control character", ct)
		}
	}
	return nil
}

// Compile-time checks that Local is a mountable Backend.
var (
	_ Backend   = (*Local)(nil)
	_ Mountable = (*Local)(nil)
)
