package object

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/hopper-ci/hopper/internal/artifacts"
	"github.com/hopper-ci/hopper/internal/clock"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// Blobs is the blob storage objects live in: hopper's artifact backends
// (Local and S3) both provide it.
type Blobs interface {
	artifacts.Backend
	// Put stores size bytes from r under key (data sent inline).
	Put(ctx context.Context, key, contentType, contentEncoding string, size int64, r io.Reader) (artifacts.BlobInfo, error)
}

// Service applies the rules to the store and the blobs.
type Service struct {
	Store store.ObjectStore
	Blobs Blobs
	Clock clock.Clock
	Log   *slog.Logger
}

// Now is the service's clock.
func (s *Service) Now() time.Time {
	if s.Clock == nil {
		return time.Now()
	}
	return s.Clock.Now()
}

// DataInline is the dataInline upload method's request.
type DataInline struct {
	ContentType string `json:"contentType"`
	ObjectData  string `json:"objectData"`
}

// PutURLRequest is the putUrl upload method's request.
type PutURLRequest struct {
	ContentType   string `json:"contentType"`
	ContentLength int64  `json:"contentLength"`
}

// ProposedMethods are the upload methods a createUpload caller offers.
type ProposedMethods struct {
	DataInline *DataInline    `json:"dataInline,omitempty"`
	PutURL     *PutURLRequest `json:"putUrl,omitempty"`
}

// PutURLReply tells the uploader where and how to PUT the data.
type PutURLReply struct {
	URL     string            `json:"url"`
	Expires queue.Time        `json:"expires"`
	Headers map[string]string `json:"headers"`
}

// UploadMethod is the agreed method: at most one field set.
type UploadMethod struct {
	DataInline bool         `json:"dataInline,omitempty"`
	PutURL     *PutURLReply `json:"putUrl,omitempty"`
}

// CreateUpload begins (or renews) an upload and agrees to one of the
// proposed methods: dataInline (the data is stored now) before putUrl.
// Proposing none only records the upload (its uploadId, projectId,
// expires and hashes).
func (s *Service) CreateUpload(ctx context.Context, name string, req UploadRequest, proposed ProposedMethods) (UploadMethod, error) {
	now := s.Now()
	// The content type travels in an HTTP header of the blob store and
	// of every download, so one that cannot is the caller's mistake (400),
	// found before anything is stored.
	if p := proposed.DataInline; p != nil {
		if err := CheckContentType(p.ContentType); err != nil {
			return UploadMethod{}, err
		}
	} else if p := proposed.PutURL; p != nil {
		if err := CheckContentType(p.ContentType); err != nil {
			return UploadMethod{}, err
		}
	}
	var inline []byte
	if p := proposed.DataInline; p != nil {
		data, err := base64.StdEncoding.DecodeString(p.ObjectData)
		if err != nil {
			return UploadMethod{}, errorf(KindInput, "Invalid base64 objectData: %v", err)
		}
		if len(data) > MaxDataInline {
			return UploadMethod{}, errorf(KindInput, "Inline object data is %d bytes; at most %d are accepted", len(data), MaxDataInline)
		}
		inline = data
	}
	if _, err := s.Store.PutObject(ctx, name, func(existing *store.Object) (*store.Object, error) {
		return BeginUpload(existing, name, req, now)
	}); err != nil {
		return UploadMethod{}, err
	}
	switch {
	case proposed.DataInline != nil:
		if _, err := s.Blobs.Put(ctx, blobKey(name), proposed.DataInline.ContentType, "", int64(len(inline)), bytes.NewReader(inline)); err != nil {
			return UploadMethod{}, fmt.Errorf("storing the inline data of object %s: %w", name, err)
		}
		return UploadMethod{DataInline: true}, nil
	case proposed.PutURL != nil:
		p := proposed.PutURL
		exp := now.Add(PutURLLifetime + urlClockSlack)
		var u string
		var err error
		if lb, ok := s.Blobs.(artifacts.LengthPutURLer); ok {
			u, err = lb.PutURLWithLength(ctx, blobKey(name), p.ContentType, p.ContentLength, exp)
		} else {
			u, err = s.Blobs.PutURL(ctx, blobKey(name), p.ContentType, exp)
		}
		if err != nil {
			return UploadMethod{}, fmt.Errorf("signing the upload URL of object %s: %w", name, err)
		}
		return UploadMethod{PutURL: &PutURLReply{URL: u, Expires: queue.NewTime(now.Add(PutURLLifetime)),
			Headers: map[string]string{"Content-Type": p.ContentType, "Content-Length": fmt.Sprint(p.ContentLength)}}}, nil
	}
	return UploadMethod{}, nil
}

