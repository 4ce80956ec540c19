package queueapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/artifacts"
	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// Artifact timing and size rules (docs/contract/queue.md §5.7, §7).
const (
	// artifactPutURLLifetime is the putUrl lifetime reported to the
	// uploader; the URL itself is signed a little longer (putURLClockSlack)
	// so that a client whose clock runs slightly ahead still succeeds.
	artifactPutURLLifetime = 45 * time.Minute
	putURLClockSlack       = 10 * time.Second
	// artifactGetURLLifetime is how long a download URL handed out by
	// getArtifact stays valid.
	artifactGetURLLifetime = 30 * time.Minute
	// artifactExpiresSlack tolerates an `expires` slightly in the past, as
	// Taskcluster does, so clients with skewed clocks are not refused.
	artifactExpiresSlack = 15 * time.Minute
	// maxArtifactNameLen is the longest name the response schemas allow;
	// longer names are refused at creation instead of breaking every later
	// read (and the blob key limit).
	maxArtifactNameLen = 1024
)

// Storage types.
const (
	storageS3        = "s3"
	storageObject    = "object"
	storageReference = "reference"
	storageLink      = "link"
	storageError     = "error"
)

// defaultArtifactContentType is stored when the creator gives none (link
// and error artifacts).
const defaultArtifactContentType = "application/binary"

// artifactStorageTypeHeader tells downloaders how the artifact is stored,
// so they can pick the right download logic.
const artifactStorageTypeHeader = "X-Taskcluster-Artifact-Storage-Type"

// ArtifactPublisher is implemented by publishers that announce artifacts on
// the artifact-created exchange. The Server publishes through it when its
// Publisher implements it.
type ArtifactPublisher interface {
	PublishArtifactCreated(t *queue.TaskState, runID int, a *store.Artifact)
}

// artifactRoutes is the artifact part of the Queue API
// (docs/contract/queue.md §5.1, §5.7).
func (s *Server) artifactRoutes() []api.Route {
	q := func(p string) []string { return []string{queueBase + p} }
	paged := []string{"continuationToken", "limit"}
	createScopes := api.Scope("queue:create-artifact:<taskId>/<runId>")
	// The get-artifact family needs a scope for every name on the link
	// chain, so it is authorized in the handler as links are followed.
	getScopes := api.AllOf(api.ForEach("name", "names", "queue:get-artifact:<name>"))
	runList := api.Scope("queue:list-artifacts:<taskId>:<runId>")
	latestList := api.Scope("queue:list-artifacts:<taskId>")
	return []api.Route{
		{Name: "createArtifact", Method: http.MethodPost, Paths: q("/task/{taskId}/runs/{runId}/artifacts/{name...}"),
			Input: "post-artifact-request", Scopes: createScopes, EarlyScopes: true, Handle: s.createArtifact},
		{Name: "finishArtifact", Method: http.MethodPut, Paths: q("/task/{taskId}/runs/{runId}/artifacts/{name...}"),
			Input: "finish-artifact-request", Scopes: createScopes, EarlyScopes: true, Handle: s.finishArtifact},
		{Name: "getArtifact", Method: http.MethodGet, Paths: q("/task/{taskId}/runs/{runId}/artifacts/{name...}"),
			Scopes: getScopes, Handle: s.getArtifact},
		{Name: "getLatestArtifact", Method: http.MethodGet, Paths: q("/task/{taskId}/artifacts/{name...}"),
			Scopes: getScopes, Handle: s.getLatestArtifact},
		{Name: "artifact", Method: http.MethodGet, Paths: q("/task/{taskId}/runs/{runId}/artifact-content/{name...}"),
			Scopes: getScopes, Handle: s.artifactContent},
		{Name: "latestArtifact", Method: http.MethodGet, Paths: q("/task/{taskId}/artifact-content/{name...}"),
			Scopes: getScopes, Handle: s.latestArtifactContent},
		{Name: "listArtifacts", Method: http.MethodGet, Paths: q("/task/{taskId}/runs/{runId}/artifacts"), Query: paged,
			Scopes: runList, EarlyScopes: true, Handle: s.listArtifacts},
		{Name: "listLatestArtifacts", Method: http.MethodGet, Paths: q("/task/{taskId}/artifacts"), Query: paged,
			Scopes: latestList, EarlyScopes: true, Handle: s.listLatestArtifacts},
		{Name: "artifactInfo", Method: http.MethodGet, Paths: q("/task/{taskId}/runs/{runId}/artifact-info/{name...}"),
			Scopes: runList, EarlyScopes: true, Handle: s.artifactInfo},
		{Name: "latestArtifactInfo", Method: http.MethodGet, Paths: q("/task/{taskId}/artifact-info/{name...}"),
			Scopes: latestList, EarlyScopes: true, Handle: s.latestArtifactInfo},
	}
}

