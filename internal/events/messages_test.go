package events

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// specStatus is the status of the §6.3 example task-completed body.
const specStatus = `{"taskId": "fN1SbArXTPSVFNUvaOlinQ", "provisionerId": "proj-x", "workerType": "builder",
 "taskQueueId": "proj-x/builder", "schedulerId": "-", "projectId": "none",
 "taskGroupId": "fN1SbArXTPSVFNUvaOlinQ", "deadline": "2024-01-02T00:00:00.000Z",
 "expires": "2025-01-01T00:00:00.000Z", "retriesLeft": 5, "state": "completed",
 "runs": [{"runId": 0, "state": "completed", "reasonCreated": "scheduled",
           "reasonResolved": "completed", "workerGroup": "wg-1", "workerId": "w-7",
           "takenUntil": "2024-01-01T00:20:00.000Z", "scheduled": "2024-01-01T00:00:00.000Z",
           "started": "2024-01-01T00:00:05.000Z", "resolved": "2024-01-01T00:10:00.000Z"}]}`

var specRoutes = []string{"index.foo.bar", "notify.email.a@b.c.on-failed"}

func mustTime(t *testing.T, s string) Timestamp {
	t.Helper()
	parsed, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return Timestamp{parsed}
}

// TestNewTaskEventSpecExample builds the task-completed message of §6.3 and
// checks body, routing key and CCs.
func TestNewTaskEventSpecExample(t *testing.T) {
	t.Parallel()
	m, err := NewTaskEvent(ExchangeTaskCompleted, TaskMessage{
		Status:      json.RawMessage(specStatus),
		Task:        &TaskSummary{},
		RunID:       intPtr(0),
		WorkerGroup: "wg-1",
		WorkerID:    "w-7",
	}, specRoutes)
	require.NoError(t, err)
	require.Equal(t, "task-completed", m.Exchange)
	require.Equal(t, "primary.fN1SbArXTPSVFNUvaOlinQ.0.wg-1.w-7.proj-x.builder.-.fN1SbArXTPSVFNUvaOlinQ._", m.RoutingKey)
	require.Equal(t, []string{"route.index.foo.bar", "route.notify.email.a@b.c.on-failed"}, m.CC)
	require.JSONEq(t, `{"version": 1, "status": `+specStatus+`, "task": {"tags": {}},
		"runId": 0, "workerGroup": "wg-1", "workerId": "w-7"}`, string(m.Body))
}

