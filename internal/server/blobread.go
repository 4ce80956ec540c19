package server

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/hopper-ci/hopper/internal/artifacts"
	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/store"
)

// artifactReader reads the content of artifacts stored in hopper's blob
// storage (storage type s3) for the services that quote them: the forge's
// check runs (their log excerpt, custom text and annotations) and
// notify's messages (a log's last lines, logTail).
type artifactReader struct {
	store  artifactRecords
	blobs  artifacts.Backend
	client *http.Client
	// limit bounds how much of an artifact is read to quote from it:
	// what lies beyond is not read.
	limit int64
}

// artifactRecords is the store as the services that quote artifacts read
// it.
type artifactRecords interface {
	GetArtifact(ctx context.Context, taskID string, runID int, name string) (*store.Artifact, error)
}

// newArtifactReader reads at most limit bytes of an artifact, each read
// within timeout.
func newArtifactReader(st artifactRecords, blobs artifacts.Backend, limit int64, timeout time.Duration) *artifactReader {
	return &artifactReader{store: st, blobs: blobs, client: &http.Client{Timeout: timeout}, limit: limit}
}

// ReadArtifact implements githubapi.ArtifactReader: the whole artifact in
// head when it holds at most 2*keep bytes, else its first keep bytes in
// head and its last keep in tail. An artifact without stored content (a
// reference, an error, one not uploaded yet) is store.ErrNotFound.
func (a *artifactReader) ReadArtifact(ctx context.Context, taskID string, runID int, name string, keep int) ([]byte, []byte, error) {
	art, err := a.store.GetArtifact(ctx, taskID, runID, name)
	if err != nil {
		return nil, nil, err
	}
	if art.StorageType != "s3" || !art.Present {
		return nil, nil, fmt.Errorf("%s of %s run %d has no content stored here: %w", name, taskID, runID, store.ErrNotFound)
	}
	u, err := a.blobs.GetURL(ctx, artifacts.BlobKey(taskID, runID, name), time.Now().Add(time.Minute))
	if err != nil {
		return nil, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s of %s run %d: %w", name, taskID, runID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("reading %s of %s run %d: %s", name, taskID, runID, resp.Status)
	}
	var r io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(resp.Body)
		if err != nil {
			return nil, nil, fmt.Errorf("reading %s of %s run %d: %w", name, taskID, runID, err)
		}
		r = gz
	}
	return headAndTail(io.LimitReader(r, a.limit), keep)
}

// logTail returns the last lines of a run's backing log
// (notify.MaxLogTailSize bytes at most, notify.LogTailLines lines).
func (a *artifactReader) logTail(ctx context.Context, taskID string, runID int) (string, error) {
	const keep = notify.MaxLogTailSize
	head, tail, err := a.ReadArtifact(ctx, taskID, runID, "public/logs/live_backing.log", keep)
	if err != nil {
		return "", err
	}
	if tail == nil {
		tail = head[max(len(head)-keep, 0):]
	}
	return notify.TailLines(tail, notify.LogTailLines, keep), nil
}

// headAndTail reads r keeping its first keep bytes and a window of its
// last keep (all of it in head when it holds at most 2*keep).
func headAndTail(r io.Reader, keep int) ([]byte, []byte, error) {
	head := make([]byte, 0, keep)
	var tail []byte
	chunk := make([]byte, 32<<10)
	for {
		n, err := r.Read(chunk)
		data := chunk[:n]
		if room := 2*keep - len(head); room > 0 && tail == nil {
			take := min(room, len(data))
			head, data = append(head, data[:take]...), data[take:]
		}
		if len(data) > 0 {
			if tail == nil {
				// Past 2*keep: head keeps its first half, tail the rest.
				tail = append([]byte(nil), head[keep:]...)
				head = head[:keep]
			}
			tail = append(tail, data...)
			if len(tail) > 2*keep {
				tail = append(tail[:0], tail[len(tail)-keep:]...)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if len(tail) > keep {
		tail = tail[len(tail)-keep:]
	}
	return head, tail, nil
}
