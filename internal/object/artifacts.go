package object

import (
	"context"
	"errors"
	"time"

	"github.com/hopper-ci/hopper/internal/store"
)

// The queue's object artifacts reach the object service through these
// methods (api.ObjectService); refusals come back as API errors.

// LockUpload begins an upload with no method agreed, fixing its projectId,
// uploadId and expires, as the queue's createArtifact does before it
// hands the upload to the worker.
func (s *Service) LockUpload(ctx context.Context, name, projectID, uploadID string, expires time.Time) error {
	_, err := s.CreateUpload(ctx, name, UploadRequest{ProjectID: projectID, UploadID: uploadID, Expires: expires}, ProposedMethods{})
	return apiError(err)
}

// Finished reports whether the object is finished and downloadable.
func (s *Service) Finished(ctx context.Context, name string) (bool, error) {
	o, err := s.Store.GetObject(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return Downloadable(o, s.now()), nil
}

// ArtifactURL is SimpleURL with the refusals as API errors.
func (s *Service) ArtifactURL(ctx context.Context, name string) (string, error) {
	u, err := s.SimpleURL(ctx, name)
	return u, apiError(err)
}
