package queue_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
)

func TestPriorityWeight(t *testing.T) {
	t.Parallel()
	tests := []struct {
		priority string
		want     int
	}{
		{"highest", 7}, {"very-high", 6}, {"high", 5}, {"medium", 4},
		{"low", 3}, {"very-low", 2}, {"lowest", 1},
		{"normal", 1}, // legacy v87 name, weighs as lowest
		{"", 0}, {"urgent", 0}, {"Highest", 0},
	}
	for _, tt := range tests {
		t.Run(tt.priority, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, queue.PriorityWeight(tt.priority))
		})
	}
}

func TestPrioritiesAtOrAbove(t *testing.T) {
	t.Parallel()
	all := []string{"highest", "very-high", "high", "medium", "low", "very-low", "lowest"}
	tests := []struct {
		priority string
		want     []string
	}{
		{"highest", []string{"highest"}},
		{"very-high", []string{"highest", "very-high"}},
		{"medium", []string{"highest", "very-high", "high", "medium"}},
		{"very-low", all[:6]},
		{"lowest", all},
		{"normal", all},
	}
	for _, tt := range tests {
		t.Run(tt.priority, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, queue.PrioritiesAtOrAbove(tt.priority))
		})
	}
}

func TestSplitTaskQueueID(t *testing.T) {
	t.Parallel()
	tests := []struct{ id, provisioner, workerType string }{
		{"proj-x/builder", "proj-x", "builder"},
		{"a/b/c", "a", "b/c"},
		{"no-slash", "no-slash", ""},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel()
			p, w := queue.SplitTaskQueueID(tt.id)
			require.Equal(t, tt.provisioner, p)
			require.Equal(t, tt.workerType, w)
		})
	}
}

// sameDefinitionBase is a createTask body using only explicit values that
// differ from the defaults, so that each case below can vary one thing.
func sameDefinitionBase() map[string]any {
	return map[string]any{
		"taskQueueId":  "proj-x/builder",
		"created":      "2024-05-01T12:00:00.123Z",
		"deadline":     "2024-05-02T12:00:00.000Z",
		"dependencies": []string{"aaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbb"},
		"routes":       []string{"index.a", "index.b"},
		"scopes":       []string{"secrets:get:x", "docker-worker:cache:y"},
		"payload":      json.RawMessage(`{"image":"alpine","command":["sh","-c","echo hi"],"env":{"A":"1","B":"2"}}`),
		"metadata": map[string]string{
			"name": "build", "description": "builds it", "owner": "dev@example.com",
			"source": "https://example.com/repo",
		},
		"tags":  map[string]string{"kind": "build", "level": "3"},
		"extra": json.RawMessage(`{"treeherder":{"symbol":"B","tier":1}}`),
	}
}

// buildFromBody decodes a createTask body (as the API layer would) and
// builds the stored definition.
func buildFromBody(t *testing.T, body map[string]any) *queue.Task {
	t.Helper()
	raw, err := json.Marshal(body)
	require.NoError(t, err)
	var in queue.CreateTaskInput
	require.NoError(t, json.Unmarshal(raw, &in))
	task, err := queue.BuildTask(testTaskID, in, at(0), 0)
	require.NoError(t, err)
	return task
}

