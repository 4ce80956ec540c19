// Package object is hopper's Object service (Taskcluster's Object API v1):
// named, immutable blobs uploaded once and downloaded many times, kept in
// hopper's blob storage (local disk or S3) with their rows in the store.
//
// This file holds the rules, plain Go over store.Object with the time
// passed in: how an upload is begun, renewed and finished, how hashes may
// be amended, which methods are agreed. service.go applies them to the
// store and the blobs; internal/objectapi serves them over HTTP.
package object

import (
	"fmt"
	"maps"
	"time"

	"github.com/hopper-ci/hopper/internal/artifacts"
	"github.com/hopper-ci/hopper/internal/store"
)

// Lifetimes (Taskcluster's object service uses the same).
const (
	// UploadLifetime is how long an unfinished upload is kept.
	UploadLifetime = 24 * time.Hour
	// PutURLLifetime is the validity reported with a putUrl; the URL is
	// signed urlClockSlack longer for clients whose clocks run ahead.
	PutURLLifetime = 45 * time.Minute
	// GetURLLifetime is the validity reported with a getUrl download. A
	// download that started in time may run as long as it needs.
	GetURLLifetime = 5 * time.Minute
	// SimpleURLLifetime is how long a simple-download URL stays valid.
	SimpleURLLifetime = 30 * time.Minute
	urlClockSlack     = time.Minute
)

// MaxDataInline is the largest object accepted inline (base64 in the
// request body), as Taskcluster's schema bounds it.
const MaxDataInline = 8192

// blobPrefix keeps object data apart from artifact data in the shared blob
// store: artifact keys begin with a 22-character taskId, never "objects".
const blobPrefix = artifacts.ObjectKeyPrefix

// MaxNameLen is the longest object name; the blob key must stay within the
// store's key limit.
const MaxNameLen = artifacts.MaxKeyLen - len(blobPrefix)

// blobKey is where an object's data is stored.
func blobKey(name string) string { return blobPrefix + name }

// ErrorKind classifies a refused call so the HTTP layer maps it in one
// place.
type ErrorKind int

// Error kinds.
const (
	KindConflict ErrorKind = iota + 1 // 409 RequestConflict
	KindNotFound                      // 404 ResourceNotFound
	KindInput                         // 400 InputError
	KindNoMatch                       // 406 NoMatchingMethod
)

// Error is a call refused by the rules.
type Error struct {
	Kind    ErrorKind
	Message string
}

func (e *Error) Error() string { return e.Message }

