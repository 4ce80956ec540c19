package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/dockerapi"
	"github.com/hopper-ci/hopper/internal/retry"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/worker/payload"
)

// taskImageRepo is the local repository under which images loaded from
// artifacts are tagged by the SHA-256 of their tarball, so a later task
// naming the same bytes (under any task or index path) skips the load.
const taskImageRepo = "hopper/task-image"

// ensureImage makes payload.image available in the daemon and sets
// t.image. Errors are classified for the resolution: a reference or an
// artifact that cannot exist is malformed-payload, a registry or queue that
// does not answer is resource-unavailable.
func (t *dockerTask) ensureImage() *runErr {
	img := t.pl.Image
	t.r.log.Infof("Image: %s", img.Describe())
	switch img.Type {
	case payload.ImageRegistry, payload.ImageNamed:
		return t.ensureRegistryImage(img.Name)
	case payload.ImageIndexed:
		taskID, re := t.findIndexedTask(img.Namespace)
		if re != nil {
			return re
		}
		t.r.log.Infof("Namespace %s is indexed to task %s", img.Namespace, taskID)
		return t.ensureArtifactImage(taskID, img.Path)
	case payload.ImageTask:
		return t.ensureArtifactImage(img.TaskID, img.Path)
	}
	e := malformed("payload.image: unknown image type %q", img.Type)
	return &e
}

// ensureRegistryImage uses a local image of that name, or pulls it.
func (t *dockerTask) ensureRegistryImage(name string) *runErr {
	ctx := t.r.workCtx
	if found, err := t.e.client.InspectImage(ctx, name); err == nil {
		t.image = found.ID
		t.r.log.Infof("Using local image %s (%s)", name, found.ID)
		return nil
	} else if pullIsPermanent(err) {
		e := malformed("payload.image: image %s cannot be pulled: %v", name, err)
		return &e
	} else if !dockerapi.IsNotFound(err) {
		e := internalError("Inspecting image %s: %v", name, err)
		return &e
	}
	t.r.log.Infof("Pulling image %s", name)
	err := retry.Do(ctx, retry.Policy{Attempts: 3, Delay: retry.Doubling(500*time.Millisecond, 0)}, func(int) error {
		err := t.e.client.PullImage(ctx, name)
		if pullIsPermanent(err) {
			return retry.Stop(err)
		}
		return err
	})
	var interrupted *retry.InterruptedError
	switch {
	case err == nil:
		found, ierr := t.e.client.InspectImage(ctx, name)
		if ierr != nil {
			e := internalError("Inspecting image %s after pulling it: %v", name, ierr)
			return &e
		}
		t.image = found.ID
		t.r.log.Infof("Pulled image %s (%s)", name, found.ID)
		return nil
	case errors.As(err, &interrupted):
		e := runErr{reason: tcclient.ReasonWorkerShutdown, aborted: true, msg: "Image pull interrupted."}
		return &e
	case pullIsPermanent(err):
		e := malformed("payload.image: image %s cannot be pulled: %v", name, err)
		return &e
	}
	// docker-worker reported a failed pull as a plain failure; an
	// unreachable registry is the infrastructure's fault, not the task's,
	// so hopper says resource-unavailable (README compatibility table).
	e := runErr{reason: tcclient.ReasonResourceUnavailable, msg: fmt.Sprintf("Pulling docker image %s failed after retries: %v", name, err)}
	return &e
}

