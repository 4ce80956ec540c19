package hooks

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func input(mutate func(*DefinitionInput)) DefinitionInput {
	in := DefinitionInput{
		Metadata:      json.RawMessage(`{"name":"n","description":"d","owner":"o@example.com","emailOnError":true}`),
		Schedule:      []string{"0 0 * * * *"},
		Task:          json.RawMessage(`{"taskQueueId":"a/b"}`),
		TriggerSchema: json.RawMessage(`{"type":"object","additionalProperties":false}`),
	}
	if mutate != nil {
		mutate(&in)
	}
	return in
}

func TestDefine(t *testing.T) {
	t.Parallel()
	bindings := []Binding{{Exchange: "exchange/x", RoutingKeyPattern: "#"}}
	tests := []struct {
		name    string
		in      DefinitionInput
		opts    DefineOptions
		wantErr string
		check   func(t *testing.T, d *Definition)
	}{
		{name: "ok", in: input(nil), check: func(t *testing.T, d *Definition) {
			require.Equal(t, "g", d.HookGroupID)
			require.Equal(t, "h/1", d.HookID)
			require.Equal(t, []Binding{}, d.Bindings)
		}},
		{name: "ids in the body must match the URL", in: input(func(in *DefinitionInput) { in.HookGroupID = "other" }),
			wantErr: "InputError: Hook Group Ids do not match"},
		{name: "hook id must match", in: input(func(in *DefinitionInput) { in.HookID = "other" }),
			wantErr: "InputError: Hook Ids do not match"},
		{name: "matching ids are fine", in: input(func(in *DefinitionInput) { in.HookGroupID, in.HookID = "g", "h/1" })},
		{name: "bad schedule", in: input(func(in *DefinitionInput) { in.Schedule = []string{"0 0 * * * *", "61 * * * *"} }),
			wantErr: "InputError: Constraint error, got value 61 expected range 0-59 in 61 * * * *"},
		{name: "bad trigger schema", in: input(func(in *DefinitionInput) { in.TriggerSchema = json.RawMessage(`{"type":"nonsense"}`) }),
			wantErr: "InputError: triggerSchema is not a valid JSON schema:"},
		{name: "bindings need a broker", in: input(func(in *DefinitionInput) { in.Bindings = &bindings }),
			wantErr: "no AMQP broker"},
		{name: "bindings with a broker", in: input(func(in *DefinitionInput) { in.Bindings = &bindings }),
			opts:  DefineOptions{PulseAvailable: true},
			check: func(t *testing.T, d *Definition) { require.Equal(t, bindings, d.Bindings) }},
		{name: "an update keeps bindings it does not mention", in: input(nil),
			opts:  DefineOptions{PulseAvailable: true, Existing: &Definition{Bindings: bindings}},
			check: func(t *testing.T, d *Definition) { require.Equal(t, bindings, d.Bindings) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.opts.HookGroupID, tc.opts.HookID = "g", "h/1"
			d, sched, err := Define(tc.in, tc.opts)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				var he *Error
				require.ErrorAs(t, err, &he)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, sched)
			if tc.check != nil {
				tc.check(t, d)
			}
		})
	}
}

func TestSame(t *testing.T) {
	t.Parallel()
	a, _, err := Define(input(nil), DefineOptions{HookGroupID: "g", HookID: "h"})
	require.NoError(t, err)
	b, _, err := Define(input(func(in *DefinitionInput) { in.Task = json.RawMessage(`{ "taskQueueId" : "a/b" }`) }), DefineOptions{HookGroupID: "g", HookID: "h"})
	require.NoError(t, err)
	require.True(t, Same(a, b), "spacing does not matter")
	c, _, err := Define(input(func(in *DefinitionInput) { in.Task = json.RawMessage(`{"taskQueueId":"a/c"}`) }), DefineOptions{HookGroupID: "g", HookID: "h"})
	require.NoError(t, err)
	require.False(t, Same(a, c))
}

func TestScheduleOverlapsCountOnce(t *testing.T) {
	t.Parallel()
	// Every 10 s and every 15 s: 0, 10, 15, 20, 30 (once, though both
	// name it), 40, 45, 50.
	s, err := ParseSchedule([]string{"*/10 * * * * *", "*/15 * * * * *"})
	require.NoError(t, err)
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var got []int
	for range 8 {
		next, ok := s.Next(at)
		require.True(t, ok)
		got = append(got, next.Second())
		at = next
	}
	require.Equal(t, []int{10, 15, 20, 30, 40, 45, 50, 0}, got)

	empty, err := ParseSchedule(nil)
	require.NoError(t, err)
	require.True(t, empty.Empty())
	_, ok := empty.Next(at)
	require.False(t, ok)
}

