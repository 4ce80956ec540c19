package tcclienttest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

func (s *Server) createArtifact(r *http.Request, c *caller, taskID string, runID int, name string, body []byte) (any, *apiError) {
	if e := requireScope(c, fmt.Sprintf("queue:create-artifact:%s/%d", taskID, runID)); e != nil {
		return nil, e
	}
	var in tcclient.CreateArtifactRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fail(400, "MalformedPayload", "%v", err)
	}
	if in.Expires.IsZero() || in.Expires.Before(time.Now().Add(-15*time.Minute)) {
		return nil, fail(400, "InputError", "expires missing or in the past")
	}
	switch in.StorageType {
	case tcclient.StorageS3:
		if in.ContentType == "" {
			return nil, fail(400, "InputValidationError", "contentType required")
		}
	case tcclient.StorageReference:
		if in.URL == "" || in.ContentType == "" {
			return nil, fail(400, "InputValidationError", "url and contentType required")
		}
	case tcclient.StorageLink:
		if in.Artifact == "" {
			return nil, fail(400, "InputValidationError", "artifact required")
		}
	case tcclient.StorageError:
		if in.Reason == "" || in.Message == "" {
			return nil, fail(400, "InputValidationError", "reason and message required")
		}
	default:
		return nil, fail(400, "InputValidationError", "unsupported storageType %q", in.StorageType)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[taskID]
	if !ok || runID < 0 || runID >= len(t.status.Runs) || t.status.Runs[runID].WorkerGroup == "" {
		return nil, fail(400, "InputError", "task %s run %d unknown or never claimed", taskID, runID)
	}
	if in.Expires.After(t.def.Expires.Time) {
		return nil, fail(400, "InputError", "artifact expires after the task")
	}
	run := t.status.Runs[runID]
	if run.State != tcclient.StateRunning &&
		!(run.State == tcclient.StateException && time.Since(t.resolvedAt[runID]) < 25*time.Minute) {
		return nil, fail(409, "RequestConflict", "run %d of %s is %s; no artifacts accepted", runID, taskID, run.State)
	}
	if t.artifacts[runID] == nil {
		t.artifacts[runID] = map[string]*Artifact{}
	}
	if prev, ok := t.artifacts[runID][name]; ok {
		compatible := !in.Expires.Before(prev.Expires.Time) &&
			(in.StorageType == tcclient.StorageLink || in.StorageType == tcclient.StorageError || in.ContentType == prev.ContentType) &&
			(in.StorageType == prev.StorageType || prev.StorageType == tcclient.StorageReference &&
				(in.StorageType == tcclient.StorageLink || in.StorageType == tcclient.StorageError))
		if !compatible {
			return nil, fail(409, "RequestConflict", "artifact %s exists with different properties", name)
		}
	}
	a := &Artifact{CreateArtifactRequest: in, Name: name, CreatedBy: c.clientID}
	if a.ContentType == "" {
		a.ContentType = "application/binary"
	}
	t.artifacts[runID][name] = a
	switch in.StorageType {
	case tcclient.StorageS3:
		key := randomToken()
		s.blobs[key] = a
		return tcclient.CreateArtifactResponse{
			StorageType: "s3", PutURL: s.URL + "/blobs/" + key + "?signature=secret",
			Expires: tcclient.NewTime(time.Now().Add(45 * time.Minute)), ContentType: in.ContentType,
		}, nil
	default:
		return map[string]string{"storageType": in.StorageType}, nil
	}
}

func (s *Server) serveBlob(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, "/blobs/")
	s.mu.Lock()
	a, ok := s.blobs[key]
	s.mu.Unlock()
	if !ok {
		http.Error(w, "no such blob", http.StatusNotFound)
		return
	}
	switch r.Method {
	case http.MethodPut:
		if e := s.takeFault("putBlob"); e != nil {
			http.Error(w, e.msg, e.status)
			return
		}
		data, err := io.ReadAll(r.Body)
		if err != nil || int64(len(data)) != r.ContentLength {
			http.Error(w, "short body", http.StatusBadRequest)
			return
		}
		if r.Header.Get("Content-Type") != a.ContentType {
			http.Error(w, "content-type mismatch", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		a.Content, a.Uploaded = data, true
		a.ContentEncoding = r.Header.Get("Content-Encoding")
		a.UploadContentType = r.Header.Get("Content-Type")
		s.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	case http.MethodGet:
		s.mu.Lock()
		data, enc, ct := a.Content, a.ContentEncoding, a.ContentType
		s.mu.Unlock()
		if enc != "" {
			w.Header().Set("Content-Encoding", enc)
		}
		w.Header().Set("Content-Type", ct)
		_, _ = w.Write(data)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (s *Server) getArtifact(c *caller, taskID string, runID int, name string) (int, any, map[string]string, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[taskID]
	if !ok {
		return 0, nil, nil, fail(404, "ResourceNotFound", "task %s not found", taskID)
	}
	if runID < 0 {
		runID = len(t.status.Runs) - 1
	}
	seen := map[string]bool{}
	for {
		if !strings.HasPrefix(name, "public/") {
			if e := requireScope(c, "queue:get-artifact:"+name); e != nil {
				return 0, nil, nil, e
			}
		}
		if seen[name] {
			return 0, nil, nil, fail(400, "InputError", "link cycle")
		}
		seen[name] = true
		a, ok := t.artifacts[runID][name]
		if !ok {
			return 0, nil, nil, fail(404, "ResourceNotFound", "artifact %s not found", name)
		}
		hdr := map[string]string{"x-taskcluster-artifact-storage-type": a.StorageType}
		switch a.StorageType {
		case tcclient.StorageLink:
			name = a.Artifact
			continue
		case tcclient.StorageError:
			return 424, map[string]string{"reason": a.Reason, "message": a.Message}, hdr, nil
		case tcclient.StorageReference:
			hdr["Location"] = a.URL
			return 303, map[string]string{"storageType": a.StorageType, "url": a.URL}, hdr, nil
		default:
			var key string
			for k, b := range s.blobs {
				if b == a {
					key = k
				}
			}
			u := s.URL + "/blobs/" + key
			hdr["Location"] = u
			return 303, map[string]string{"storageType": a.StorageType, "url": u}, hdr, nil
		}
	}
}

func (s *Server) listArtifacts(c *caller, taskID string, runID int) (any, *apiError) {
	if e := requireScope(c, fmt.Sprintf("queue:list-artifacts:%s:%d", taskID, runID)); e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, e := s.lookupRunLocked(taskID, runID); e != nil {
		return nil, e
	}
	var names []string
	for n := range s.tasks[taskID].artifacts[runID] {
		names = append(names, n)
	}
	sort.Strings(names)
	out := tcclient.ListArtifactsResponse{Artifacts: []tcclient.Artifact{}}
	for _, n := range names {
		a := s.tasks[taskID].artifacts[runID][n]
		out.Artifacts = append(out.Artifacts, tcclient.Artifact{
			StorageType: a.StorageType, Name: n, Expires: a.Expires, ContentType: a.ContentType,
		})
	}
	return out, nil
}