func errorf(kind ErrorKind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// Hash algorithms downloaders must recognise; others are kept and passed
// on (a newer client may send one the service does not know yet).
var knownHashLengths = map[string]int{"sha256": 64, "sha512": 128}

// UploadRequest is what createUpload and finishUpload carry.
type UploadRequest struct {
	ProjectID string
	UploadID  string
	// Expires is the object's expiry; createUpload only.
	Expires time.Time
	Hashes  map[string]string
}

// MaxContentTypeLen bounds a content type, as the blob stores do.
const MaxContentTypeLen = 1024

// CheckContentType refuses a content type that cannot be sent as an HTTP
// header value: empty, longer than MaxContentTypeLen, or holding a control
// character.
func CheckContentType(ct string) error {
	if ct == "" {
		return errorf(KindInput, "contentType must not be empty")
	}
	if len(ct) > MaxContentTypeLen {
		return errorf(KindInput, "contentType is %d bytes long; at most %d are allowed", len(ct), MaxContentTypeLen)
	}
	for i := 0; i < len(ct); i++ {
		if c := ct[i]; c < 0x20 || c == 0x7f {
			return errorf(KindInput, "contentType %q contains a control character", ct)
		}
	}
	return nil
}

// BeginUpload returns the object record a createUpload call leaves: a new
// unfinished upload, or the same one again (its uploadId, projectId and
// expires must match, and hashes may only be added).
func BeginUpload(existing *store.Object, name string, req UploadRequest, now time.Time) (*store.Object, error) {
	// Stored to the millisecond, as Taskcluster's timestamps are; a repeat
	// naming the same instant more precisely is the same expires.
	req.Expires = req.Expires.Truncate(time.Millisecond)
	if len(name) > MaxNameLen {
		return nil, errorf(KindInput, "Object name is %d characters long; at most %d are allowed", len(name), MaxNameLen)
	}
	if !req.Expires.After(now) {
		return nil, errorf(KindInput, "Object expires (%s) must be in the future", req.Expires.UTC().Format(time.RFC3339))
	}
	if existing == nil {
		if err := hashesCompatible(name, nil, req.Hashes, true); err != nil {
			return nil, err
		}
		return &store.Object{Name: name, ProjectID: req.ProjectID, UploadID: req.UploadID, UploadExpires: now.Add(UploadLifetime),
			Expires: req.Expires, Hashes: mergeHashes(nil, req.Hashes), Created: now}, nil
	}
	switch {
	case existing.UploadID == "":
		return nil, errorf(KindConflict, "Object %q already exists", name)
	case existing.UploadID != req.UploadID:
		return nil, errorf(KindConflict, "Object %q is being uploaded with another uploadId", name)
	case existing.ProjectID != req.ProjectID:
		return nil, errorf(KindConflict, "Object %q is being uploaded for another projectId (%s)", name, existing.ProjectID)
	case !existing.Expires.Equal(req.Expires):
		return nil, errorf(KindConflict, "Object %q is being uploaded with another expires (%s); it cannot be changed",
			name, existing.Expires.UTC().Format(time.RFC3339Nano))
	}
	if err := hashesCompatible(name, existing.Hashes, req.Hashes, true); err != nil {
		return nil, err
	}
	next := *existing
	next.Hashes = mergeHashes(existing.Hashes, req.Hashes)
	return &next, nil
}

// FinishUpload returns the finished record (nil when the object was
// finished already and the call is a compatible repeat, which changes
// nothing).
func FinishUpload(existing *store.Object, name string, req UploadRequest, now time.Time) (*store.Object, error) {
	if existing == nil || (existing.UploadID != "" && existing.UploadExpires.Before(now)) {
		return nil, errorf(KindNotFound, "Object %q not found", name)
	}
	if existing.ProjectID != req.ProjectID {
		return nil, errorf(KindInput, "Object %q does not have projectId %s", name, req.ProjectID)
	}
	if existing.UploadID == "" {
		// A repeat: it may name fewer hashes, never new or different ones.
		return nil, hashesCompatible(name, existing.Hashes, req.Hashes, false)
	}
	if existing.UploadID != req.UploadID {
		return nil, errorf(KindConflict, "Object %q does not have uploadId %s", name, req.UploadID)
	}
	if err := hashesCompatible(name, existing.Hashes, req.Hashes, true); err != nil {
		return nil, err
	}
	next := *existing
	next.UploadID = ""
	next.Hashes = mergeHashes(existing.Hashes, req.Hashes)
	return &next, nil
}

// Downloadable reports whether the object can be read: finished and not
// expired. Anything else is answered as not found.
func Downloadable(o *store.Object, now time.Time) bool {
	return o != nil && o.UploadID == "" && !o.Expires.Before(now)
}

// hashesCompatible checks hashes against those recorded: a recorded
// algorithm must keep its value; a new one is allowed only while amending.
func hashesCompatible(name string, recorded, hashes map[string]string, amending bool) error {
	for algo, value := range hashes {
		if want, ok := knownHashLengths[algo]; ok && len(value) != want {
			return errorf(KindInput, "Hash %s of object %q must be %d lowercase hex digits", algo, name, want)
		}
		old, ok := recorded[algo]
		switch {
		case !ok && !amending:
			return errorf(KindConflict, "Object %q is already finished, but without hash algorithm %s", name, algo)
		case ok && old != value:
			return errorf(KindConflict, "Object %q already has a different %s hash", name, algo)
		}
	}
	return nil
}

func mergeHashes(recorded, added map[string]string) map[string]string {
	out := make(map[string]string, len(recorded)+len(added))
	maps.Copy(out, recorded)
	maps.Copy(out, added)
	return out
}

// Download methods, most preferred first.
const (
	MethodGetURL = "getUrl"
	MethodSimple = "simple"
)

// ChooseDownloadMethod picks the method of those accepted that hopper
// prefers: getUrl (the client verifies hashes), then simple.
func ChooseDownloadMethod(accepted map[string]bool) (string, error) {
	for _, m := range []string{MethodGetURL, MethodSimple} {
		if accepted[m] {
			return m, nil
		}
	}
	return "", errorf(KindNoMatch, "Object supports methods %s, %s", MethodGetURL, MethodSimple)
}