// TestSameDefinition covers createTask idempotency (docs/contract/queue.md §3.5).
func TestSameDefinition(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(m map[string]any)
		want   bool
	}{
		{"identical", func(map[string]any) {}, true},
		{"created with extra microseconds", func(m map[string]any) { m["created"] = "2024-05-01T12:00:00.123456Z" }, true},
		{"deadline in another zone", func(m map[string]any) { m["deadline"] = "2024-05-02T14:00:00+02:00" }, true},
		{"created one millisecond later", func(m map[string]any) { m["created"] = "2024-05-01T12:00:00.124Z" }, false},
		{"deadline one millisecond later", func(m map[string]any) { m["deadline"] = "2024-05-02T12:00:00.001Z" }, false},
		{"omitted expires equals the default", func(m map[string]any) { m["expires"] = "2025-05-02T12:00:00.000Z" }, true},
		{"explicit expires differs from the default", func(m map[string]any) { m["expires"] = "2025-05-02T12:00:00.001Z" }, false},
		{"split queue identity", func(m map[string]any) {
			delete(m, "taskQueueId")
			m["provisionerId"], m["workerType"] = "proj-x", "builder"
		}, true},
		{"all three identity fields", func(m map[string]any) {
			m["provisionerId"], m["workerType"] = "proj-x", "builder"
		}, true},
		{"other task queue", func(m map[string]any) { m["taskQueueId"] = "proj-x/tester" }, false},
		{"explicit defaults", func(m map[string]any) {
			m["schedulerId"], m["projectId"], m["taskGroupId"] = "-", "none", testTaskID
			m["requires"], m["priority"], m["retries"] = queue.RequiresAllCompleted, "lowest", 5
		}, true},
		{"legacy normal priority", func(m map[string]any) { m["priority"] = "normal" }, true},
		{"other priority", func(m map[string]any) { m["priority"] = "low" }, false},
		{"other retries", func(m map[string]any) { m["retries"] = 4 }, false},
		{"other requires", func(m map[string]any) { m["requires"] = queue.RequiresAllResolved }, false},
		{"other schedulerId", func(m map[string]any) { m["schedulerId"] = "gecko" }, false},
		{"other projectId", func(m map[string]any) { m["projectId"] = "proj" }, false},
		{"other taskGroupId", func(m map[string]any) { m["taskGroupId"] = "cccccccccccccccccccccc" }, false},
		{"payload keys reordered", func(m map[string]any) {
			m["payload"] = json.RawMessage(`{"env":{"B":"2","A":"1"},"command":["sh","-c","echo hi"],"image":"alpine"}`)
		}, true},
		{"payload with insignificant whitespace", func(m map[string]any) {
			m["payload"] = json.RawMessage("{ \"image\" : \"alpine\",\n\"command\":[\"sh\",\"-c\",\"echo hi\"],\"env\":{\"A\":\"1\",\"B\":\"2\"}}")
		}, true},
		{"payload array reordered", func(m map[string]any) {
			m["payload"] = json.RawMessage(`{"image":"alpine","command":["-c","sh","echo hi"],"env":{"A":"1","B":"2"}}`)
		}, false},
		{"payload value of another type", func(m map[string]any) {
			m["payload"] = json.RawMessage(`{"image":"alpine","command":["sh","-c","echo hi"],"env":{"A":1,"B":"2"}}`)
		}, false},
		{"payload with an extra key", func(m map[string]any) {
			m["payload"] = json.RawMessage(`{"image":"alpine","command":["sh","-c","echo hi"],"env":{"A":"1","B":"2"},"x":null}`)
		}, false},
		{"dependencies reordered", func(m map[string]any) {
			m["dependencies"] = []string{"bbbbbbbbbbbbbbbbbbbbbb", "aaaaaaaaaaaaaaaaaaaaaa"}
		}, false},
		{"routes reordered", func(m map[string]any) { m["routes"] = []string{"index.b", "index.a"} }, false},
		{"scopes reordered", func(m map[string]any) {
			m["scopes"] = []string{"docker-worker:cache:y", "secrets:get:x"}
		}, false},
		{"fewer routes", func(m map[string]any) { m["routes"] = []string{"index.a"} }, false},
		{"tags in another order", func(m map[string]any) {
			m["tags"] = json.RawMessage(`{"level":"3","kind":"build"}`)
		}, true},
		{"tag value differs", func(m map[string]any) { m["tags"] = map[string]string{"kind": "build", "level": "1"} }, false},
		{"fewer tags", func(m map[string]any) { m["tags"] = map[string]string{"kind": "build"} }, false},
		{"no tags", func(m map[string]any) { delete(m, "tags") }, false},
		{"tag key differs", func(m map[string]any) { m["tags"] = map[string]string{"kind": "build", "tier": "3"} }, false},
		{"metadata differs", func(m map[string]any) {
			m["metadata"] = map[string]string{
				"name": "build!", "description": "builds it", "owner": "dev@example.com",
				"source": "https://example.com/repo",
			}
		}, false},
		{"extra keys reordered", func(m map[string]any) { m["extra"] = json.RawMessage(`{"treeherder":{"tier":1,"symbol":"B"}}`) }, true},
		{"extra differs", func(m map[string]any) { m["extra"] = json.RawMessage(`{"treeherder":{"symbol":"B","tier":2}}`) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := buildFromBody(t, sameDefinitionBase())
			body := sameDefinitionBase()
			tt.mutate(body)
			b := buildFromBody(t, body)
			require.Equal(t, tt.want, queue.SameDefinition(a, b))
			require.Equal(t, tt.want, queue.SameDefinition(b, a), "symmetric")
		})
	}
}