// pullIsPermanent tells a reference that does not exist or is invalid
// (retrying cannot help) from a registry that did not answer.
func pullIsPermanent(err error) bool {
	var de *dockerapi.Error
	if !errors.As(err, &de) {
		return false
	}
	if de.StatusCode == http.StatusBadRequest {
		return true
	}
	msg := strings.ToLower(de.Message)
	for _, s := range []string{"manifest unknown", "repository does not exist", "pull access denied", "invalid reference format", "not found: manifest"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// findIndexedTask asks the Index service which task a namespace points at.
func (t *dockerTask) findIndexedTask(namespace string) (string, *runErr) {
	ctx, cancel := context.WithTimeout(t.r.workCtx, time.Minute)
	defer cancel()
	url := strings.TrimRight(t.e.cfg.RootURL, "/") + "/api/index/v1/task/" + tcclient.EscapePathParam(namespace)
	var (
		taskID string
		status int
	)
	policy := retry.Policy{Attempts: 4, Delay: func(n int) time.Duration { return time.Duration(n+1) * 300 * time.Millisecond }}
	err := retry.Do(ctx, policy, func(int) error {
		var err error
		taskID, status, err = t.getIndexedTask(ctx, url)
		switch {
		case err == nil && taskID == "":
			return errors.New("the index answered without a taskId")
		case status >= 400 && status < 500:
			return retry.Stop(err)
		}
		return err
	})
	var interrupted *retry.InterruptedError
	switch {
	case err == nil:
		return taskID, nil
	case errors.As(err, &interrupted):
		e := runErr{reason: tcclient.ReasonResourceUnavailable, msg: fmt.Sprintf("payload.image: looking up namespace %s: %v", namespace, interrupted.Err)}
		return "", &e
	case status == http.StatusNotFound:
		e := malformed("payload.image: no task is indexed at namespace %s (the Index service at %s/api/index/v1 answered 404)", namespace, t.e.cfg.RootURL)
		return "", &e
	case status >= 400 && status < 500:
		e := malformed("payload.image: the Index service refused the lookup of namespace %s (HTTP %d)", namespace, status)
		return "", &e
	}
	e := runErr{reason: tcclient.ReasonResourceUnavailable, msg: fmt.Sprintf("payload.image: the Index service did not answer for namespace %s: %v", namespace, err)}
	return "", &e
}

// getIndexedTask calls findTask, signed (by bewit) with the worker's own
// credentials as docker-worker did: the lookup only reads, and a task
// could not name an image by namespace otherwise unless its deployment
// lets anonymous clients find tasks.
func (t *dockerTask) getIndexedTask(ctx context.Context, url string) (string, int, error) {
	signed, err := t.r.w.Queue().SignedURL(url, time.Minute)
	if err != nil {
		return "", 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, signed, nil)
	if err != nil {
		return "", 0, err
	}
	client := t.r.w.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", resp.StatusCode, fmt.Errorf("index answered HTTP %d", resp.StatusCode)
	}
	var body struct {
		TaskID string `json:"taskId"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
		return "", resp.StatusCode, fmt.Errorf("decoding the index's answer: %w", err)
	}
	return body.TaskID, resp.StatusCode, nil
}

// imageCompression maps an image artifact's name to the compression of its
// tarball (docker-worker accepted .tar, .tar.zst and .tar.lz4; hopper has
// no lz4 decoder and takes .tar.gz instead).
func imageCompression(path string) (string, bool) {
	switch {
	case strings.HasSuffix(path, ".tar"):
		return "", true
	case strings.HasSuffix(path, ".tar.zst"):
		return "zst", true
	case strings.HasSuffix(path, ".tar.gz"), strings.HasSuffix(path, ".tgz"):
		return "gz", true
	}
	return "", false
}

// ensureArtifactImage downloads an image tarball published as an artifact
// of taskID (with the run's credentials, so the queue enforces access to
// private artifacts), and loads it unless an image from the same bytes is
// already present.
func (t *dockerTask) ensureArtifactImage(taskID, path string) *runErr {
	compression, ok := imageCompression(path)
	if !ok {
		e := malformed("payload.image: artifact %s is not an image tarball this worker can load (want .tar, .tar.gz or .tar.zst)", path)
		return &e
	}
	file, err := t.r.download("artifact:"+taskID+"/"+path, "", func(ctx context.Context) (string, error) {
		red, err := t.r.claim.Queue().GetLatestArtifact(ctx, taskID, path)
		if err != nil {
			if tcclient.IsTransient(err) {
				return "", temporary("locating artifact %s of task %s: %v", path, taskID, err)
			}
			return "", permanent("locating artifact %s of task %s: %v", path, taskID, err)
		}
		return red.URL, nil
	})
	if err != nil {
		return t.imageError(err)
	}
	digest, err := fileSHA256(file)
	if err != nil {
		e := internalError("Hashing image tarball: %v", err)
		return &e
	}
	ctx := t.r.workCtx
	tagged := taskImageRepo + ":" + digest
	if found, err := t.e.client.InspectImage(ctx, tagged); err == nil {
		t.image = found.ID
		t.r.log.Infof("Image tarball sha256 %s was loaded before (%s)", digest, found.ID)
		return nil
	}
	t.r.log.Infof("Loading image tarball (sha256 %s)", digest)
	in, err := os.Open(file)
	if err != nil {
		e := internalError("Opening image tarball: %v", err)
		return &e
	}
	defer in.Close()
	rd, err := decompressor(compression, in)
	if err != nil {
		return t.imageError(err)
	}
	defer rd.Close()
	refs, err := t.e.client.LoadImage(ctx, rd)
	if err != nil {
		var de *dockerapi.Error
		if errors.As(err, &de) {
			e := malformed("payload.image: artifact %s of task %s is not a loadable image: %v", path, taskID, err)
			return &e
		}
		e := internalError("Loading image: %v", err)
		return &e
	}
	if err := t.e.client.TagImage(ctx, refs[0], taskImageRepo, digest); err != nil {
		e := internalError("Tagging loaded image %s: %v", refs[0], err)
		return &e
	}
	found, err := t.e.client.InspectImage(ctx, tagged)
	if err != nil {
		e := internalError("Inspecting loaded image: %v", err)
		return &e
	}
	t.image = found.ID
	t.r.log.Infof("Loaded image %s (%s)", strings.Join(refs, ", "), found.ID)
	return nil
}

// imageError classifies a download or decompression failure like mounts
// do (docs/contract/worker.md §1.6).
func (t *dockerTask) imageError(err error) *runErr {
	var me *mountError
	switch {
	case errors.As(err, &me) && me.temporary:
		e := runErr{reason: tcclient.ReasonResourceUnavailable, msg: fmt.Sprintf("payload.image: %v", err)}
		return &e
	case errors.As(err, &me):
		e := malformed("payload.image: %v", err)
		return &e
	case t.r.aborting() || errors.Is(err, context.Canceled):
		e := runErr{reason: tcclient.ReasonWorkerShutdown, aborted: true, msg: fmt.Sprintf("payload.image: %v", err)}
		return &e
	}
	e := internalError("payload.image: %v", err)
	return &e
}
