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

// keepLogAfterLoss uploads the log of a run the worker no longer holds.
// A run cancelled (cancelTask, cancelInProgress, a fail-fast group) or
// otherwise resolved exception under the worker still takes artifacts for
// a while (docs/contract/queue.md §5.7), and generic-worker uploads its
// logs there: without it the task's output, streamed live a second
// earlier, would be gone, and readers left with a live-log link to a
// server that stopped. The log ends with a line saying why it stopped; the
// live log becomes a link to the uploaded one. When the queue refuses (the
// run was resolved otherwise, the window closed, the claim's credentials
// expired) nothing more is tried: the run is not this worker's to report.
func (r *taskRun) keepLogAfterLoss() {
	if r.log == nil {
		return
	}
	if !r.logClosed {
		r.log.Errorf("=== Task Stopped ===")
		r.log.Errorf("The run is no longer this worker's: %v. Its commands were stopped; this log is all the run wrote.", r.claim.LostReason())
		r.log.Close()
		r.logClosed = true
	}
	if r.live != nil {
		// Followers (the console, hopper task log --follow) get the
		// rest of the log and an end.
		_ = r.live.Close(5 * time.Second)
		r.live = nil
	}
	if !r.backing {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.w.cfg.ShutdownUploadTimeout.Duration)
	defer cancel()
	if err := r.uploadBackingLog(ctx); err != nil {
		r.logger.Info("the queue takes no log for this run", "error", err)
		return
	}
	if r.liveLog {
		_, err := r.claim.Queue().CreateArtifact(ctx, r.claim.TaskID, r.claim.RunID, r.logs.Live, &tcclient.CreateArtifactRequest{
			StorageType: tcclient.StorageLink, Expires: r.claim.Task.Expires, Artifact: r.logs.Backing,
		})
		if err != nil {
			r.logger.Warn("switching the live log to the backing log", "error", err)
		}
	}
	r.logger.Info("log of the lost run uploaded", "artifact", r.logs.Backing)
}