// artifactDetails is the storage-type specific part of an artifact record,
// stored as JSON. ContentLength rides along because the record has no
// column for it; it is not part of the identity compared on re-creation.
type artifactDetails struct {
	URL           string `json:"url,omitempty"`      // reference
	Artifact      string `json:"artifact,omitempty"` // link target
	Reason        string `json:"reason,omitempty"`   // error
	Message       string `json:"message,omitempty"`  // error
	UploadID      string `json:"uploadId,omitempty"` // object
	ContentLength *int64 `json:"contentLength,omitempty"`
}

func decodeDetails(a *store.Artifact) (artifactDetails, error) {
	var d artifactDetails
	if len(a.Details) == 0 {
		return d, nil
	}
	if err := json.Unmarshal(a.Details, &d); err != nil {
		return d, fmt.Errorf("decoding details of artifact %s of %s/%d: %w", a.Name, a.TaskID, a.RunID, err)
	}
	return d, nil
}

// artifactJSON is Taskcluster's artifact-response entry.
type artifactJSON struct {
	StorageType   string     `json:"storageType"`
	Name          string     `json:"name"`
	Expires       queue.Time `json:"expires"`
	ContentType   string     `json:"contentType"`
	ContentLength *int64     `json:"contentLength,omitempty"`
}

func toArtifactJSON(a *store.Artifact) (artifactJSON, error) {
	d, err := decodeDetails(a)
	if err != nil {
		return artifactJSON{}, err
	}
	return artifactJSON{StorageType: a.StorageType, Name: a.Name, Expires: queue.NewTime(a.Expires),
		ContentType: a.ContentType, ContentLength: d.ContentLength}, nil
}

// runIDParam parses the runId URL parameter. The pattern admits numbers too
// large for an int; those name no run, so ok is false rather than the
// value silently becoming 0.
func runIDParam(c *api.Call) (runID int, ok bool) {
	n, err := strconv.Atoi(c.Params["runId"])
	return n, err == nil && n >= 0
}

// indentedJSON renders a value for an error message the way Taskcluster
// interpolates objects into its messages.
func indentedJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

type createArtifactInput struct {
	StorageType   string     `json:"storageType"`
	Expires       queue.Time `json:"expires"`
	ContentType   string     `json:"contentType"`
	ContentLength *int64     `json:"contentLength"`
	URL           string     `json:"url"`
	Artifact      string     `json:"artifact"`
	Reason        string     `json:"reason"`
	Message       string     `json:"message"`
}

// newArtifact builds the record a createArtifact call asks for.
func (in *createArtifactInput) newArtifact(taskID string, runID int, name string) (*store.Artifact, error) {
	var d artifactDetails
	switch in.StorageType {
	case storageS3:
		d.ContentLength = in.ContentLength
	case storageReference:
		d.URL = in.URL
	case storageLink:
		d.Artifact = in.Artifact
	case storageError:
		d.Reason, d.Message = in.Reason, in.Message
	case storageObject:
		d.UploadID = ident.NewSlugID()
		d.ContentLength = in.ContentLength
	default:
		return nil, fmt.Errorf("building artifact %s: unexpected storage type %q", name, in.StorageType)
	}
	details, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encoding details of artifact %s: %w", name, err)
	}
	ct := in.ContentType
	if ct == "" {
		ct = defaultArtifactContentType
	}
	// Every type but object is usable as soon as it is recorded: hopper,
	// like Taskcluster, never learns whether an s3 upload happened.
	return &store.Artifact{TaskID: taskID, RunID: runID, Name: name, StorageType: in.StorageType, ContentType: ct,
		Details: details, Expires: in.Expires.Time, Present: in.StorageType != storageObject}, nil
}

