package objectapi_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/artifacts"
	"github.com/hopper-ci/hopper/internal/object"
	"github.com/hopper-ci/hopper/internal/objectapi"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestObjectRoutes: an object uploaded inline is finished, described and
// handed out for download (a simple URL, and a redirect for plain
// clients), each call needing its scope (an upload's names the project
// in its body); a second upload of the name, an unknown object and a
// download no method of which the caller accepts are refused with
// Taskcluster's errors.
func TestObjectRoutes(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t, apitest.Options{Routes: func(s *apitest.Server) []api.Route {
		blobs, err := artifacts.NewLocal(artifacts.LocalOptions{Dir: t.TempDir(), BaseURL: s.URL, SigningKey: s.Key[:]})
		require.NoError(t, err)
		svc := &object.Service{Store: s.Store, Blobs: blobs, Clock: s.Clock, Log: s.Logger}
		return objectapi.Routes(objectapi.Deps{Service: svc, Version: "test"})
	}})
	root := &tcclient.Credentials{ClientID: server.RootClientID, AccessToken: apitest.RootToken}
	data := []byte("hello, objects")
	sum := sha256.Sum256(data)
	upload := func(uploadID string) map[string]any {
		return map[string]any{"projectId": "proj", "uploadId": uploadID, "expires": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339),
			"hashes": map[string]string{"sha256": hex.EncodeToString(sum[:])},
			"proposedUploadMethods": map[string]any{"dataInline": map[string]string{"contentType": "text/plain",
				"objectData": base64.StdEncoding.EncodeToString(data)}}}
	}
	first, second := tcclient.NewTaskID(), tcclient.NewTaskID()
	finish := map[string]any{"projectId": "proj", "uploadId": first, "hashes": map[string]string{"sha256": hex.EncodeToString(sum[:])}}
	const name = "/obj/one"
	cases := []struct {
		name   string
		scopes []string
		method string
		path   string
		body   any
		status int
		code   string
	}{
		{"upload needs the project's scope", []string{"object:upload:other:obj/one"}, http.MethodPut, "/upload" + name, upload(first), http.StatusForbidden, "InsufficientScopes"},
		{"upload", []string{"object:upload:proj:obj/one"}, http.MethodPut, "/upload" + name, upload(first), http.StatusOK, ""},
		{"another upload of the name", nil, http.MethodPut, "/upload" + name, upload(second), http.StatusConflict, "RequestConflict"},
		{"finish", []string{"object:upload:proj:obj/one"}, http.MethodPost, "/finish-upload" + name, finish, http.StatusOK, ""},
		{"metadata needs the download scope", []string{"object:download:obj/other"}, http.MethodGet, "/metadata" + name, nil, http.StatusForbidden, "InsufficientScopes"},
		{"metadata", []string{"object:download:obj/one"}, http.MethodGet, "/metadata" + name, nil, http.StatusOK, ""},
		{"unknown object", nil, http.MethodGet, "/metadata/obj/none", nil, http.StatusNotFound, "ResourceNotFound"},
		{"no method accepted", nil, http.MethodPut, "/start-download" + name, map[string]any{"acceptDownloadMethods": map[string]any{}}, http.StatusNotAcceptable, "NoMatchingMethod"},
		{"simple download", []string{"object:download:obj/one"}, http.MethodPut, "/start-download" + name, map[string]any{"acceptDownloadMethods": map[string]any{"simple": true}}, http.StatusOK, ""},
	}
	for _, c := range cases {
		status, body := s.Call(t, root, c.scopes, c.method, objectapi.BasePath+c.path, c.body)
		require.Equal(t, c.status, status, "%s: %s", c.name, body)
		var reply map[string]any
		require.NoError(t, json.Unmarshal(body, &reply), c.name)
		if c.code != "" {
			require.Equal(t, c.code, reply["code"], c.name)
		}
		switch c.name {
		case "upload":
			require.Equal(t, map[string]any{"dataInline": true}, reply["uploadMethod"])
		case "metadata":
			require.Equal(t, "proj", reply["projectId"])
			require.Equal(t, map[string]any{"sha256": hex.EncodeToString(sum[:])}, reply["hashes"])
		case "simple download":
			require.Equal(t, "simple", reply["method"])
			require.NotEmpty(t, reply["url"])
		}
	}
	// Plain clients are redirected to the data.
	req, err := http.NewRequest(http.MethodGet, s.URL+objectapi.BasePath+"/download"+name, nil)
	require.NoError(t, err)
	header, err := tcclient.AuthorizationHeader(root, nil, http.MethodGet, req.URL.String())
	require.NoError(t, err)
	req.Header.Set("Authorization", header)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.NotEmpty(t, resp.Header.Get("Location"))
}
