package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestInteractiveCopy(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	def := map[string]any{
		"taskQueueId":  "proj/ci",
		"taskGroupId":  "group",
		"created":      "2026-01-01T00:00:00.000Z",
		"deadline":     "2026-01-01T02:00:00.000Z",
		"expires":      "2026-01-31T00:00:00.000Z",
		"routes":       []any{"index.project.latest", "notify.email.a@example.com.on-failed"},
		"dependencies": []any{"dep"},
		"retries":      5,
		"scopes":       []any{"secrets:get:x"},
		"metadata":     map[string]any{"name": "build", "owner": "a@example.com"},
		"payload":      map[string]any{"command": []any{[]any{"make"}}, "maxRunTime": 600, "features": map[string]any{"liveLog": true}},
	}
	cp, err := InteractiveCopy(def, now)
	require.NoError(t, err)
	require.Equal(t, map[string]any{
		"taskQueueId":  "proj/ci",
		"taskGroupId":  "group",
		"created":      "2026-03-01T12:00:00.000Z",
		"deadline":     "2026-03-01T14:00:00.000Z",
		"expires":      "2026-03-31T12:00:00.000Z",
		"routes":       []any{},
		"dependencies": []any{},
		"retries":      0,
		"scopes":       []any{"secrets:get:x"},
		"metadata":     map[string]any{"name": "Interactive: build", "owner": "a@example.com"},
		"payload": map[string]any{"command": []any{[]any{"make"}}, "maxRunTime": 600,
			"features": map[string]any{"liveLog": true, "interactive": true}},
	}, cp)
	require.Equal(t, map[string]any{"liveLog": true}, def["payload"].(map[string]any)["features"], "the original is left as it was")

	// A short deadline gets at least an hour; a copy of a copy keeps one prefix.
	def["deadline"], def["metadata"] = "2026-01-01T00:05:00.000Z", map[string]any{"name": "Interactive: build"}
	cp, err = InteractiveCopy(def, now)
	require.NoError(t, err)
	require.Equal(t, "2026-03-01T13:00:00.000Z", cp["deadline"])
	require.Equal(t, "Interactive: build", cp["metadata"].(map[string]any)["name"])

	_, err = InteractiveCopy(map[string]any{"payload": "x"}, now)
	require.ErrorContains(t, err, "payload is not an object")
}
