package githubapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/githubapi"
)

// slugIDs matches the task ids a render invents, which differ on every
// run (and the ID<n> names testdata gives them): renders are compared
// with ids renamed in order of appearance in one serialisation.
var slugIDs = regexp.MustCompile(`"(ID[0-9]+|[A-Za-z0-9_-]{21}[AQgw])"`)

func renameIDs(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	ids := map[string]string{}
	b = slugIDs.ReplaceAllFunc(b, func(id []byte) []byte {
		if _, ok := ids[string(id)]; !ok {
			ids[string(id)] = fmt.Sprintf(`"id-%d"`, len(ids)+1)
		}
		return []byte(ids[string(id)])
	})
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// TestPreviewMatchesTaskcluster: renderTaskclusterYml answers as
// Taskcluster's github service (snapshot 9d59eb5) does for its own fake
// events. testdata/preview.json holds each request and the answer
// Taskcluster's renderTaskclusterYml code gave for it (tasks without
// `created`, task ids renamed in order of appearance; an error's
// message).
func TestPreviewMatchesTaskcluster(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/preview.json")
	require.NoError(t, err)
	var cases []struct {
		Name    string          `json:"name"`
		Request json.RawMessage `json:"request"`
		Want    struct {
			Tasks  []map[string]any `json:"tasks"`
			Scopes []string         `json:"scopes"`
			Error  string           `json:"error"`
		} `json:"want"`
	}
	require.NoError(t, json.Unmarshal(raw, &cases))
	b := setup(t)
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			resp, err := http.Post(b.url+githubapi.BasePath+"/taskcluster-yml", "application/json", bytes.NewReader(tc.Request))
			require.NoError(t, err)
			defer resp.Body.Close()
			text, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			if tc.Want.Error != "" {
				require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", text)
				var e struct{ Code, Message string }
				require.NoError(t, json.Unmarshal(text, &e))
				require.Equal(t, "InputError", e.Code)
				require.Contains(t, e.Message, tc.Want.Error)
				return
			}
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", text)
			var got struct {
				Tasks  []map[string]any `json:"tasks"`
				Scopes []string         `json:"scopes"`
			}
			require.NoError(t, json.Unmarshal(text, &got))
			for _, task := range got.Tasks {
				def := task["task"].(map[string]any)
				require.NotEmpty(t, def["created"])
				delete(def, "created")
			}
			require.Equal(t, tc.Want.Scopes, got.Scopes)
			want := tc.Want.Tasks
			if want == nil {
				want = []map[string]any{}
			}
			require.Equal(t, renameIDs(t, want), renameIDs(t, got.Tasks))
		})
	}
}

// TestPreviewIsBounded: an anonymous renderTaskclusterYml of a small
// template asking for millions of values is refused with 400 and the
// render's limit, instead of building them (issue 34: 42 MB, 1.56 s and
// 190 MiB from a 1 KB template).
func TestPreviewIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	yml := "version: 1\ntasks:\n  $map: {$eval: 'range(0, 3000)'}\n  each(i):\n    $map: {$eval: 'range(0, 3000)'}\n    each(j): 'task ${i}-${j} of the matrix'\n"
	body, err := json.Marshal(map[string]any{"body": yml, "fakeEvent": map[string]any{"type": "github-push"}})
	require.NoError(t, err)
	resp, err := http.Post(b.url+githubapi.BasePath+"/taskcluster-yml", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%.300s", text)
	require.Contains(t, string(text), "values, hopper's limit for one render")
}
