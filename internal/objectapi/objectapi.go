// Package objectapi serves the Object API v1 (/api/object/v1/…) over the
// object service (package object), and the service as the queue's object
// artifacts use it (QueueArtifacts).
package objectapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/object"
	"github.com/hopper-ci/hopper/internal/queue"
)

// BasePath is where the Object API lives below the root URL.
const BasePath = "/api/object/v1"

// Scope templates of the Object API.
const (
	scopeUpload   = `"object:upload:<projectId>:<name>"`
	scopeDownload = `"object:download:<name>"`
)

// Deps are what the Object API needs.
type Deps struct {
	Service *object.Service
	// Version is reported by __version__.
	Version string
}

// Routes declares the Object API v1, served through package api.
func Routes(d Deps) []api.Route {
	h := &handlers{svc: d.Service, started: time.Now()}
	p := func(path string) []string { return []string{BasePath + path} }
	return append(api.ServiceHealthRoutes(BasePath, h.started, d.Version), []api.Route{
		// The projectId scoping an upload comes in the body, so these
		// authorize in the handler, after validation.
		{Name: "createUpload", Method: http.MethodPut, Paths: p("/upload/{name...}"), Input: "object-create-upload-request",
			Scopes: scopeUpload, Handle: h.createUpload},
		{Name: "finishUpload", Method: http.MethodPost, Paths: p("/finish-upload/{name...}"), Input: "object-finish-upload-request",
			Scopes: scopeUpload, Handle: h.finishUpload},
		{Name: "startDownload", Method: http.MethodPut, Paths: p("/start-download/{name...}"), Input: "object-download-request",
			Scopes: scopeDownload, EarlyScopes: true, Handle: h.startDownload},
		{Name: "object", Method: http.MethodGet, Paths: p("/metadata/{name...}"),
			Scopes: scopeDownload, EarlyScopes: true, Handle: h.metadata},
		{Name: "download", Method: http.MethodGet, Paths: p("/download/{name...}"),
			Scopes: scopeDownload, EarlyScopes: true, Handle: h.download},
	}...)
}

type handlers struct {
	svc     *object.Service
	started time.Time
}

type uploadBody struct {
	ProjectID             string                 `json:"projectId"`
	UploadID              string                 `json:"uploadId"`
	Expires               queue.Time             `json:"expires"`
	Hashes                map[string]string      `json:"hashes"`
	ProposedUploadMethods object.ProposedMethods `json:"proposedUploadMethods"`
}

func (b *uploadBody) request() object.UploadRequest {
	return object.UploadRequest{ProjectID: b.ProjectID, UploadID: b.UploadID, Expires: b.Expires.Time, Hashes: b.Hashes}
}

func (h *handlers) decodeUpload(c *api.Call) (*uploadBody, error) {
	var in uploadBody
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"projectId": in.ProjectID, "name": c.Params["name"]}); err != nil {
		return nil, err
	}
	return &in, nil
}

func (h *handlers) createUpload(c *api.Call) (any, error) {
	in, err := h.decodeUpload(c)
	if err != nil {
		return nil, err
	}
	method, err := h.svc.CreateUpload(c.Context(), c.Params["name"], in.request(), in.ProposedUploadMethods)
	if err != nil {
		return nil, apiError(err)
	}
	return struct {
		ProjectID    string              `json:"projectId"`
		UploadID     string              `json:"uploadId"`
		Expires      queue.Time          `json:"expires"`
		UploadMethod object.UploadMethod `json:"uploadMethod"`
	}{in.ProjectID, in.UploadID, in.Expires, method}, nil
}

func (h *handlers) finishUpload(c *api.Call) (any, error) {
	in, err := h.decodeUpload(c)
	if err != nil {
		return nil, err
	}
	if err := h.svc.FinishUpload(c.Context(), c.Params["name"], in.request()); err != nil {
		return nil, apiError(err)
	}
	return map[string]any{}, nil
}

func (h *handlers) startDownload(c *api.Call) (any, error) {
	var in struct {
		AcceptDownloadMethods map[string]bool `json:"acceptDownloadMethods"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	out, err := h.svc.StartDownload(c.Context(), c.Params["name"], in.AcceptDownloadMethods)
	if err != nil {
		return nil, apiError(err)
	}
	return out, nil
}

func (h *handlers) metadata(c *api.Call) (any, error) {
	out, err := h.svc.Metadata(c.Context(), c.Params["name"])
	if err != nil {
		return nil, apiError(err)
	}
	return out, nil
}

// download redirects to the data, for plain HTTP clients (curl, browsers,
// bewit URLs).
func (h *handlers) download(c *api.Call) (any, error) {
	u, err := h.svc.SimpleURL(c.Context(), c.Params["name"])
	if err != nil {
		return nil, apiError(err)
	}
	return &api.Response{Status: http.StatusSeeOther, Header: http.Header{"Location": []string{u}}}, nil
}

// apiError maps the rules' errors onto the API's, in one place.
func apiError(err error) error {
	var e *object.Error
	if !errors.As(err, &e) {
		return err
	}
	code := map[object.ErrorKind]string{
		object.KindConflict: api.CodeRequestConflict,
		object.KindNotFound: api.CodeResourceNotFound,
		object.KindInput:    api.CodeInputError,
		object.KindNoMatch:  api.CodeNoMatchingMethod,
	}[e.Kind]
	if code == "" {
		return err
	}
	return &api.Error{Code: code, Message: e.Message}
}