// recreateArtifact applies the re-creation rules (docs/contract/queue.md
// §5.7, createArtifact step 5) to a createArtifact call naming an existing artifact: it returns
// the record to store, or a conflict.
func recreateArtifact(existing, next *store.Artifact) (*store.Artifact, error) {
	oldD, err := decodeDetails(existing)
	if err != nil {
		return nil, err
	}
	newD, err := decodeDetails(next)
	if err != nil {
		return nil, err
	}
	compatible := next.StorageType == storageLink || next.ContentType == existing.ContentType
	if next.Expires.Before(existing.Expires) {
		compatible = false
	}
	switch {
	case existing.StorageType == next.StorageType:
		switch next.StorageType {
		case storageLink:
			compatible = compatible && oldD.Artifact == newD.Artifact
		case storageError:
			compatible = compatible && oldD.Reason == newD.Reason && oldD.Message == newD.Message
		case storageS3, storageReference:
			// s3: the name is the identity; reference: the url may change.
		case storageObject:
			// A repeat (a lost answer) until the upload is finished; it
			// keeps the uploadId.
			compatible = compatible && !existing.Present && next.Expires.Equal(existing.Expires)
		default:
			compatible = false
		}
	case existing.StorageType == storageReference && next.StorageType == storageLink:
		// Taskcluster's one allowed change of type.
	case existing.StorageType == storageReference && next.StorageType == storageError:
		// hopper's addition: a worker that could not upload a run's log
		// turns the live-log reference, whose server is gone, into an
		// error saying why (README compatibility table).
		compatible = !next.Expires.Before(existing.Expires)
	default:
		compatible = false
	}
	if !compatible {
		original, err := toArtifactJSON(existing)
		if err != nil {
			return nil, err
		}
		e := queue.Conflictf("Artifact already exists with different properties, and none of the allowed exceptions apply: %s",
			indentedJSON(original))
		e.Details = map[string]any{"originalArtifact": original}
		return nil, e
	}
	out := *next
	out.ContentType = existing.ContentType
	if next.StorageType == storageObject {
		out.Details = existing.Details
	}
	return &out, nil
}

