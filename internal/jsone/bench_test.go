package jsone

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// hookTemplate is a task template of the size a hook or a decision task
// typically renders.
const hookTemplate = `{
  "$let": {"branch": {"$eval": "payload.ref[11:]"}},
  "in": {
    "taskGroupId": "${taskId}",
    "schedulerId": "taskcluster-ui",
    "created": {"$fromNow": ""},
    "deadline": {"$fromNow": "1 day"},
    "expires": {"$fromNow": "1 year 2 months"},
    "provisionerId": "proj", "workerType": "ci",
    "tags": {"order": {"$json": {"$reverse": {"$eval": "payload.tags"}}}},
    "routes": {"$map": {"$eval": "payload.tags"}, "each(t)": "index.proj.${branch}.${lowercase(t)}"},
    "payload": {
      "maxRunTime": {"$eval": "3600 * 2"},
      "command": ["/bin/sh", "-c", {"$json": {"$eval": "payload"}}],
      "env": {"$merge": [
        {"BRANCH": "${branch}", "FIRED_BY": "${firedBy}"},
        {"$if": "firedBy == 'schedule'", "then": {"NIGHTLY": "1"}}
      ]}
    },
    "metadata": {"name": "build ${branch}", "description": "", "owner": "ci@example.com", "source": "https://example.com"}
  }
}`

func hookFixture(tb testing.TB) (any, map[string]any) {
	tb.Helper()
	var template any
	require.NoError(tb, json.Unmarshal([]byte(hookTemplate), &template))
	context := map[string]any{
		"taskId": "fXa8Ye1eTs2hm4mC6Ms4Sg", "firedBy": "schedule",
		"payload": map[string]any{"ref": "refs/heads/main", "tags": []any{"Linux", "ARM64", "Nightly"}},
	}
	return template, context
}

func BenchmarkRenderHookTask(b *testing.B) {
	template, context := hookFixture(b)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RenderAt(template, context, now); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderExpression(b *testing.B) {
	template := map[string]any{"$eval": `[for_x[0] + 1, len(split("a,b,c", ",")), max(1, 2, 3) ** 2, "x" in {x: 1}, str(1/3)]`}
	context := map[string]any{"for_x": []any{1.0}}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RenderAt(template, context, now); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRenderConcurrently renders one template and context from many
// goroutines at once (run with -race): renders share no state.
func TestRenderConcurrently(t *testing.T) {
	t.Parallel()
	template, context := hookFixture(t)
	now := time.Date(2017, 1, 19, 16, 27, 20, 974e6, time.UTC)
	want, err := RenderAt(template, context, now)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				got, err := RenderAt(template, context, now)
				if err != nil || !jsonEqual(got, want) {
					t.Errorf("concurrent render: %v, %v", got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