// FinishUpload completes an upload: from then on the object is immutable
// and downloadable. The data must have arrived (hashes are checked by
// downloaders, as the Object API defines). A repeat is harmless.
func (s *Service) FinishUpload(ctx context.Context, name string, req UploadRequest) error {
	now := s.Now()
	o, err := s.Store.GetObject(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(KindNotFound, "Object %q not found", name)
	}
	if err != nil {
		return err
	}
	if o.UploadID != "" && o.UploadID == req.UploadID && o.ProjectID == req.ProjectID {
		if _, err := s.Blobs.Stat(ctx, blobKey(name)); errors.Is(err, artifacts.ErrNotFound) {
			return errorf(KindInput, "The data of object %q was never uploaded; upload it before finishing", name)
		} else if err != nil {
			return fmt.Errorf("checking the data of object %s: %w", name, err)
		}
	}
	_, err = s.Store.PutObject(ctx, name, func(existing *store.Object) (*store.Object, error) {
		next, err := FinishUpload(existing, name, req, now)
		if err != nil {
			return nil, err
		}
		if next == nil {
			return nil, errRepeat
		}
		return next, nil
	})
	if errors.Is(err, errRepeat) {
		return nil
	}
	return err
}

// errRepeat leaves a finished object as it is.
var errRepeat = errors.New("finishUpload repeated")

// Metadata describes a downloadable object.
type Metadata struct {
	ProjectID string            `json:"projectId"`
	Expires   queue.Time        `json:"expires"`
	Hashes    map[string]string `json:"hashes"`
}

// Object returns a downloadable object's record.
func (s *Service) Object(ctx context.Context, name string) (*store.Object, error) {
	o, err := s.Store.GetObject(ctx, name)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !Downloadable(o, s.Now())) {
		return nil, errorf(KindNotFound, "Object %q not found", name)
	}
	return o, err
}

// Metadata answers the object method.
func (s *Service) Metadata(ctx context.Context, name string) (*Metadata, error) {
	o, err := s.Object(ctx, name)
	if err != nil {
		return nil, err
	}
	return &Metadata{ProjectID: o.ProjectID, Expires: queue.NewTime(o.Expires), Hashes: o.Hashes}, nil
}

// GetURLReply is the getUrl download method's answer.
type GetURLReply struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Expires queue.Time        `json:"expires"`
	Hashes  map[string]string `json:"hashes"`
}

// SimpleReply is the simple download method's answer.
type SimpleReply struct {
	Method string `json:"method"`
	URL    string `json:"url"`
}

// StartDownload agrees to a download method and answers its details.
func (s *Service) StartDownload(ctx context.Context, name string, accepted map[string]bool) (any, error) {
	o, err := s.Object(ctx, name)
	if err != nil {
		return nil, err
	}
	method, err := ChooseDownloadMethod(accepted)
	if err != nil {
		return nil, err
	}
	now := s.Now()
	if method == MethodSimple {
		u, err := s.simpleURL(ctx, name, now)
		if err != nil {
			return nil, err
		}
		return SimpleReply{Method: MethodSimple, URL: u}, nil
	}
	u, err := s.Blobs.GetURL(ctx, blobKey(name), now.Add(GetURLLifetime+urlClockSlack))
	if err != nil {
		return nil, fmt.Errorf("signing the download URL of object %s: %w", name, err)
	}
	return GetURLReply{Method: MethodGetURL, URL: u, Expires: queue.NewTime(now.Add(GetURLLifetime)), Hashes: o.Hashes}, nil
}

// SimpleURL returns a URL serving a downloadable object's data (the
// download method, and getArtifact's redirect for object artifacts).
func (s *Service) SimpleURL(ctx context.Context, name string) (string, error) {
	if _, err := s.Object(ctx, name); err != nil {
		return "", err
	}
	return s.simpleURL(ctx, name, s.Now())
}

func (s *Service) simpleURL(ctx context.Context, name string, now time.Time) (string, error) {
	u, err := s.Blobs.GetURL(ctx, blobKey(name), now.Add(SimpleURLLifetime))
	if err != nil {
		return "", fmt.Errorf("signing the download URL of object %s: %w", name, err)
	}
	return u, nil
}

// ExpirePass is Expire as the service's duty's pass (internal/server
// schedules it with maintenance.Every): it logs how many objects went.
// The store hands every expired row to one caller (rows are locked,
// skipping those another holds), so every replica may run it.
func (s *Service) ExpirePass(ctx context.Context) error {
	n, err := s.Expire(ctx)
	if n > 0 && s.Log != nil {
		s.Log.Info("expired objects", "objects", n)
	}
	return err
}

// Expire deletes expired objects and unfinished uploads past their upload
// expiry, rows first and then their data (data whose deletion fails is
// logged and left behind rather than kept reachable). It returns how many
// objects went.
func (s *Service) Expire(ctx context.Context) (int, error) {
	n := 0
	for {
		gone, err := s.Store.ExpireObjects(ctx, s.Now(), 100)
		if err != nil {
			return n, fmt.Errorf("expiring objects: %w", err)
		}
		for _, o := range gone {
			if err := s.Blobs.Delete(ctx, blobKey(o.Name)); err != nil && s.Log != nil {
				s.Log.Warn("deleting the data of an expired object", "name", o.Name, "error", err)
			}
		}
		n += len(gone)
		if len(gone) < 100 {
			return n, nil
		}
	}
}