func TestNewTaskEventBodies(t *testing.T) {
	t.Parallel()
	status := json.RawMessage(specStatus)
	tags := &TaskSummary{Tags: map[string]string{"purpose": "test"}}
	takenUntil := mustTime(t, "2024-01-01T00:20:00.123456789Z")
	artifact := &ArtifactSummary{
		StorageType: "reference", Name: "public/log.txt",
		Expires: mustTime(t, "2025-01-01T00:00:00Z"), ContentType: "text/plain",
	}
	const key = "fN1SbArXTPSVFNUvaOlinQ.%s.proj-x.builder.-.fN1SbArXTPSVFNUvaOlinQ._"
	tests := []struct {
		name     string
		exchange string
		body     TaskMessage
		wantKey  string // the words between "primary." and the provisionerId
		wantBody string // without status
	}{
		{
			name:     "task-defined omits run and worker",
			exchange: ExchangeTaskDefined,
			body:     TaskMessage{Status: status, Task: tags},
			wantKey:  "_._._",
			wantBody: `{"version":1,"task":{"tags":{"purpose":"test"}}}`,
		},
		{
			name:     "task-defined without task",
			exchange: ExchangeTaskDefined,
			body:     TaskMessage{Status: status},
			wantKey:  "_._._",
			wantBody: `{"version":1}`,
		},
		{
			name:     "task-pending has runId only",
			exchange: ExchangeTaskPending,
			body:     TaskMessage{Status: status, RunID: intPtr(1), Task: tags},
			wantKey:  "1._._",
			wantBody: `{"version":1,"runId":1,"task":{"tags":{"purpose":"test"}}}`,
		},
		{
			name:     "task-running has takenUntil in milliseconds",
			exchange: ExchangeTaskRunning,
			body:     TaskMessage{Status: status, RunID: intPtr(0), WorkerGroup: "wg-1", WorkerID: "w-7", TakenUntil: takenUntil, Task: tags},
			wantKey:  "0.wg-1.w-7",
			wantBody: `{"version":1,"runId":0,"workerGroup":"wg-1","workerId":"w-7","takenUntil":"2024-01-01T00:20:00.123Z","task":{"tags":{"purpose":"test"}}}`,
		},
		{
			name:     "artifact-created carries exactly four artifact fields",
			exchange: ExchangeArtifactCreated,
			body:     TaskMessage{Status: status, RunID: intPtr(0), WorkerGroup: "wg-1", WorkerID: "w-7", Artifact: artifact},
			wantKey:  "0.wg-1.w-7",
			wantBody: `{"version":1,"runId":0,"workerGroup":"wg-1","workerId":"w-7","artifact":{"storageType":"reference","name":"public/log.txt","expires":"2025-01-01T00:00:00.000Z","contentType":"text/plain"}}`,
		},
		{
			name:     "task-failed",
			exchange: ExchangeTaskFailed,
			body:     TaskMessage{Status: status, RunID: intPtr(2), WorkerGroup: "wg-1", WorkerID: "w-7", Task: tags},
			wantKey:  "2.wg-1.w-7",
			wantBody: `{"version":1,"runId":2,"workerGroup":"wg-1","workerId":"w-7","task":{"tags":{"purpose":"test"}}}`,
		},
		{
			name:     "task-exception of a claimed run",
			exchange: ExchangeTaskException,
			body:     TaskMessage{Status: status, RunID: intPtr(0), WorkerGroup: "wg-1", WorkerID: "w-7", Task: tags},
			wantKey:  "0.wg-1.w-7",
			wantBody: `{"version":1,"runId":0,"workerGroup":"wg-1","workerId":"w-7","task":{"tags":{"purpose":"test"}}}`,
		},
		{
			name:     "task-exception for deadline omits worker",
			exchange: ExchangeTaskException,
			body:     TaskMessage{Status: status, RunID: intPtr(0), Task: tags},
			wantKey:  "0._._",
			wantBody: `{"version":1,"runId":0,"task":{"tags":{"purpose":"test"}}}`,
		},
		{
			name:     "task-exception without any run",
			exchange: ExchangeTaskException,
			body:     TaskMessage{Status: status},
			wantKey:  "_._._",
			wantBody: `{"version":1}`,
		},
		{
			name:     "version is forced to 1",
			exchange: ExchangeTaskDefined,
			body:     TaskMessage{Version: 7, Status: status},
			wantKey:  "_._._",
			wantBody: `{"version":1}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := NewTaskEvent(tt.exchange, tt.body, nil)
			require.NoError(t, err)
			require.NoError(t, m.Validate())
			require.Equal(t, tt.exchange, m.Exchange)
			wantKey := "primary." + strings.Replace(key, "%s", tt.wantKey, 1)
			require.Equal(t, wantKey, m.RoutingKey)
			require.Nil(t, m.CC)

			var got map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(m.Body, &got))
			require.JSONEq(t, specStatus, string(got["status"]))
			delete(got, "status")
			rest, err := json.Marshal(got)
			require.NoError(t, err)
			require.JSONEq(t, tt.wantBody, string(rest))
		})
	}
}

func TestNewTaskEventRejectsBodiesTheSchemaForbids(t *testing.T) {
	t.Parallel()
	status := json.RawMessage(specStatus)
	worker := func(b TaskMessage) TaskMessage { b.WorkerGroup, b.WorkerID = "wg", "w"; return b }
	run := func(b TaskMessage) TaskMessage { b.RunID = intPtr(0); return b }
	base := TaskMessage{Status: status}
	tests := []struct {
		name     string
		exchange string
		body     TaskMessage
		wantErr  string
	}{
		{"unknown exchange", "task-exploded", base, "not a task exchange"},
		{"group exchange", ExchangeTaskGroupResolved, base, "not a task exchange"},
		{"task-defined with runId", ExchangeTaskDefined, run(base), "does not allow runId"},
		{"task-pending without runId", ExchangeTaskPending, base, "requires runId"},
		{"task-pending with worker", ExchangeTaskPending, worker(run(base)), "does not allow workerGroup"},
		{"task-running without takenUntil", ExchangeTaskRunning, worker(run(base)), "requires takenUntil"},
		{"task-completed without worker", ExchangeTaskCompleted, run(base), "requires workerGroup"},
		{"task-completed with takenUntil", ExchangeTaskCompleted, func() TaskMessage {
			b := worker(run(base))
			b.TakenUntil = Timestamp{time.Now()}
			return b
		}(), "does not allow takenUntil"},
		{"artifact-created without artifact", ExchangeArtifactCreated, worker(run(base)), "requires artifact"},
		{"artifact-created with task", ExchangeArtifactCreated, func() TaskMessage {
			b := worker(run(base))
			b.Artifact = &ArtifactSummary{StorageType: "error", Name: "x"}
			b.Task = &TaskSummary{}
			return b
		}(), "does not allow task"},
		{"task-failed with artifact", ExchangeTaskFailed, func() TaskMessage {
			b := worker(run(base))
			b.Artifact = &ArtifactSummary{}
			return b
		}(), "does not allow artifact"},
		{"task-exception with half a worker", ExchangeTaskException, func() TaskMessage {
			b := run(base)
			b.WorkerGroup = "wg"
			return b
		}(), "both workerGroup and workerId"},
		{"no status", ExchangeTaskDefined, TaskMessage{}, "no status"},
		{"status not an object", ExchangeTaskDefined, TaskMessage{Status: json.RawMessage(`[1]`)}, "reading task status"},
		{"status without taskId", ExchangeTaskDefined, TaskMessage{Status: json.RawMessage(`{"provisionerId":"p","workerType":"w","schedulerId":"s","taskGroupId":"g"}`)}, "taskId is required"},
		{"status with dotted workerType", ExchangeTaskDefined, TaskMessage{Status: json.RawMessage(`{"taskId":"t","provisionerId":"p","workerType":"w.x","schedulerId":"s","taskGroupId":"g"}`)}, "contains a dot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewTaskEvent(tt.exchange, tt.body, nil)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestNewTaskEventRoutes(t *testing.T) {
	t.Parallel()
	body := TaskMessage{Status: json.RawMessage(specStatus)}
	_, err := NewTaskEvent(ExchangeTaskDefined, body, []string{"ok", ""})
	require.ErrorContains(t, err, "empty task route")
	_, err = NewTaskEvent(ExchangeTaskDefined, body, []string{strings.Repeat("r", 250)})
	require.ErrorContains(t, err, "CC routing key")
	m, err := NewTaskEvent(ExchangeTaskDefined, body, []string{strings.Repeat("r", 249)})
	require.NoError(t, err)
	require.Equal(t, []string{"route." + strings.Repeat("r", 249)}, m.CC)
}

func TestNewTaskEventDoesNotWriteThroughCallerPointers(t *testing.T) {
	t.Parallel()
	task := &TaskSummary{}
	m, err := NewTaskEvent(ExchangeTaskDefined, TaskMessage{Status: json.RawMessage(specStatus), Task: task}, nil)
	require.NoError(t, err)
	require.Nil(t, task.Tags, "the caller's TaskSummary must be left alone")
	require.Contains(t, string(m.Body), `"task":{"tags":{}}`)
}

func TestNewTaskEventSplitsTaskQueueID(t *testing.T) {
	t.Parallel()
	status := json.RawMessage(`{"taskId":"t","taskQueueId":"prov/wt","schedulerId":"s","taskGroupId":"g"}`)
	m, err := NewTaskEvent(ExchangeTaskPending, TaskMessage{Status: status, RunID: intPtr(0)}, nil)
	require.NoError(t, err)
	require.Equal(t, "primary.t.0._._.prov.wt.s.g._", m.RoutingKey)
}

func TestNewTaskGroupEvent(t *testing.T) {
	t.Parallel()
	expires := mustTime(t, "2025-01-01T00:00:00Z")
	sealed := mustTime(t, "2024-01-01T00:05:00.5Z")
	tests := []struct {
		name     string
		exchange string
		body     TaskGroupMessage
		wantBody string
		wantErr  string
	}{
		{
			name:     "resolved, unsealed group omits sealed",
			exchange: ExchangeTaskGroupResolved,
			body:     TaskGroupMessage{TaskGroupID: "fN1SbArXTPSVFNUvaOlinQ", SchedulerID: "-", Expires: expires},
			wantBody: `{"version":1,"taskGroupId":"fN1SbArXTPSVFNUvaOlinQ","schedulerId":"-","expires":"2025-01-01T00:00:00.000Z"}`,
		},
		{
			name:     "sealed",
			exchange: ExchangeTaskGroupSealed,
			body:     TaskGroupMessage{TaskGroupID: "fN1SbArXTPSVFNUvaOlinQ", SchedulerID: "-", Expires: expires, Sealed: sealed},
			wantBody: `{"version":1,"taskGroupId":"fN1SbArXTPSVFNUvaOlinQ","schedulerId":"-","expires":"2025-01-01T00:00:00.000Z","sealed":"2024-01-01T00:05:00.500Z"}`,
		},
		{
			name:     "task exchange",
			exchange: ExchangeTaskCompleted,
			body:     TaskGroupMessage{TaskGroupID: "g", SchedulerID: "-", Expires: expires},
			wantErr:  "not a task-group exchange",
		},
		{
			name:     "no expires",
			exchange: ExchangeTaskGroupResolved,
			body:     TaskGroupMessage{TaskGroupID: "g", SchedulerID: "-"},
			wantErr:  "requires expires",
		},
		{
			name:     "no schedulerId",
			exchange: ExchangeTaskGroupResolved,
			body:     TaskGroupMessage{TaskGroupID: "g", Expires: expires},
			wantErr:  "schedulerId is required",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := NewTaskGroupEvent(tt.exchange, tt.body)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.exchange, m.Exchange)
			require.Equal(t, "primary.fN1SbArXTPSVFNUvaOlinQ.-._", m.RoutingKey)
			require.Nil(t, m.CC, "task-group messages have no CCs")
			require.JSONEq(t, tt.wantBody, string(m.Body))
		})
	}
}

func TestPriorityChangedEvents(t *testing.T) {
	t.Parallel()
	m, err := NewTaskPriorityChangedEvent(TaskPriorityChangedMessage{
		Status: json.RawMessage(specStatus), OldPriority: "lowest", NewPriority: "high",
	}, []string{"index.foo"})
	require.NoError(t, err)
	require.Equal(t, ExchangeTaskPriorityChanged, m.Exchange)
	require.Equal(t, "primary.fN1SbArXTPSVFNUvaOlinQ._._._.proj-x.builder.-.fN1SbArXTPSVFNUvaOlinQ._", m.RoutingKey)
	require.Equal(t, []string{"route.index.foo"}, m.CC)
	require.JSONEq(t, `{"version":1,"status":`+specStatus+`,"oldPriority":"lowest","newPriority":"high"}`, string(m.Body))

	_, err = NewTaskPriorityChangedEvent(TaskPriorityChangedMessage{Status: json.RawMessage(specStatus), NewPriority: "high"}, nil)
	require.ErrorContains(t, err, "requires oldPriority and newPriority")

	g, err := NewTaskGroupPriorityChangedEvent(TaskGroupPriorityChangedMessage{
		TaskGroupID: "fN1SbArXTPSVFNUvaOlinQ", SchedulerID: "-", NewPriority: "low", TasksAffected: 0,
	})
	require.NoError(t, err)
	require.Equal(t, ExchangeTaskGroupPriorityChanged, g.Exchange)
	require.Equal(t, "primary.fN1SbArXTPSVFNUvaOlinQ.-._", g.RoutingKey)
	require.JSONEq(t, `{"version":1,"taskGroupId":"fN1SbArXTPSVFNUvaOlinQ","schedulerId":"-","newPriority":"low","tasksAffected":0}`, string(g.Body))

	_, err = NewTaskGroupPriorityChangedEvent(TaskGroupPriorityChangedMessage{TaskGroupID: "g", SchedulerID: "-"})
	require.ErrorContains(t, err, "requires newPriority")
	_, err = NewTaskGroupPriorityChangedEvent(TaskGroupPriorityChangedMessage{TaskGroupID: "g", SchedulerID: "-", NewPriority: "low", TasksAffected: -1})
	require.ErrorContains(t, err, "negative tasksAffected")
}

func TestTimestampJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
	}{
		{"2024-01-01T00:20:00Z", `"2024-01-01T00:20:00.000Z"`},
		{"2024-01-01T00:20:00.999999Z", `"2024-01-01T00:20:00.999Z"`},
		{"2024-01-01T02:20:00.5+02:00", `"2024-01-01T00:20:00.500Z"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			ts := mustTime(t, tt.in)
			b, err := json.Marshal(ts)
			require.NoError(t, err)
			require.Equal(t, tt.want, string(b))

			var back Timestamp
			require.NoError(t, json.Unmarshal(b, &back))
			require.True(t, back.Equal(ts.Truncate(time.Millisecond)))
		})
	}

	var ts Timestamp
	require.NoError(t, json.Unmarshal([]byte(`null`), &ts))
	require.True(t, ts.IsZero())
	require.ErrorContains(t, json.Unmarshal([]byte(`12`), &ts), "must be a string")
	require.ErrorContains(t, json.Unmarshal([]byte(`"yesterday"`), &ts), "parsing timestamp")
}

