package artifacts

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The upload relay exists because Taskcluster's Go client (and so
// generic-worker with createObjectArtifacts) PUTs object data to a putUrl
// with chunked transfer encoding: net/http drops the Content-Length header
// the Object service asks for. S3 and MinIO refuse such a PUT with 411
// MissingContentLength, so a presigned URL cannot take it. Object uploads
// therefore PUT to hopper, which streams the body to the bucket with the
// length declared in createUpload (signed into the URL).

// RelayMountPath is where an S3 backend serves its relay URLs.
const RelayMountPath = "/blobs-relay/"

const (
	queryLength = "length"
	// relayMACDomain separates relay MACs from Local's URL MACs, which may
	// use the same key.
	relayMACDomain = "hopper-s3-relay-url-v1"
)

// LengthPutURLer is implemented by backends that want the declared length
// of an upload when minting its URL; the object service prefers it to
// Backend.PutURL.
type LengthPutURLer interface {
	PutURLWithLength(ctx context.Context, key, contentType string, length int64, exp time.Time) (string, error)
}

// PutURLWithLength returns a URL accepting a PUT of exactly length bytes
// until exp. Object data (ObjectKeyPrefix keys) goes through hopper's relay
// when one is configured, since uploaders may send it chunked; everything
// else gets a presigned URL as from PutURL.
func (b *S3) PutURLWithLength(ctx context.Context, key, contentType string, length int64, exp time.Time) (string, error) {
	if len(b.relayKey) == 0 || !strings.HasPrefix(key, ObjectKeyPrefix) {
		return b.PutURL(ctx, key, contentType, exp)
	}
	if err := validateKey(key); err != nil {
		return "", err
	}
	if err := validateContentType(contentType); err != nil {
		return "", err
	}
	if length < 0 {
		return "", fmt.Errorf("signing relay upload URL for %q: negative length %d", key, length)
	}
	if _, err := b.validity(exp); err != nil {
		return "", fmt.Errorf("signing relay upload URL for %q: %w", key, err)
	}
	expires := exp.Unix()
	q := url.Values{}
	q.Set(queryExpires, strconv.FormatInt(expires, 10))
	q.Set(queryContentType, contentType)
	q.Set(queryLength, strconv.FormatInt(length, 10))
	q.Set(querySignature, base64.RawURLEncoding.EncodeToString(b.relaySign(key, contentType, length, expires)))
	return b.relayBase + RelayMountPath + base64.RawURLEncoding.EncodeToString([]byte(key)) + "/" + displayName(key) + "?" + q.Encode(), nil
}

// relaySign computes the MAC of a relay URL; fields are length-prefixed so
// no two distinct tuples share an encoding.
func (b *S3) relaySign(key, contentType string, length, expires int64) []byte {
	m := hmac.New(sha256.New, b.relayKey)
	for _, field := range []string{relayMACDomain, key, contentType, strconv.FormatInt(length, 10), strconv.FormatInt(expires, 10)} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(field)))
		m.Write(n[:])
		m.Write([]byte(field))
	}
	return m.Sum(nil)
}

// MountPath returns where the API server must route relay URLs.
func (b *S3) MountPath() string { return RelayMountPath }

// ServeHTTP accepts PUTs to relay URLs and streams them to the bucket.
func (b *S3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(b.relayKey) == 0 {
		writeError(w, http.StatusNotFound, "ResourceNotFound", "no upload relay is configured")
		return
	}
	if r.Method != http.MethodPut {
		w.Header().Set("Allow", "PUT")
		writeError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", fmt.Sprintf("method %s is not supported on relay URLs", r.Method))
		return
	}
	key, ok := relayKeyFromPath(r.URL.EscapedPath())
	if !ok {
		writeError(w, http.StatusNotFound, "ResourceNotFound", "not a relay URL")
		return
	}
	q := r.URL.Query()
	contentType := q.Get(queryContentType)
	length, lenErr := strconv.ParseInt(q.Get(queryLength), 10, 64)
	expires, expErr := strconv.ParseInt(q.Get(queryExpires), 10, 64)
	got, sigErr := base64.RawURLEncoding.DecodeString(q.Get(querySignature))
	// The signature is checked before anything else is reported, so that
	// a caller learns nothing about URLs he cannot sign.
	if lenErr != nil || expErr != nil || sigErr != nil || length < 0 ||
		!hmac.Equal(got, b.relaySign(key, contentType, length, expires)) {
		writeError(w, http.StatusForbidden, "SignatureInvalid", "relay URL signature does not match")
		return
	}
	if b.now().After(time.Unix(expires, 0)) {
		writeError(w, http.StatusForbidden, "UrlExpired", fmt.Sprintf("relay URL expired at %s", time.Unix(expires, 0).UTC().Format(time.RFC3339)))
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != contentType {
		writeError(w, http.StatusBadRequest, "InputError", fmt.Sprintf("Content-Type %q does not match the upload's content type %q", ct, contentType))
		return
	}
	if r.ContentLength >= 0 && len(r.Header.Values("Content-Length")) > 0 && r.ContentLength != length {
		writeError(w, http.StatusBadRequest, "InputError", fmt.Sprintf("Content-Length %d does not match the declared length %d", r.ContentLength, length))
		return
	}
	body := &countingReader{r: r.Body}
	_, err := b.Put(r.Context(), key, contentType, r.Header.Get("Content-Encoding"), length, io.LimitReader(body, length))
	if err == nil && body.n < length {
		err = io.ErrUnexpectedEOF
	}
	if err == nil && !atEOF(r.Body) {
		err = errTooLarge
	}
	if err != nil {
		// Whatever reached the bucket is not the declared upload.
		_ = b.Delete(context.WithoutCancel(r.Context()), key)
		switch {
		case errors.Is(err, errTooLarge):
			writeError(w, http.StatusBadRequest, "InputError", fmt.Sprintf("request body is longer than the declared length %d", length))
		case body.n < length:
			writeError(w, http.StatusBadRequest, "InputError", fmt.Sprintf("request body is shorter than the declared length %d", length))
		case r.Context().Err() != nil:
			// The uploader went away; nobody is listening for a reply.
		default:
			writeError(w, http.StatusBadGateway, "InternalServerError", "storing the upload in the bucket failed")
		}
		return
	}
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// relayKeyFromPath extracts the key from "<mount><base64 key>/<name>"; the
// mount prefix is optional so the handler also works behind StripPrefix.
func relayKeyFromPath(p string) (string, bool) {
	p = strings.TrimPrefix(strings.TrimPrefix(p, RelayMountPath), "/")
	encoded, _, ok := strings.Cut(p, "/")
	if !ok || encoded == "" {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(encoded)
	if err != nil || validateKey(string(raw)) != nil || !strings.HasPrefix(string(raw), ObjectKeyPrefix) {
		return "", false
	}
	return string(raw), true
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// atEOF reports whether r has no bytes left.
func atEOF(r io.Reader) bool {
	var one [1]byte
	for {
		n, err := r.Read(one[:])
		if n > 0 {
			return false
		}
		if err != nil {
			return true
		}
	}
}
