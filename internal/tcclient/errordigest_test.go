package tcclient_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestErrorDigest runs the cases of testdata/error-digests.json, which the
// web console's digest (web/src/errordigest.ts) must also pass, so that the
// CLI, the worker's log and the console show a refusal alike.
func TestErrorDigest(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/error-digests.json")
	require.NoError(t, err)
	var cases []struct {
		Name, Message, Summary, OneLine string
		Details                         []string
	}
	require.NoError(t, json.Unmarshal(data, &cases))
	require.NotEmpty(t, cases)
	for _, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			t.Parallel()
			summary, details := tcclient.ErrorDigest(tt.Message)
			require.Equal(t, tt.Summary, summary)
			if len(tt.Details) == 0 {
				require.Empty(t, details)
			} else {
				require.Equal(t, tt.Details, details)
			}
			if tt.OneLine != "" {
				require.Equal(t, tt.OneLine, tcclient.OneLine(tt.Message))
			}
		})
	}
}
