package queue_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
)

// validInput is a createTask input created at epoch with a deadline a day
// later; BuildTask is called with now = epoch.
func validInput() queue.CreateTaskInput {
	return queue.CreateTaskInput{
		TaskQueueID: "proj-x/builder",
		Created:     qt(0),
		Deadline:    qt(24 * time.Hour),
		Payload:     json.RawMessage(`{"image":"alpine"}`),
		Metadata: queue.Metadata{
			Name: "n", Description: "d", Owner: "o@example.com", Source: "https://example.com",
		},
	}
}

// TestBuildTaskQueueIdentity covers the four cases of docs/contract/queue.md §3.2.
func TestBuildTaskQueueIdentity(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                string
		taskQueueID         string
		provisionerID       string
		workerType          string
		wantErr             bool
		wantQueue, wantProv string
		wantWorkerType      string
	}{
		{name: "all three, consistent", taskQueueID: "p/w", provisionerID: "p", workerType: "w",
			wantQueue: "p/w", wantProv: "p", wantWorkerType: "w"},
		{name: "all three, inconsistent", taskQueueID: "p/w", provisionerID: "p", workerType: "other", wantErr: true},
		{name: "all three, provisioner differs", taskQueueID: "p/w", provisionerID: "q", workerType: "w", wantErr: true},
		{name: "split form only", provisionerID: "p", workerType: "w",
			wantQueue: "p/w", wantProv: "p", wantWorkerType: "w"},
		{name: "taskQueueId only", taskQueueID: "p/w",
			wantQueue: "p/w", wantProv: "p", wantWorkerType: "w"},
		{name: "taskQueueId with a lone provisionerId that is overwritten", taskQueueID: "p/w", provisionerID: "q",
			wantQueue: "p/w", wantProv: "p", wantWorkerType: "w"},
		{name: "taskQueueId with a lone workerType that is overwritten", taskQueueID: "p/w", workerType: "v",
			wantQueue: "p/w", wantProv: "p", wantWorkerType: "w"},
		{name: "nothing", wantErr: true},
		{name: "provisionerId alone", provisionerID: "p", wantErr: true},
		{name: "workerType alone", workerType: "w", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := validInput()
			in.TaskQueueID, in.ProvisionerID, in.WorkerType = tt.taskQueueID, tt.provisionerID, tt.workerType
			task, err := queue.BuildTask(testTaskID, in, at(0), 0)
			if tt.wantErr {
				requireKind(t, err, queue.KindInput)
				require.Nil(t, task)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantQueue, task.TaskQueueID)
			require.Equal(t, tt.wantProv, task.ProvisionerID)
			require.Equal(t, tt.wantWorkerType, task.WorkerType)
		})
	}
}

// TestBuildTaskDates covers the date checks of docs/contract/queue.md §3.4 step 6, in
// their order: when several checks fail, the first one is reported.
func TestBuildTaskDates(t *testing.T) {
	t.Parallel()
	const (
		drift   = queue.CreatedDrift
		maxLife = queue.MaxDeadline + queue.CreatedDrift
		ms      = time.Millisecond
	)
	expires := func(d time.Duration) *queue.Time { return qtp(d) }
	tests := []struct {
		name     string
		created  time.Duration
		deadline time.Duration
		expires  *queue.Time
		wantErr  string // substring of the message; "" for success
	}{
		{name: "created exactly 15 minutes ago", created: -drift, deadline: time.Hour},
		{name: "created more than 15 minutes ago", created: -drift - ms, deadline: time.Hour,
			wantErr: "more than 15 minutes in the past"},
		{name: "created exactly 15 minutes ahead", created: drift, deadline: time.Hour},
		{name: "created more than 15 minutes ahead", created: drift + ms, deadline: time.Hour,
			wantErr: "more than 15 minutes in the future"},
		{name: "created after deadline", created: 10 * time.Minute, deadline: 5 * time.Minute,
			wantErr: "cannot be before created"},
		{name: "created equals deadline", created: 5 * time.Minute, deadline: 5 * time.Minute},
		{name: "deadline in the past", created: -10 * time.Minute, deadline: -ms,
			wantErr: "cannot be in the past"},
		{name: "deadline exactly now", created: -10 * time.Minute, deadline: 0},
		{name: "deadline at the 5 days + 15 minutes limit", deadline: maxLife},
		{name: "deadline beyond 5 days + 15 minutes", deadline: maxLife + ms,
			wantErr: "more than 5 days into the future"},
		{name: "expires before deadline", deadline: time.Hour, expires: expires(time.Hour - ms),
			wantErr: "cannot be before the deadline"},
		{name: "expires equals deadline", deadline: time.Hour, expires: expires(time.Hour)},

		// Order of the checks.
		{name: "created too old wins over deadline in the past", created: -time.Hour, deadline: -30 * time.Minute,
			wantErr: "more than 15 minutes in the past"},
		{name: "created too old wins over created after deadline", created: -time.Hour, deadline: -2 * time.Hour,
			wantErr: "Created timestamp"},
		{name: "created in the future wins over created after deadline", created: time.Hour, deadline: 30 * time.Minute,
			wantErr: "more than 15 minutes in the future"},
		{name: "created after deadline wins over deadline in the past", created: -time.Minute, deadline: -2 * time.Minute,
			wantErr: "cannot be before created"},
		{name: "deadline too far wins over bad expires", deadline: maxLife + time.Hour, expires: expires(time.Hour),
			wantErr: "more than 5 days into the future"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := validInput()
			in.Created, in.Deadline, in.Expires = qt(tt.created), qt(tt.deadline), tt.expires
			task, err := queue.BuildTask(testTaskID, in, at(0), 0)
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.Equal(t, qt(tt.created), task.Created)
				require.Equal(t, qt(tt.deadline), task.Deadline)
				return
			}
			requireKind(t, err, queue.KindInput)
			require.Contains(t, err.Error(), tt.wantErr)
			require.Nil(t, task)
		})
	}
}