func (s *Server) createArtifact(c *api.Call) (any, error) {
	taskID, name := c.Params["taskId"], c.Params["name"]
	var in createArtifactInput
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	switch in.StorageType {
	case storageObject:
		if s.objects == nil {
			return nil, queue.InputErrorf("Storage type `object` is not supported by this queue (it has no object service); use one of: s3, reference, link, error")
		}
	case storageS3:
		if s.blobs == nil {
			return nil, queue.InputErrorf("This queue has no blob storage configured, so `s3` artifacts cannot be created; use one of: reference, link, error")
		}
	}
	if len(name) > maxArtifactNameLen {
		return nil, queue.InputErrorf("Artifact name is %d characters long; at most %d are allowed", len(name), maxArtifactNameLen)
	}
	if in.Expires.Before(c.Now.Add(-artifactExpiresSlack)) {
		return nil, queue.InputErrorf("Expires must be in the future")
	}
	runID, ok := runIDParam(c)
	var task *queue.TaskState
	a, err := s.store.CreateArtifact(c.Context(), store.CreateArtifactParams{TaskID: taskID, RunID: runID, Name: name, Now: c.Now,
		Check: func(t *queue.TaskState, existing *store.Artifact) (*store.Artifact, error) {
			if !ok || runID >= len(t.Runs) {
				return nil, queue.InputErrorf("Run not found")
			}
			run := &t.Runs[runID]
			if run.WorkerGroup == "" || run.WorkerID == "" {
				return nil, queue.InputErrorf("Run was not claimed by a worker and so no artifacts can exist")
			}
			if in.Expires.After(t.Task.Expires.Time) {
				return nil, &queue.Error{Kind: queue.KindInput,
					Message: fmt.Sprintf("Artifact expires (%s) after the task expiration %s (task.expires < expires) - this is not allowed, artifacts may not expire after the task they belong to expires",
						in.Expires, t.Task.Expires),
					Details: map[string]any{"expires": in.Expires, "taskExpires": t.Task.Expires}}
			}
			if !queue.ArtifactUploadAllowed(run, c.Now) {
				status := t.Status()
				return nil, &queue.Error{Kind: queue.KindConflict,
					Message: "Artifacts cannot be created for a task after it is resolved, unless it is resolved 'exception', and even in this case only up to 25 min past resolution." +
						"This to ensure that artifacts have been uploaded before a task is 'completed' and output is consumed by a dependent task\n\nTask status: " +
						indentedJSON(status),
					Details: map[string]any{"status": status}}
			}
			next, err := in.newArtifact(taskID, runID, name)
			if err != nil {
				return nil, err
			}
			if existing != nil {
				if next, err = recreateArtifact(existing, next); err != nil {
					return nil, err
				}
			}
			task = t
			return next, nil
		}})
	if errors.Is(err, store.ErrNotFound) {
		return nil, queue.InputErrorf("Task not found")
	}
	if err != nil {
		return nil, err
	}
	switch a.StorageType {
	case storageS3:
		putURL, err := s.blobs.PutURL(c.Context(), artifacts.BlobKey(taskID, runID, name), a.ContentType, c.Now.Add(artifactPutURLLifetime+putURLClockSlack))
		if err != nil {
			return nil, fmt.Errorf("signing the upload URL of artifact %s of %s/%d: %w", name, taskID, runID, err)
		}
		return struct {
			StorageType string     `json:"storageType"`
			PutURL      string     `json:"putUrl"`
			Expires     queue.Time `json:"expires"`
			ContentType string     `json:"contentType"`
		}{storageS3, putURL, queue.NewTime(c.Now.Add(artifactPutURLLifetime)), a.ContentType}, nil
	case storageObject:
		return s.objectArtifactCreated(c, task, runID, a)
	default:
		// s3 artifacts are announced never (the queue cannot know when the
		// upload ends); the others are complete once recorded.
		if ap, ok := s.pub.(ArtifactPublisher); ok {
			ap.PublishArtifactCreated(task, runID, a)
		}
		return map[string]string{"storageType": a.StorageType}, nil
	}
}

// resolveArtifact follows links from name within one run, authorizing the
// get-artifact scope of every name visited (docs/contract/queue.md
// §5.7). firstChecked says the caller already authorized name itself.
func (s *Server) resolveArtifact(c *api.Call, taskID string, runID int, name string, firstChecked bool) (*store.Artifact, artifactDetails, error) {
	names := []string{name}
	for {
		if !firstChecked || len(names) > 1 {
			if err := c.Authorize(c.Route.Scopes, map[string]any{"names": slices.Clone(names)}); err != nil {
				return nil, artifactDetails{}, err
			}
		}
		a, err := s.store.GetArtifact(c.Context(), taskID, runID, names[len(names)-1])
		if errors.Is(err, store.ErrNotFound) || (err == nil && !a.Present) {
			return nil, artifactDetails{}, api.NotFoundf("Artifact not found")
		}
		if err != nil {
			return nil, artifactDetails{}, err
		}
		if a.Expires.Before(c.Now) {
			return nil, artifactDetails{}, api.Errorf(api.CodeResourceExpired, "Artifact expired")
		}
		d, err := decodeDetails(a)
		if err != nil {
			return nil, artifactDetails{}, err
		}
		if a.StorageType != storageLink {
			return a, d, nil
		}
		if slices.Contains(names, d.Artifact) {
			return nil, artifactDetails{}, queue.InputErrorf("Artifact leads to a link cycle")
		}
		names = append(names, d.Artifact)
	}
}

