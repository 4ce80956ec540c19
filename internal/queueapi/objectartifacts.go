package queueapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// Object artifacts keep their data in the object service (package object),
// as Taskcluster's do: createArtifact records the artifact and locks an
// upload of the object t/<taskId>/<runId>/<name> with a fresh uploadId,
// answering credentials that may upload exactly that object; the uploader
// talks to the object service, then calls finishArtifact, which marks the
// artifact present once the object is finished. Readers get the object's
// name and download credentials (artifact, latestArtifact) or a redirect to
// its data (getArtifact).

// ObjectService is the object service as object artifacts use it. Its
// errors are API errors (*api.Error) where the caller is at fault.
type ObjectService interface {
	// LockUpload begins an upload of name with no method agreed, fixing
	// its projectId, uploadId and expires; a repeat with the same values
	// succeeds.
	LockUpload(ctx context.Context, name, projectID, uploadID string, expires time.Time) error
	// Finished reports whether name is finished and downloadable.
	Finished(ctx context.Context, name string) (bool, error)
	// ArtifactURL returns a URL serving the object's data.
	ArtifactURL(ctx context.Context, name string) (string, error)
}

// ScopedIssuer mints named temporary credentials with the given scopes
// (implemented by the queue's credential issuer).
type ScopedIssuer interface {
	ScopedCredentials(clientID string, scopes []string, start, expiry time.Time) (Credentials, error)
}

// Lifetimes of the credentials object artifacts hand out.
const (
	objectUploadCredentialsMax   = 24 * time.Hour
	objectDownloadCredentialsTTL = time.Hour
)

// ObjectArtifactName is the object holding an artifact's data.
func ObjectArtifactName(taskID string, runID int, name string) string {
	return "t/" + taskID + "/" + strconv.Itoa(runID) + "/" + name
}

func (s *Server) scopedCredentials(clientID string, scopes []string, start, expiry time.Time) (Credentials, error) {
	si, ok := s.creds.(ScopedIssuer)
	if !ok {
		return Credentials{}, errors.New("the credential issuer cannot mint scoped credentials")
	}
	c, err := si.ScopedCredentials(clientID, scopes, start, expiry)
	if err != nil {
		return Credentials{}, fmt.Errorf("issuing credentials %s: %w", clientID, err)
	}
	return c, nil
}

// objectArtifactCreated locks the object's upload and answers how to
// upload it.
func (s *Server) objectArtifactCreated(c *api.Call, t *queue.TaskState, runID int, a *store.Artifact) (any, error) {
	d, err := decodeDetails(a)
	if err != nil {
		return nil, err
	}
	name := ObjectArtifactName(a.TaskID, runID, a.Name)
	projectID := t.Task.ProjectID
	if err := s.objects.LockUpload(c.Context(), name, projectID, d.UploadID, a.Expires); err != nil {
		return nil, fmt.Errorf("locking the upload of object %s: %w", name, err)
	}
	run := t.Runs[runID]
	expiry := c.Now.Add(objectUploadCredentialsMax)
	if a.Expires.Before(expiry) {
		expiry = a.Expires
	}
	creds, err := s.scopedCredentials("artifact-upload/"+a.TaskID+"/"+strconv.Itoa(runID)+"/on/"+run.WorkerGroup+"/"+run.WorkerID,
		[]string{"object:upload:" + projectID + ":" + name}, c.Now, expiry)
	if err != nil {
		return nil, err
	}
	return struct {
		StorageType string      `json:"storageType"`
		Name        string      `json:"name"`
		ProjectID   string      `json:"projectId"`
		UploadID    string      `json:"uploadId"`
		Expires     queue.Time  `json:"expires"`
		Credentials Credentials `json:"credentials"`
	}{storageObject, name, projectID, d.UploadID, queue.NewTime(a.Expires), creds}, nil
}

func (s *Server) finishArtifact(c *api.Call) (any, error) {
	taskID, name := c.Params["taskId"], c.Params["name"]
	var in struct {
		UploadID string `json:"uploadId"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	runID, ok := runIDParam(c)
	notFound := api.NotFoundf("Artifact with taskId `%s`, runId %s, name `%s` not found", taskID, c.Params["runId"], name)
	if !ok {
		return nil, notFound
	}
	a, err := s.store.GetArtifact(c.Context(), taskID, runID, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	if a.StorageType != storageObject {
		return nil, queue.InputErrorf("Only object artifacts can be finished")
	}
	if a.Present {
		return &api.Response{Status: http.StatusNoContent}, nil
	}
	d, err := decodeDetails(a)
	if err != nil {
		return nil, err
	}
	if d.UploadID != in.UploadID {
		return nil, queue.InputErrorf("given uploadId does not match that for the artifact")
	}
	finished := false
	if s.objects != nil {
		if finished, err = s.objects.Finished(c.Context(), ObjectArtifactName(taskID, runID, name)); err != nil {
			return nil, err
		}
	}
	if !finished {
		return nil, queue.InputErrorf("Object storing artifact data does not exist (finish its upload with the object service first)")
	}
	if err := s.store.MarkArtifactPresent(c.Context(), taskID, runID, name); err != nil {
		return nil, fmt.Errorf("marking artifact %s of %s/%d present: %w", name, taskID, runID, err)
	}
	a.Present = true
	if ap, ok := s.pub.(ArtifactPublisher); ok {
		if t, err := s.store.GetTask(c.Context(), taskID); err == nil {
			ap.PublishArtifactCreated(t, runID, a)
		} else {
			s.log.Warn("announcing a finished object artifact", "taskId", taskID, "error", err)
		}
	}
	return &api.Response{Status: http.StatusNoContent}, nil
}

// objectDownloadCredentials answers artifact/latestArtifact for an object
// artifact: the object's name and credentials that may download it.
func (s *Server) objectDownloadCredentials(c *api.Call, a *store.Artifact) (any, error) {
	name := ObjectArtifactName(a.TaskID, a.RunID, a.Name)
	creds, err := s.scopedCredentials("artifact-download/"+a.TaskID+"/"+strconv.Itoa(a.RunID)+"/"+a.Name,
		[]string{"object:download:" + name}, c.Now, c.Now.Add(objectDownloadCredentialsTTL))
	if err != nil {
		return nil, err
	}
	return struct {
		StorageType string      `json:"storageType"`
		Name        string      `json:"name"`
		Credentials Credentials `json:"credentials"`
	}{storageObject, name, creds}, nil
}

// objectDownloadURL is where getArtifact redirects for an object artifact.
func (s *Server) objectDownloadURL(c *api.Call, a *store.Artifact) (string, error) {
	if s.objects == nil {
		return "", api.NotFoundf("Object does not exist.")
	}
	return s.objects.ArtifactURL(c.Context(), ObjectArtifactName(a.TaskID, a.RunID, a.Name))
}