func TestTaskMessageRoundTrip(t *testing.T) {
	t.Parallel()
	in := TaskMessage{
		Version: 1, Status: json.RawMessage(`{"taskId":"t"}`), RunID: intPtr(0),
		WorkerGroup: "wg", WorkerID: "w", TakenUntil: mustTime(t, "2024-01-01T00:20:00Z"),
		Task: &TaskSummary{Tags: map[string]string{}},
	}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	var out TaskMessage
	require.NoError(t, json.Unmarshal(b, &out))
	require.True(t, in.TakenUntil.Equal(out.TakenUntil.Time))
	out.TakenUntil = in.TakenUntil
	require.Equal(t, in, out)
}

func TestMessageValidate(t *testing.T) {
	t.Parallel()
	ok := Message{Exchange: "task-defined", RoutingKey: "primary.t._._._.p.w.s.g._", CC: []string{"route.a"}, Body: json.RawMessage(`{}`)}
	tests := []struct {
		name    string
		mutate  func(*Message)
		wantErr string
	}{
		{"valid", func(*Message) {}, ""},
		{"no exchange", func(m *Message) { m.Exchange = "" }, "no exchange"},
		{"no routing key", func(m *Message) { m.RoutingKey = "" }, "no routing key"},
		{"routing key too long", func(m *Message) { m.RoutingKey = strings.Repeat("k", 256) }, "more than 255"},
		{"empty CC", func(m *Message) { m.CC = []string{""} }, "CC routing key"},
		{"CC too long", func(m *Message) { m.CC = []string{strings.Repeat("c", 256)} }, "CC routing key"},
		{"body not JSON", func(m *Message) { m.Body = json.RawMessage(`{`) }, "not valid JSON"},
		{"no body", func(m *Message) { m.Body = nil }, "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := ok
			tt.mutate(&m)
			err := m.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}
