package tcclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/retry"
)

// Upload describes a PUT of artifact bytes to an s3 putUrl.
type Upload struct {
	// PutURL is the URL createArtifact returned.
	PutURL string
	// ContentType must equal the contentType given to createArtifact.
	ContentType string
	// ContentEncoding is sent when non-empty (e.g. "gzip" for a body that
	// is already gzipped).
	ContentEncoding string
	// ContentLength is the exact number of bytes Open yields.
	ContentLength int64
	// Open returns a fresh reader of the body; it is called once per
	// attempt so that retries resend from the start.
	Open func() (io.ReadCloser, error)
	// HTTPClient performs the PUT; nil means http.DefaultClient.
	HTTPClient *http.Client
	// MaxRetries and RetryDelay work as on Client.
	MaxRetries int
	RetryDelay time.Duration
}

// BytesUpload returns an Upload of data.
func BytesUpload(putURL, contentType, contentEncoding string, data []byte) *Upload {
	return &Upload{
		PutURL: putURL, ContentType: contentType, ContentEncoding: contentEncoding,
		ContentLength: int64(len(data)),
		Open:          func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
	}
}

// FileUpload returns an Upload of the file at path (whose size is taken now).
func FileUpload(putURL, contentType, contentEncoding, path string) (*Upload, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("inspecting %s for upload: %w", path, err)
	}
	return &Upload{
		PutURL: putURL, ContentType: contentType, ContentEncoding: contentEncoding,
		ContentLength: fi.Size(),
		Open:          func() (io.ReadCloser, error) { return os.Open(path) },
	}, nil
}

// Do performs the upload, retrying network errors and 5xx replies with
// exponential back-off.
func (u *Upload) Do(ctx context.Context) error {
	return retry.Do(ctx, retryPolicy(u.MaxRetries, u.RetryDelay), func(int) error {
		err := u.attempt(ctx)
		if err != nil && !IsTransient(err) {
			return retry.Stop(err)
		}
		return err
	})
}

func (u *Upload) attempt(ctx context.Context) error {
	if u.Open == nil {
		return errors.New("upload has no body")
	}
	body, err := u.Open()
	if err != nil {
		return fmt.Errorf("opening upload body: %w", err)
	}
	defer body.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u.PutURL, body)
	if err != nil {
		return fmt.Errorf("building upload request: %w", err)
	}
	req.ContentLength = u.ContentLength
	if u.ContentLength == 0 {
		// A zero length with a non-nil body would be sent chunked.
		req.Body = http.NoBody
	}
	req.Header.Set("Content-Type", u.ContentType)
	req.Header.Set("Content-Length", strconv.FormatInt(u.ContentLength, 10))
	if u.ContentEncoding != "" {
		req.Header.Set("Content-Encoding", u.ContentEncoding)
	}
	hc := u.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		// *url.Error repeats the full URL, signature included; keep only
		// the underlying cause.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Errorf("uploading to %s: %w", redactQuery(u.PutURL), err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	return &APIError{
		StatusCode: resp.StatusCode, Message: strings.TrimSpace(string(msg)),
		Method: http.MethodPut, URL: redactQuery(u.PutURL),
	}
}

// redactQuery drops the query of a URL for error messages: putUrls carry
// signatures in their query that must not end up in logs.
func redactQuery(raw string) string {
	if i := strings.IndexByte(raw, '?'); i >= 0 {
		return raw[:i] + "?…"
	}
	return raw
}