// TestBuildTaskDefaultExpires checks expires = deadline + 1 calendar year.
func TestBuildTaskDefaultExpires(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		now      time.Time
		deadline string
		want     string
	}{
		{"ordinary", epoch(), "2024-05-02T12:00:00.500Z", "2025-05-02T12:00:00.500Z"},
		{"leap day rolls over like JavaScript's setFullYear",
			time.Date(2028, 2, 28, 0, 0, 0, 0, time.UTC), "2028-02-29T12:00:00.000Z", "2029-03-01T12:00:00.000Z"},
		{"year end", time.Date(2024, 12, 31, 0, 0, 0, 0, time.UTC), "2024-12-31T23:59:59.999Z", "2025-12-31T23:59:59.999Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := validInput()
			in.Created = queue.NewTime(tt.now)
			var err error
			in.Deadline, err = queue.ParseTime(tt.deadline)
			require.NoError(t, err)
			task, err := queue.BuildTask(testTaskID, in, tt.now, 0)
			require.NoError(t, err)
			require.Equal(t, tt.want, task.Expires.String())
		})
	}
}

// TestBuildTaskDefaults checks every default of docs/contract/queue.md §3.1 on a
// minimal input.
func TestBuildTaskDefaults(t *testing.T) {
	t.Parallel()
	in := validInput()
	in.Payload = nil
	task, err := queue.BuildTask(testTaskID, in, at(0), 0)
	require.NoError(t, err)
	require.Equal(t, &queue.Task{
		ProvisionerID: "proj-x",
		WorkerType:    "builder",
		TaskQueueID:   "proj-x/builder",
		SchedulerID:   "-",
		ProjectID:     "none",
		TaskGroupID:   testTaskID,
		Dependencies:  []string{},
		Requires:      queue.RequiresAllCompleted,
		Routes:        []string{},
		Priority:      "lowest",
		Retries:       queue.DefaultRetries,
		Created:       qt(0),
		Deadline:      qt(24 * time.Hour),
		Expires:       queue.NewTime(at(24*time.Hour).AddDate(1, 0, 0)),
		Scopes:        []string{},
		Payload:       json.RawMessage(`{}`),
		Metadata:      in.Metadata,
		Tags:          map[string]string{},
		Extra:         json.RawMessage(`{}`),
	}, task)

	// The task endpoint renders empty collections, never null.
	out, err := json.Marshal(task)
	require.NoError(t, err)
	require.JSONEq(t, `{
		"provisionerId": "proj-x", "workerType": "builder", "taskQueueId": "proj-x/builder",
		"schedulerId": "-", "projectId": "none", "taskGroupId": "`+testTaskID+`",
		"dependencies": [], "requires": "all-completed", "routes": [], "priority": "lowest",
		"retries": 5, "created": "2024-05-01T12:00:00.000Z", "deadline": "2024-05-02T12:00:00.000Z",
		"expires": "2025-05-02T12:00:00.000Z", "scopes": [], "payload": {},
		"metadata": {"name": "n", "description": "d", "owner": "o@example.com", "source": "https://example.com"},
		"tags": {}, "extra": {}
	}`, string(out))
}