// latestRun loads the task and returns its last runId, answering 404 for an
// unknown task or one without runs.
func (s *Server) latestRun(ctx context.Context, taskID string) (int, error) {
	t, err := s.store.GetTask(ctx, taskID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, api.NotFoundf("Task not found")
	}
	if err != nil {
		return 0, err
	}
	if len(t.Runs) == 0 {
		return 0, api.NotFoundf("Task doesn't have any runs")
	}
	return len(t.Runs) - 1, nil
}

// resolveCall resolves the artifact a get-artifact-family call names: on
// the run in the URL, or (latest) on the task's last run after checking the
// scope of the requested name before anything is loaded.
func (s *Server) resolveCall(c *api.Call, latest bool) (*store.Artifact, artifactDetails, error) {
	taskID, name := c.Params["taskId"], c.Params["name"]
	if !latest {
		runID, ok := runIDParam(c)
		if !ok {
			if err := c.Authorize(c.Route.Scopes, map[string]any{"names": []string{name}}); err != nil {
				return nil, artifactDetails{}, err
			}
			return nil, artifactDetails{}, api.NotFoundf("Artifact not found")
		}
		return s.resolveArtifact(c, taskID, runID, name, false)
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"names": []string{name}}); err != nil {
		return nil, artifactDetails{}, err
	}
	runID, err := s.latestRun(c.Context(), taskID)
	if err != nil {
		return nil, artifactDetails{}, err
	}
	return s.resolveArtifact(c, taskID, runID, name, true)
}

// downloadURL is where a resolved s3 or reference artifact's data lives.
func (s *Server) downloadURL(c *api.Call, a *store.Artifact, d artifactDetails) (string, error) {
	if a.StorageType == storageReference {
		return d.URL, nil
	}
	if s.blobs == nil {
		return "", fmt.Errorf("artifact %s of %s/%d is stored as s3 but no blob storage is configured", a.Name, a.TaskID, a.RunID)
	}
	u, err := s.blobs.GetURL(c.Context(), artifacts.BlobKey(a.TaskID, a.RunID, a.Name), c.Now.Add(artifactGetURLLifetime))
	if err != nil {
		return "", fmt.Errorf("signing the download URL of artifact %s of %s/%d: %w", a.Name, a.TaskID, a.RunID, err)
	}
	return u, nil
}

type artifactURLReply struct {
	StorageType string `json:"storageType"`
	URL         string `json:"url"`
}

type errorArtifactReply struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func (s *Server) getArtifact(c *api.Call) (any, error)       { return s.redirectToArtifact(c, false) }
func (s *Server) getLatestArtifact(c *api.Call) (any, error) { return s.redirectToArtifact(c, true) }

// redirectToArtifact answers getArtifact: a 303 to the data (with a JSON
// body, since the JS client does not follow redirects) or, for error
// artifacts, 424 with the recorded reason.
func (s *Server) redirectToArtifact(c *api.Call, latest bool) (any, error) {
	a, d, err := s.resolveCall(c, latest)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set(artifactStorageTypeHeader, a.StorageType)
	switch a.StorageType {
	case storageS3, storageReference:
		u, err := s.downloadURL(c, a, d)
		if err != nil {
			return nil, err
		}
		h.Set("Location", u)
		return &api.Response{Status: http.StatusSeeOther, Header: h, Body: artifactURLReply{a.StorageType, u}}, nil
	case storageObject:
		u, err := s.objectDownloadURL(c, a)
		if err != nil {
			return nil, err
		}
		h.Set("Location", u)
		return &api.Response{Status: http.StatusSeeOther, Header: h, Body: artifactURLReply{a.StorageType, u}}, nil
	case storageError:
		return &api.Response{Status: http.StatusFailedDependency, Header: h, Body: errorArtifactReply{d.Reason, d.Message}}, nil
	}
	return nil, fmt.Errorf("artifact %s of %s/%d has storage type %q, which cannot be downloaded", a.Name, a.TaskID, a.RunID, a.StorageType)
}

