package live

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/events"
)

func TestSelection(t *testing.T) {
	t.Parallel()
	const taskID, groupID = "fN1SbArXTPSVFNUvaOlinQ", "aGQjzPjDTCGGZHZdHO9Jkw"
	taskKey := func(task, group, prov, wt string) string {
		return strings.Join([]string{"primary", task, "0", "g", "w", prov, wt, "-", group, "_"}, ".")
	}
	tests := []struct {
		name    string
		query   map[string][]string
		scope   string
		matches []events.Message
		misses  []events.Message
		wantErr string
	}{
		{name: "everything", query: nil, scope: "queue:status:*",
			matches: []events.Message{{Exchange: "task-defined", RoutingKey: taskKey(taskID, groupID, "p", "t")}}},
		{name: "one task", query: map[string][]string{"taskId": {taskID}}, scope: "queue:status:" + taskID,
			matches: []events.Message{{Exchange: "task-completed", RoutingKey: taskKey(taskID, groupID, "p", "t")}},
			misses:  []events.Message{{Exchange: "task-completed", RoutingKey: taskKey(groupID, taskID, "p", "t")}}},
		{name: "a group", query: map[string][]string{"taskGroupId": {groupID}}, scope: "queue:list-task-group:" + groupID,
			matches: []events.Message{
				{Exchange: "task-pending", RoutingKey: taskKey(taskID, groupID, "p", "t")},
				{Exchange: "task-group-resolved", RoutingKey: "primary." + groupID + ".-._"},
			},
			misses: []events.Message{
				{Exchange: "task-pending", RoutingKey: taskKey(groupID, taskID, "p", "t")},
				{Exchange: "task-group-resolved", RoutingKey: "primary." + taskID + ".-._"},
			}},
		{name: "a queue", query: map[string][]string{"taskQueueId": {"prov/type"}}, scope: "queue:pending-list:prov/type",
			matches: []events.Message{{Exchange: "task-running", RoutingKey: taskKey(taskID, groupID, "prov", "type")}},
			misses:  []events.Message{{Exchange: "task-running", RoutingKey: taskKey(taskID, groupID, "prov", "other")}}},
		{name: "bad task id", query: map[string][]string{"taskId": {"x"}}, wantErr: "Invalid query-string parameter taskId"},
		{name: "twice", query: map[string][]string{"taskId": {taskID, taskID}}, wantErr: "given 2 times"},
		{name: "two kinds", query: map[string][]string{"taskId": {taskID}, "taskGroupId": {groupID}}, wantErr: "at most one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sel, err := parseSelection(tt.query)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.scope, sel.scope)
			for _, m := range tt.matches {
				require.True(t, sel.filter == nil || sel.filter(m), "should match %s %s", m.Exchange, m.RoutingKey)
			}
			for _, m := range tt.misses {
				require.False(t, sel.filter(m), "should not match %s %s", m.Exchange, m.RoutingKey)
			}
		})
	}
}

// TestRelayEncodeFitsNotify: batches split under PostgreSQL's payload
// limit in order, and a message too large alone travels without a body.
func TestRelayEncodeFitsNotify(t *testing.T) {
	t.Parallel()
	r := &Relay{origin: "me"}
	body := json.RawMessage(`{"x":"` + strings.Repeat("a", 1000) + `"}`)
	var msgs []events.Message
	for i := range 20 {
		msgs = append(msgs, events.Message{Exchange: "task-pending", RoutingKey: "primary.k" + string(rune('a'+i)), Body: body})
	}
	huge := events.Message{Exchange: "task-defined", RoutingKey: "primary.huge", CC: []string{"route.x"},
		Body: json.RawMessage(`{"x":"` + strings.Repeat("b", 9000) + `"}`)}
	msgs = append(msgs, huge)
	payloads := r.encode(msgs)
	require.Greater(t, len(payloads), 2)
	var got []relayMessage
	for _, p := range payloads {
		require.LessOrEqual(t, len(p), maxPayload)
		var env envelope
		require.NoError(t, json.Unmarshal([]byte(p), &env))
		require.Equal(t, "me", env.Origin)
		got = append(got, env.Messages...)
	}
	require.Len(t, got, 21)
	for i, m := range got[:20] {
		require.Equal(t, msgs[i].RoutingKey, m.RoutingKey)
		require.JSONEq(t, string(body), string(m.Body))
	}
	require.Equal(t, "primary.huge", got[20].RoutingKey)
	require.Equal(t, "null", string(got[20].Body))
}

// TestHubWanted: messages are wanted while a local stream is open or
// another replica spoke of one recently.
func TestHubWanted(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	h := NewHub()
	h.now = func() time.Time { return now }
	require.False(t, h.Wanted())
	ch, cancel := h.Subscribe(nil)
	require.True(t, h.Wanted())
	require.NoError(t, h.Publish(context.Background(), events.Message{Exchange: "task-pending", RoutingKey: "primary.x"}))
	require.Equal(t, "primary.x", (<-ch).RoutingKey)
	cancel()
	require.False(t, h.Wanted())

	h.noteRemoteInterest()
	require.True(t, h.Wanted())
	now = now.Add(interestTTL - time.Second)
	require.True(t, h.Wanted())
	now = now.Add(2 * time.Second)
	require.False(t, h.Wanted())

	require.NoError(t, h.Close())
	require.NoError(t, h.Publish(context.Background(), events.Message{}), "publishing after close is quiet")
}