// TestBuildTaskExplicitValues checks that given values are kept as given.
func TestBuildTaskExplicitValues(t *testing.T) {
	t.Parallel()
	zero := 0
	in := validInput()
	in.SchedulerID = "gecko-level-3"
	in.ProjectID = "gecko"
	in.TaskGroupID = "cccccccccccccccccccccc"
	in.Dependencies = []string{"bbbbbbbbbbbbbbbbbbbbbb", "aaaaaaaaaaaaaaaaaaaaaa"}
	in.Requires = queue.RequiresAllResolved
	in.Routes = []string{"index.b", "index.a"}
	in.Priority = "very-high"
	in.Retries = &zero
	in.Expires = qtp(48 * time.Hour)
	in.Scopes = []string{"secrets:get:x", "queue:*"}
	in.Tags = map[string]string{"kind": "build"}
	in.Extra = json.RawMessage(`{"x":[1,2]}`)

	task, err := queue.BuildTask(testTaskID, in, at(0), 0)
	require.NoError(t, err)
	require.Equal(t, "gecko-level-3", task.SchedulerID)
	require.Equal(t, "gecko", task.ProjectID)
	require.Equal(t, "cccccccccccccccccccccc", task.TaskGroupID)
	require.Equal(t, in.Dependencies, task.Dependencies)
	require.Equal(t, queue.RequiresAllResolved, task.Requires)
	require.Equal(t, in.Routes, task.Routes)
	require.Equal(t, "very-high", task.Priority)
	require.Equal(t, 0, task.Retries, "an explicit 0 is not replaced by the default")
	require.Equal(t, qt(48*time.Hour), task.Expires)
	require.Equal(t, in.Scopes, task.Scopes)
	require.Equal(t, in.Tags, task.Tags)
	require.JSONEq(t, `{"x":[1,2]}`, string(task.Extra))
	require.JSONEq(t, `{"image":"alpine"}`, string(task.Payload))
}

func TestBuildTaskPriority(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"", "lowest"}, {"normal", "lowest"}, {"lowest", "lowest"}, {"high", "high"}, {"highest", "highest"},
	} {
		t.Run(fmt.Sprintf("%q", tt.in), func(t *testing.T) {
			t.Parallel()
			in := validInput()
			in.Priority = tt.in
			task, err := queue.BuildTask(testTaskID, in, at(0), 0)
			require.NoError(t, err)
			require.Equal(t, tt.want, task.Priority)
		})
	}
}

// TestBuildTaskCanonicalDates checks that stored dates are UTC milliseconds
// whatever precision and zone the input Time values carry.
func TestBuildTaskCanonicalDates(t *testing.T) {
	t.Parallel()
	zone := time.FixedZone("UTC-7", -7*3600)
	in := validInput()
	in.Created = queue.Time{Time: at(789_654 * time.Microsecond).In(zone)}
	in.Deadline = queue.Time{Time: at(24*time.Hour + 999_999*time.Nanosecond).In(zone)}
	in.Expires = &queue.Time{Time: at(48*time.Hour + 1500*time.Microsecond).In(zone)}
	task, err := queue.BuildTask(testTaskID, in, at(0), 0)
	require.NoError(t, err)
	require.Equal(t, qt(789*time.Millisecond), task.Created)
	require.Equal(t, qt(24*time.Hour), task.Deadline)
	require.Equal(t, qt(48*time.Hour+time.Millisecond), task.Expires)
	out, err := json.Marshal(task)
	require.NoError(t, err)
	require.Contains(t, string(out), `"created":"2024-05-01T12:00:00.789Z"`)
	require.Contains(t, string(out), `"deadline":"2024-05-02T12:00:00.000Z"`)
	require.Contains(t, string(out), `"expires":"2024-05-03T12:00:00.001Z"`)
}

