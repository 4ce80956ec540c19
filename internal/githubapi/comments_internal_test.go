package githubapi

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// TestCommentMarker: a comment's marker names its key, or a digest of a
// key that could end the HTML comment early; a body gets it once, and
// stays within GitHub's bound, cut on a character.
func TestCommentMarker(t *testing.T) {
	t.Parallel()
	key := "comment:" + strings.Repeat("0f", 32)
	require.Equal(t, "<!-- hopper:"+key+" -->", commentMarker(key))
	for _, odd := range []string{"comment:a-->b", "comment:a--b", "comment:<x>", "comment: a"} {
		m := commentMarker(odd)
		require.Regexp(t, `^<!-- hopper:comment:[0-9a-f]{64} -->$`, m, odd)
	}
	require.NotEqual(t, commentMarker("comment:a-->b"), commentMarker("comment:a--b"))

	for _, tc := range []struct {
		name, text string
		want       func(t *testing.T, got string)
	}{
		{name: "appended", text: "Taskcluster could not start", want: func(t *testing.T, got string) {
			require.Equal(t, "Taskcluster could not start\n\n"+commentMarker(key), got)
		}},
		{name: "once", text: "already\n\n" + commentMarker(key), want: func(t *testing.T, got string) {
			require.Equal(t, 1, strings.Count(got, commentMarker(key)))
		}},
		{name: "within the bound", text: strings.Repeat("é", maxCommentBody), want: func(t *testing.T, got string) {
			require.LessOrEqual(t, len(got), maxCommentBody)
			require.True(t, utf8.ValidString(got))
			require.True(t, strings.HasSuffix(got, "\n\n"+commentMarker(key)))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := json.Marshal(map[string]string{"body": tc.text})
			require.NoError(t, err)
			marked, err := markComment(body, commentMarker(key))
			require.NoError(t, err)
			var got struct{ Body string }
			require.NoError(t, json.Unmarshal(marked, &got))
			tc.want(t, got.Body)
		})
	}
	_, err := markComment([]byte("not json"), commentMarker(key))
	require.Error(t, err)
}
