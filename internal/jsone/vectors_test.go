package jsone

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// vectorFile is testdata/vectors.json, written by testdata/gen/gen.mjs from
// the reference implementation.
type vectorFile struct {
	JSONE string   `json:"jsone"`
	Now   string   `json:"now"`
	Cases []vector `json:"cases"`
}

type vector struct {
	Section  string          `json:"section"`
	Title    string          `json:"title"`
	Context  map[string]any  `json:"context"`
	Template any             `json:"template"`
	Result   json.RawMessage `json:"result"`
	Error    *string         `json:"error"`
}

func loadVectors(t testing.TB) vectorFile {
	t.Helper()
	raw, err := os.ReadFile("testdata/vectors.json")
	require.NoError(t, err)
	var f vectorFile
	require.NoError(t, json.Unmarshal(raw, &f))
	require.NotEmpty(t, f.Cases)
	return f
}

// TestVectors renders every case of the JSON-e specification (and hopper's
// extra cases) and compares with what the reference implementation returned
// or the error it threw.
func TestVectors(t *testing.T) {
	t.Parallel()
	f := loadVectors(t)
	now, err := time.Parse(time.RFC3339Nano, f.Now)
	require.NoError(t, err)
	for _, c := range f.Cases {
		t.Run(c.Section+"/"+c.Title, func(t *testing.T) {
			got, err := RenderAt(c.Template, c.Context, now)
			if c.Error != nil {
				require.Error(t, err, "want error %q, got %#v", *c.Error, got)
				require.Equal(t, *c.Error, err.Error())
				return
			}
			require.NoError(t, err)
			var want any
			require.NoError(t, json.Unmarshal(c.Result, &want))
			require.Equal(t, want, got)
		})
	}
}