// TestBuildTaskScopes checks step 7: no scope may end in `**`.
func TestBuildTaskScopes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		scopes  []string
		wantErr bool
	}{
		{[]string{"queue:*"}, false},
		{[]string{"*"}, false},
		{[]string{"a**b"}, false},
		{[]string{"queue:**"}, true},
		{[]string{"**"}, true},
		{[]string{"fine", "secrets:get:**"}, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.scopes), func(t *testing.T) {
			t.Parallel()
			in := validInput()
			in.Scopes = tt.scopes
			task, err := queue.BuildTask(testTaskID, in, at(0), 0)
			if tt.wantErr {
				requireKind(t, err, queue.KindInput)
				require.Contains(t, err.Error(), "**")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.scopes, task.Scopes)
		})
	}
}

// TestBuildTaskDependencyLimit checks step 3 against the deployment limit,
// which can lower but never raise the schema's 10000.
func TestBuildTaskDependencyLimit(t *testing.T) {
	t.Parallel()
	deps := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("dep%019d", i)
		}
		return out
	}
	tests := []struct {
		name    string
		count   int
		limit   int
		wantErr bool
	}{
		{"at a lowered limit", 2, 2, false},
		{"over a lowered limit", 3, 2, true},
		{"no limit configured: at 10000", queue.MaxDependencies, 0, false},
		{"no limit configured: over 10000", queue.MaxDependencies + 1, 0, true},
		{"limit above 10000 is capped", queue.MaxDependencies + 1, 20000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := validInput()
			in.Dependencies = deps(tt.count)
			task, err := queue.BuildTask(testTaskID, in, at(0), tt.limit)
			if tt.wantErr {
				requireKind(t, err, queue.KindInput)
				require.Contains(t, err.Error(), "dependencies")
				return
			}
			require.NoError(t, err)
			require.Len(t, task.Dependencies, tt.count)
		})
	}
}

// TestBuildTaskStepOrder checks which failure wins when an input breaks
// several of §3.4's steps: identity (2), dependency count (3), dates (6),
// scopes (7).
func TestBuildTaskStepOrder(t *testing.T) {
	t.Parallel()
	badDates := func(in *queue.CreateTaskInput) { in.Deadline = qt(-time.Hour); in.Created = qt(-2 * time.Hour) }
	tests := []struct {
		name    string
		mutate  []func(in *queue.CreateTaskInput)
		wantErr string
	}{
		{"identity before dependencies", []func(*queue.CreateTaskInput){
			func(in *queue.CreateTaskInput) { in.TaskQueueID = "" },
			func(in *queue.CreateTaskInput) { in.Dependencies = []string{"a", "b", "c"} },
		}, "taskQueueId"},
		{"dependencies before dates", []func(*queue.CreateTaskInput){
			func(in *queue.CreateTaskInput) { in.Dependencies = []string{"a", "b", "c"} },
			badDates,
		}, "too many dependencies"},
		{"dates before scopes", []func(*queue.CreateTaskInput){
			badDates,
			func(in *queue.CreateTaskInput) { in.Scopes = []string{"x:**"} },
		}, "Created timestamp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := validInput()
			for _, m := range tt.mutate {
				m(&in)
			}
			_, err := queue.BuildTask(testTaskID, in, at(0), 2)
			requireKind(t, err, queue.KindInput)
			require.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

// TestBuildTaskFromJSON runs a request body through decoding and BuildTask,
// as the API layer does, and checks the canonical output.
func TestBuildTaskFromJSON(t *testing.T) {
	t.Parallel()
	body := `{
		"provisionerId": "proj-x", "workerType": "builder",
		"created": "2024-05-01T12:00:00.000123Z",
		"deadline": "2024-05-01T13:00:00.5+00:00",
		"priority": "normal",
		"payload": {"b": 1, "a": [2, 1]},
		"metadata": {"name": "n", "description": "d", "owner": "o@example.com", "source": "https://example.com"}
	}`
	var in queue.CreateTaskInput
	require.NoError(t, json.Unmarshal([]byte(body), &in))
	task, err := queue.BuildTask(testTaskID, in, at(0), 0)
	require.NoError(t, err)
	out, err := json.Marshal(task)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(out, &got))
	require.Equal(t, "proj-x/builder", got["taskQueueId"])
	require.Equal(t, "2024-05-01T12:00:00.000Z", got["created"])
	require.Equal(t, "2024-05-01T13:00:00.500Z", got["deadline"])
	require.Equal(t, "2025-05-01T13:00:00.500Z", got["expires"])
	require.Equal(t, "lowest", got["priority"])
	require.Equal(t, map[string]any{"b": 1.0, "a": []any{2.0, 1.0}}, got["payload"])
}
