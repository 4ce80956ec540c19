package worker

// Downloads both engines use: mount content (process engine) and image
// archives (docker engine), checked against their SHA-256.

import (
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
	"time"

	"github.com/hopper-ci/hopper/internal/retry"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/worker/payload"
)

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
	var tmp string
	err := retry.Do(ctx, retry.Policy{Attempts: 5, Delay: retry.Doubling(200*time.Millisecond, 0)}, func(int) error {
		url, err := locate(ctx)
		if err == nil {
			tmp, err = r.fetchURL(ctx, url)
		}
		var me *mountError
		if errors.As(err, &me) && !me.temporary {
			return retry.Stop(err)
		}
		return err
	})
	var (
		me          *mountError
		interrupted *retry.InterruptedError
	)
	switch {
	case errors.As(err, &interrupted):
		return "", fmt.Errorf("downloading %s: %w", key, interrupted.Err)
	case errors.As(err, &me) && !me.temporary:
		return "", err
	case err != nil && ctx.Err() != nil:
		return "", fmt.Errorf("downloading %s: %w", key, ctx.Err())
	case err != nil:
		return "", temporary("downloading %s failed after retries: %v", key, err)
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