func TestCheckTriggerPayload(t *testing.T) {
	t.Parallel()
	def := &Definition{HookGroupID: "g", HookID: "h",
		TriggerSchema: json.RawMessage(`{"type":"object","properties":{"version":{"type":"string"},"taskId":{"type":"string"}},"required":["version"],"additionalProperties":false}`)}
	tests := []struct {
		name, payload, wantTaskID, wantErr string
	}{
		{name: "valid", payload: `{"version":"1.2"}`},
		{name: "with a taskId", payload: `{"version":"1.2","taskId":"fN1gHwxWQJmjsxJyHD-ZwA"}`, wantTaskID: "fN1gHwxWQJmjsxJyHD-ZwA"},
		{name: "bad taskId", payload: `{"version":"1.2","taskId":"nope"}`, wantErr: "InputError: Invalid taskId format: nope"},
		{name: "missing property", payload: `{}`, wantErr: "InputError: data must have required property 'version'"},
		{name: "extra property", payload: `{"version":"1","x":1}`, wantErr: "InputError: data must NOT have additional properties"},
		{name: "two problems", payload: `{"version":1,"taskId":2}`, wantErr: "InputError: data/taskId must be string; data/version must be string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id, err := CheckTriggerPayload(def, []byte(tc.payload))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantTaskID, id)
		})
	}
	// Without a triggerSchema only an empty payload is accepted.
	bare := &Definition{}
	_, err := CheckTriggerPayload(bare, []byte(`{}`))
	require.NoError(t, err)
	_, err = CheckTriggerPayload(bare, []byte(`{"a":1}`))
	require.Error(t, err)
}

func TestTriggerRefusal(t *testing.T) {
	t.Parallel()
	def := &Definition{HookGroupID: "g", HookID: "h"}
	info := map[string]any{"method": "createTask"}
	scopes := TriggerRefusal(def, &TaskError{Code: "InsufficientScopes", Status: 403, Message: "missing x", RequestInfo: info})
	require.Equal(t, CodeInsufficientScopes, scopes.Code)
	require.Equal(t, "The role `hook-id:g/h` does not have sufficient scopes to create the task:\n\nmissing x", scopes.Message)
	require.Equal(t, map[string]any{"createTask": info}, scopes.Details)
	other := TriggerRefusal(def, &TaskError{Code: "InputValidationError", Status: 400, Message: "bad"})
	require.Equal(t, CodeInputError, other.Code)
	require.Equal(t, "While calling createTask: InputValidationError\n\nbad", other.Message)
	rec := (&TaskError{Code: "InputValidationError", Status: 400, Message: "bad", RequestInfo: info}).Record()
	require.JSONEq(t, `{"name":"Error","message":"bad","code":"InputValidationError","statusCode":400,
		"body":{"code":"InputValidationError","message":"bad","requestInfo":{"method":"createTask"}}}`, rec)
}

func TestRenderTask(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	tests := []struct {
		name     string
		template string
		fire     Fire
		want     map[string]any
		wantErr  string
	}{
		{name: "defaults filled", template: `{"taskQueueId":"a/b"}`,
			fire: Fire{FiredBy: FiredBySchedule, TaskID: "T", Now: now},
			want: map[string]any{"taskQueueId": "a/b", "created": "2030-05-06T07:08:09.000Z", "deadline": "2030-05-07T07:08:09.000Z",
				"expires": "2030-06-05T07:08:09.000Z", "taskGroupId": "T"}},
		{name: "template times and group kept", template: `{"created":{"$fromNow":"0 seconds"},"deadline":{"$fromNow":"2 hours"},"expires":{"$fromNow":"1 day"},"taskGroupId":"G"}`,
			fire: Fire{FiredBy: FiredBySchedule, TaskID: "T", Now: now},
			want: map[string]any{"created": "2030-05-06T07:08:09.000Z", "deadline": "2030-05-06T09:08:09.000Z",
				"expires": "2030-05-07T07:08:09.000Z", "taskGroupId": "G"}},
		{name: "context", template: `{"taskGroupId":"G","created":"c","deadline":"d","expires":"e","extra":{"by":"${firedBy}","id":"${taskId}","v":{"$eval":"payload.v"},"who":{"$eval":"clientId"}}}`,
			fire: Fire{FiredBy: FiredByTriggerHook, TaskID: "T", Payload: map[string]any{"v": 1.5}, ClientID: "me", Now: now},
			want: map[string]any{"taskGroupId": "G", "created": "c", "deadline": "d", "expires": "e",
				"extra": map[string]any{"by": "triggerHook", "id": "T", "v": 1.5, "who": "me"}}},
		{name: "declined", template: `{"$if":"firedBy == 'pulseMessage'","then":{"a":1}}`, fire: Fire{FiredBy: FiredBySchedule, Now: now}},
		{name: "no payload for schedules", template: `{"$eval":"payload"}`, fire: Fire{FiredBy: FiredBySchedule, Now: now},
			wantErr: "unknown context value payload"},
		{name: "not an object", template: `{"$eval":"[1]"}`, fire: Fire{FiredBy: FiredBySchedule, Now: now},
			wantErr: "must render to an object or null, got an array"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := RenderTask(&Definition{Task: json.RawMessage(tc.template)}, tc.fire)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			if tc.want == nil {
				require.Nil(t, got)
				return
			}
			require.Equal(t, tc.want, got)
		})
	}
}