// TestSameDefinitionDefaults checks that a body omitting every optional
// field equals one that spells out every default.
func TestSameDefinitionDefaults(t *testing.T) {
	t.Parallel()
	minimal := map[string]any{
		"taskQueueId": "proj-x/builder",
		"created":     "2024-05-01T12:00:00.000Z",
		"deadline":    "2024-05-02T12:00:00.000Z",
		"payload":     map[string]any{},
		"metadata": map[string]string{
			"name": "n", "description": "d", "owner": "o@example.com", "source": "https://example.com",
		},
	}
	explicit := map[string]any{
		"provisionerId": "proj-x",
		"workerType":    "builder",
		"schedulerId":   "-",
		"projectId":     "none",
		"taskGroupId":   testTaskID,
		"dependencies":  []string{},
		"requires":      "all-completed",
		"routes":        []string{},
		"priority":      "lowest",
		"retries":       5,
		"created":       "2024-05-01T12:00:00.000Z",
		"deadline":      "2024-05-02T12:00:00.000Z",
		"expires":       "2025-05-02T12:00:00.000Z",
		"scopes":        []string{},
		"payload":       map[string]any{},
		"metadata":      minimal["metadata"],
		"tags":          map[string]string{},
		"extra":         map[string]any{},
	}
	require.True(t, queue.SameDefinition(buildFromBody(t, minimal), buildFromBody(t, explicit)))
}

// TestSameDefinitionMillisecondPrecision compares definitions whose Time
// values were built directly, not decoded: sub-millisecond noise is ignored.
func TestSameDefinitionMillisecondPrecision(t *testing.T) {
	t.Parallel()
	a := newState(5).Task
	b := a
	b.Created = queue.Time{Time: a.Created.Add(456 * time.Microsecond)}
	b.Deadline = queue.Time{Time: a.Deadline.Add(999 * time.Microsecond).In(time.FixedZone("X", 3600))}
	require.True(t, queue.SameDefinition(&a, &b))
	b.Expires = queue.Time{Time: a.Expires.Add(time.Millisecond)}
	require.False(t, queue.SameDefinition(&a, &b))
}

// TestSameDefinitionInvalidJSON checks that stored JSON that cannot be
// parsed never counts as the same definition, not even as itself.
func TestSameDefinitionInvalidJSON(t *testing.T) {
	t.Parallel()
	a := newState(5).Task
	a.Payload = json.RawMessage(`{"a":`)
	b := a
	require.False(t, queue.SameDefinition(&a, &b))
	b.Payload = nil
	a.Payload = nil
	require.True(t, queue.SameDefinition(&a, &b), "absent payloads are both {}")
	a.Payload = json.RawMessage(`{}`)
	require.True(t, queue.SameDefinition(&a, &b))
}