func (s *Server) artifactContent(c *api.Call) (any, error)       { return s.describeArtifact(c, false) }
func (s *Server) latestArtifactContent(c *api.Call) (any, error) { return s.describeArtifact(c, true) }

// describeArtifact answers the artifact-content methods: how to fetch the
// data, always with 200.
func (s *Server) describeArtifact(c *api.Call, latest bool) (any, error) {
	a, d, err := s.resolveCall(c, latest)
	if err != nil {
		return nil, err
	}
	switch a.StorageType {
	case storageS3, storageReference:
		u, err := s.downloadURL(c, a, d)
		if err != nil {
			return nil, err
		}
		return artifactURLReply{a.StorageType, u}, nil
	case storageObject:
		return s.objectDownloadCredentials(c, a)
	case storageError:
		return struct {
			StorageType string `json:"storageType"`
			errorArtifactReply
		}{storageError, errorArtifactReply{d.Reason, d.Message}}, nil
	}
	return nil, fmt.Errorf("artifact %s of %s/%d has storage type %q, which cannot be described", a.Name, a.TaskID, a.RunID, a.StorageType)
}

// runOf checks that runId names an existing run of the task, for the list
// methods (404 otherwise).
func (s *Server) runOf(c *api.Call) (int, error) {
	taskID := c.Params["taskId"]
	last, err := s.latestRun(c.Context(), taskID)
	if err != nil {
		return 0, err
	}
	runID, ok := runIDParam(c)
	if !ok || runID > last {
		return 0, api.NotFoundf("Task with taskId: `%s` has no run with runId: %s", taskID, c.Params["runId"])
	}
	return runID, nil
}

func (s *Server) listArtifacts(c *api.Call) (any, error) {
	runID, err := s.runOf(c)
	if err != nil {
		return nil, err
	}
	return s.artifactPage(c, runID)
}

func (s *Server) listLatestArtifacts(c *api.Call) (any, error) {
	runID, err := s.latestRun(c.Context(), c.Params["taskId"])
	if err != nil {
		return nil, err
	}
	return s.artifactPage(c, runID)
}

// artifactPage lists every stored artifact of the run, expired-but-not-yet-
// deleted ones included, ordered by name.
func (s *Server) artifactPage(c *api.Call, runID int) (any, error) {
	list, next, err := s.store.ListArtifacts(c.Context(), c.Params["taskId"], runID, c.Page())
	if err != nil {
		return nil, err
	}
	out := make([]artifactJSON, 0, len(list))
	for i := range list {
		j, err := toArtifactJSON(&list[i])
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return struct {
		Artifacts         []artifactJSON `json:"artifacts"`
		ContinuationToken string         `json:"continuationToken,omitempty"`
	}{out, next}, nil
}

func (s *Server) artifactInfo(c *api.Call) (any, error) {
	runID, ok := runIDParam(c)
	if !ok {
		return nil, api.NotFoundf("Artifact not found")
	}
	return s.infoOf(c, runID)
}

func (s *Server) latestArtifactInfo(c *api.Call) (any, error) {
	runID, err := s.latestRun(c.Context(), c.Params["taskId"])
	if err != nil {
		return nil, err
	}
	return s.infoOf(c, runID)
}

// infoOf describes one artifact without following links or checking its
// expiry: only the record is revealed, never the data.
func (s *Server) infoOf(c *api.Call, runID int) (any, error) {
	a, err := s.store.GetArtifact(c.Context(), c.Params["taskId"], runID, c.Params["name"])
	if errors.Is(err, store.ErrNotFound) || (err == nil && !a.Present) {
		return nil, api.NotFoundf("Artifact not found")
	}
	if err != nil {
		return nil, err
	}
	return toArtifactJSON(a)
}
