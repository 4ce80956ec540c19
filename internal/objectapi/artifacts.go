package objectapi

import (
	"context"
	"errors"
	"time"

	"github.com/hopper-ci/hopper/internal/object"
	"github.com/hopper-ci/hopper/internal/store"
)

// QueueArtifacts is the object service as the queue's object artifacts
// reach it (queueapi.ObjectService); refusals come back as API errors.
type QueueArtifacts struct{ Service *object.Service }

// LockUpload begins an upload with no method agreed, fixing its projectId,
// uploadId and expires, as the queue's createArtifact does before it
// hands the upload to the worker.
func (a QueueArtifacts) LockUpload(ctx context.Context, name, projectID, uploadID string, expires time.Time) error {
	_, err := a.Service.CreateUpload(ctx, name, object.UploadRequest{ProjectID: projectID, UploadID: uploadID, Expires: expires}, object.ProposedMethods{})
	return apiError(err)
}

// Finished reports whether the object is finished and downloadable.
func (a QueueArtifacts) Finished(ctx context.Context, name string) (bool, error) {
	o, err := a.Service.Store.GetObject(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return object.Downloadable(o, a.Service.Now()), nil
}

// ArtifactURL is SimpleURL with the refusals as API errors.
func (a QueueArtifacts) ArtifactURL(ctx context.Context, name string) (string, error) {
	u, err := a.Service.SimpleURL(ctx, name)
	return u, apiError(err)
}
