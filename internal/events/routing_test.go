package events

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func intPtr(i int) *int { return &i }

// TestTaskRoutingKeySpecExample reproduces the example of the events
// specification (§6.2) word for word.
func TestTaskRoutingKeySpecExample(t *testing.T) {
	t.Parallel()
	base := TaskKeyParts{
		TaskID:        "fN1SbArXTPSVFNUvaOlinQ",
		ProvisionerID: "proj-x",
		WorkerType:    "builder",
		SchedulerID:   "-",
		TaskGroupID:   "fN1SbArXTPSVFNUvaOlinQ",
	}
	defined := base
	pending := base
	pending.RunID = intPtr(0)
	running := pending
	running.WorkerGroup, running.WorkerID = "wg-1", "w-7"

	tests := []struct {
		name  string
		parts TaskKeyParts
		want  string
	}{
		{"task-defined", defined, "primary.fN1SbArXTPSVFNUvaOlinQ._._._.proj-x.builder.-.fN1SbArXTPSVFNUvaOlinQ._"},
		{"task-pending", pending, "primary.fN1SbArXTPSVFNUvaOlinQ.0._._.proj-x.builder.-.fN1SbArXTPSVFNUvaOlinQ._"},
		{"task-running", running, "primary.fN1SbArXTPSVFNUvaOlinQ.0.wg-1.w-7.proj-x.builder.-.fN1SbArXTPSVFNUvaOlinQ._"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, tt.parts.Validate())
			got := TaskRoutingKey(tt.parts)
			require.Equal(t, tt.want, got)
			require.Len(t, strings.Split(got, "."), 10)
		})
	}

	require.Equal(t,
		[]string{"route.index.foo.bar", "route.notify.email.a@b.c.on-failed"},
		RouteCCs([]string{"index.foo.bar", "notify.email.a@b.c.on-failed"}))
}

func TestTaskRoutingKeyLargeRunID(t *testing.T) {
	t.Parallel()
	p := TaskKeyParts{TaskID: "t", RunID: intPtr(49), ProvisionerID: "p", WorkerType: "w", SchedulerID: "s", TaskGroupID: "g"}
	require.Equal(t, "primary.t.49._._.p.w.s.g._", TaskRoutingKey(p))
}

func TestTaskKeyPartsValidate(t *testing.T) {
	t.Parallel()
	valid := TaskKeyParts{
		TaskID: "fN1SbArXTPSVFNUvaOlinQ", RunID: intPtr(3), WorkerGroup: "wg", WorkerID: "w",
		ProvisionerID: "p", WorkerType: "wt", SchedulerID: "-", TaskGroupID: "fN1SbArXTPSVFNUvaOlinQ",
	}
	tests := []struct {
		name    string
		mutate  func(*TaskKeyParts)
		wantErr string
	}{
		{"valid", func(*TaskKeyParts) {}, ""},
		{"no optional parts", func(p *TaskKeyParts) { p.RunID, p.WorkerGroup, p.WorkerID = nil, "", "" }, ""},
		{"missing taskId", func(p *TaskKeyParts) { p.TaskID = "" }, "taskId is required"},
		{"missing provisionerId", func(p *TaskKeyParts) { p.ProvisionerID = "" }, "provisionerId is required"},
		{"missing workerType", func(p *TaskKeyParts) { p.WorkerType = "" }, "workerType is required"},
		{"missing schedulerId", func(p *TaskKeyParts) { p.SchedulerID = "" }, "schedulerId is required"},
		{"missing taskGroupId", func(p *TaskKeyParts) { p.TaskGroupID = "" }, "taskGroupId is required"},
		{"taskId too long", func(p *TaskKeyParts) { p.TaskID = strings.Repeat("a", 23) }, "longer than 22"},
		{"workerId too long", func(p *TaskKeyParts) { p.WorkerID = strings.Repeat("a", 39) }, "longer than 38"},
		{"workerId at limit", func(p *TaskKeyParts) { p.WorkerID = strings.Repeat("a", 38) }, ""},
		{"dot in workerGroup", func(p *TaskKeyParts) { p.WorkerGroup = "us.east" }, "contains a dot"},
		{"dot in provisionerId", func(p *TaskKeyParts) { p.ProvisionerID = "a.b" }, "contains a dot"},
		{"negative runId", func(p *TaskKeyParts) { p.RunID = intPtr(-1) }, "out of range"},
		{"four-digit runId", func(p *TaskKeyParts) { p.RunID = intPtr(1000) }, "out of range"},
		{"three-digit runId", func(p *TaskKeyParts) { p.RunID = intPtr(999) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := valid
			tt.mutate(&p)
			err := p.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestGroupRoutingKey(t *testing.T) {
	t.Parallel()
	require.Equal(t, "primary.fN1SbArXTPSVFNUvaOlinQ.-._", GroupRoutingKey("fN1SbArXTPSVFNUvaOlinQ", "-"))
	require.NoError(t, validateGroupKey("fN1SbArXTPSVFNUvaOlinQ", "-"))
	require.ErrorContains(t, validateGroupKey("", "-"), "taskGroupId is required")
	require.ErrorContains(t, validateGroupKey("g", "a.b"), "contains a dot")
	require.ErrorContains(t, validateGroupKey("g", strings.Repeat("s", 39)), "longer than 38")
}

func TestRouteCCs(t *testing.T) {
	t.Parallel()
	require.Nil(t, RouteCCs(nil))
	require.Nil(t, RouteCCs([]string{}))
	require.Equal(t, []string{"route.a"}, RouteCCs([]string{"a"}))
}

func TestMatchTopic(t *testing.T) {
	t.Parallel()
	const key = "primary.fN1SbArXTPSVFNUvaOlinQ.0.wg-1.w-7.proj-x.builder.-.fN1SbArXTPSVFNUvaOlinQ._"
	tests := []struct {
		pattern, key string
		want         bool
	}{
		// What the official clients generate (§6.4).
		{"primary.fN1SbArXTPSVFNUvaOlinQ.*.*.*.*.*.*.*.#", key, true},
		{"primary.other.*.*.*.*.*.*.*.#", key, false},
		{"primary.*.*.*.*.proj-x.builder.*.*.#", key, true},
		{"primary.*.*.*.*.proj-x.tester.*.*.#", key, false},
		{"primary.fN1SbArXTPSVFNUvaOlinQ.#", key, true},
		{"#", key, true},
		{"#", "", true},
		{key, key, true},
		// "*" is exactly one word.
		{"primary.*", "primary.a", true},
		{"primary.*", "primary", false},
		{"primary.*", "primary.a.b", false},
		// "#" is zero or more words, anywhere.
		{"route.index.#", "route.index", true},
		{"route.index.#", "route.index.foo.bar", true},
		{"route.index.#", "route.indexer.foo", false},
		{"route.#.bar", "route.index.foo.bar", true},
		{"route.#.bar", "route.bar", true},
		{"route.#.bar", "route.index.foo.baz", false},
		{"#.on-failed", "route.notify.email.a@b.c.on-failed", true},
		{"#.#", "a", true},
		{"*.#.*", "a", false},
		{"*.#.*", "a.b", true},
		{"a.*.#", "a", false},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+"~"+tt.key, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, MatchTopic(tt.pattern, tt.key))
		})
	}
}
