package worker

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// gzipUpload returns an upload of the gzip compression of what open
// yields, compressed on the fly: no compressed copy is ever written to
// disk, so a task that filled the disk still gets its log and artifacts
// uploaded. Stores want the length up front (S3 refuses chunked PUTs), so
// the source is compressed once to count the bytes and again, identically
// (compress/gzip is deterministic), while it is sent; each retry
// compresses again. The source must not change meanwhile: the worker
// uploads after the task's processes are gone.
func gzipUpload(putURL, contentType string, open func() (io.ReadCloser, error)) (*tcclient.Upload, error) {
	var size countingWriter
	src, err := open()
	if err != nil {
		return nil, err
	}
	err = gzipStream(&size, src)
	src.Close()
	if err != nil {
		return nil, err
	}
	return &tcclient.Upload{
		PutURL: putURL, ContentType: contentType, ContentEncoding: "gzip", ContentLength: int64(size),
		Open: func() (io.ReadCloser, error) {
			src, err := open()
			if err != nil {
				return nil, err
			}
			pr, pw := io.Pipe()
			go func() {
				defer src.Close()
				pw.CloseWithError(gzipStream(pw, src))
			}()
			return pr, nil
		},
	}, nil
}

// openFile is an open function for gzipUpload reading a file.
func openFile(path string) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("opening %s: %w", path, err)
		}
		return f, nil
	}
}

// countingWriter counts what is written to it and keeps nothing.
type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

// backingLogLost handles a backing log that could not be uploaded: the
// run resolves exception/resource-unavailable whatever the commands did
// (without its log a run proves nothing), and the live log artifact,
// which pointed at a server that is about to stop, becomes an error
// artifact saying why, so nothing dangles.
func (r *taskRun) backingLogLost(err error) {
	r.logger.Error("uploading backing log", "error", err)
	msg := fmt.Sprintf("The task log could not be uploaded: %v", err)
	r.errs = append([]runErr{{reason: tcclient.ReasonResourceUnavailable, msg: msg}}, r.errs...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if len(msg) > 4096 {
		msg = msg[:4096]
	}
	_, cerr := r.claim.Queue().CreateArtifact(ctx, r.claim.TaskID, r.claim.RunID, r.logs.Live, &tcclient.CreateArtifactRequest{
		StorageType: tcclient.StorageError, Expires: r.claim.Task.Expires,
		Reason: tcclient.ArtifactFileMissing, Message: msg,
	})
	if cerr != nil {
		r.logger.Warn("marking the live log as an error artifact", "error", cerr)
	}
}
