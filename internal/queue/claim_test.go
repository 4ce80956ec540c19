package queue_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
)

// run is a pending run of the claim-rule tests: priority p, pending as the
// seq-th, under key ("" for none), owned by scheduler "s" and project
// "p" unless changed, with its deadline a day after epoch.
func run(id, p string, seq int64, key string) queue.PendingRun {
	return queue.PendingRun{TaskID: id, Priority: p, Seq: seq, FlowKey: key, Deadline: at(taskLife),
		SchedulerID: "s", ProjectID: "p"}
}

func ids(runs []queue.PendingRun) []string {
	out := []string{}
	for _, r := range runs {
		out = append(out, r.TaskID)
	}
	return out
}

func TestClaimOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b queue.PendingRun
		want int
	}{
		{"higher priority first", run("a", "high", 9, ""), run("b", "low", 1, ""), -1},
		{"lower priority later", run("a", "lowest", 1, ""), run("b", "very-low", 9, ""), 1},
		{"normal weighs as lowest", run("a", "normal", 1, ""), run("b", "lowest", 2, ""), -1},
		{"same priority: pending first goes first", run("a", "medium", 2, ""), run("b", "medium", 3, "k"), -1},
		{"same priority, pending later", run("a", "medium", 5, "k"), run("b", "medium", 3, ""), 1},
		{"same run", run("a", "high", 4, ""), run("a", "high", 4, ""), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, queue.ClaimOrder(tt.a, tt.b))
		})
	}
}

func TestFlowKeyHasRoom(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		key  queue.FlowKeyState
		want bool
	}{
		{"nothing pending", queue.FlowKeyState{Limit: 0, Pending: 0}, false},
		{"no limit", queue.FlowKeyState{Pending: 3, Running: 50}, true},
		{"under its limit", queue.FlowKeyState{Limit: 2, Pending: 1, Running: 1}, true},
		{"at its limit", queue.FlowKeyState{Limit: 2, Pending: 1, Running: 2}, false},
		{"over its limit (lowered by a newer task)", queue.FlowKeyState{Limit: 1, Pending: 1, Running: 3}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tt.key.HasRoom())
		})
	}
}

func TestKeysInTurn(t *testing.T) {
	t.Parallel()
	key := func(name string, claimed time.Duration, running int) queue.FlowKeyState {
		k := queue.FlowKeyState{Key: name, Limit: 1, Pending: 1, Running: running}
		if claimed > 0 {
			k.LastClaimed = at(claimed)
		}
		return k
	}
	keys := []queue.FlowKeyState{key("d", 3*time.Second, 0), key("c", 0, 0), key("b", time.Second, 0), key("full", 0, 1), key("a", time.Second, 0)}
	tests := []struct {
		name  string
		count int
		want  []string
	}{
		{"never claimed first, then least recently, ties by key", 10, []string{"c", "a", "b", "d"}},
		{"as many as the claim asks for", 2, []string{"c", "a"}},
		{"none", 0, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := []string{}
			for _, k := range queue.KeysInTurn(keys, tt.count) {
				got = append(got, k.Key)
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestNextOfKey(t *testing.T) {
	t.Parallel()
	late := run("late", "highest", 0, "k")
	late.Deadline = at(time.Minute)
	runs := []queue.PendingRun{
		run("old-low", "low", 1, "k"), run("mid-high", "high", 2, "k"), run("new-high", "high", 3, "k"),
		run("newest-low", "low", 4, "k"), run("other", "highest", 5, "j"), run("plain", "highest", 6, ""), late,
	}
	tests := []struct {
		name string
		key  queue.FlowKeyState
		now  time.Time
		want string
	}{
		{"first in claim order", queue.FlowKeyState{Key: "k", Pending: 5}, at(0), "late"},
		{"past its deadline a task is not offered", queue.FlowKeyState{Key: "k", Pending: 5}, at(time.Hour), "mid-high"},
		{"supersede offers the newest, whatever its priority", queue.FlowKeyState{Key: "k", Supersede: true, Pending: 5}, at(time.Hour), "newest-low"},
		{"a key without claimable tasks offers none", queue.FlowKeyState{Key: "none", Pending: 1}, at(0), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := queue.NextOfKey(tt.key, runs, tt.now)
			require.Equal(t, tt.want != "", ok)
			require.Equal(t, tt.want, got.TaskID)
		})
	}
}

func TestSupersedes(t *testing.T) {
	t.Parallel()
	by := run("by", "low", 5, "k")
	otherProject := run("o", "low", 1, "k")
	otherProject.ProjectID = "elsewhere"
	otherScheduler := run("o", "low", 1, "k")
	otherScheduler.SchedulerID = "elsewhere"
	tests := []struct {
		name  string
		other queue.PendingRun
		want  bool
	}{
		{"older task of the key", run("o", "highest", 1, "k"), true},
		{"newer task of the key", run("o", "low", 6, "k"), false},
		{"itself", by, false},
		{"another key", run("o", "low", 1, "j"), false},
		{"a plain task", run("o", "low", 1, ""), false},
		{"another project", otherProject, false},
		{"another scheduler", otherScheduler, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, queue.Supersedes(by, tt.other))
		})
	}
}

func TestCancelsInProgress(t *testing.T) {
	t.Parallel()
	def := func(key string, cancel bool, mutate ...func(*queue.Task)) queue.Task {
		d := queue.Task{TaskQueueID: "p/w", SchedulerID: "s", ProjectID: "p", Deadline: qt(taskLife)}
		if key != "" {
			d.Flow = &queue.FlowPolicy{Key: key, CancelInProgress: cancel, Limit: 1}
		}
		for _, m := range mutate {
			m(&d)
		}
		return d
	}
	running := func(id string, d queue.Task) *queue.TaskState {
		ts := queue.NewTaskState(id, d)
		var tr queue.Transition
		require.NoError(t, ts.Schedule(at(0), &tr))
		require.NoError(t, ts.Claim(0, "g", "w", at(0), at(time.Minute), &tr))
		return ts
	}
	pending := queue.NewTaskState("pending", def("k", false))
	var tr queue.Transition
	require.NoError(t, pending.Schedule(at(0), &tr))
	newDef := def("k", true)
	tests := []struct {
		name  string
		def   queue.Task
		other *queue.TaskState
		want  bool
	}{
		{"a running task of the key", newDef, running("old", def("k", false)), true},
		{"without cancelInProgress", def("k", false), running("old", def("k", false)), false},
		{"itself", newDef, running("new", def("k", false)), false},
		{"a pending task", newDef, pending, false},
		{"another key", newDef, running("old", def("j", false)), false},
		{"a plain task", newDef, running("old", def("", false)), false},
		{"another task queue", newDef, running("old", def("k", false, func(d *queue.Task) { d.TaskQueueID = "p/x" })), false},
		{"another project", newDef, running("old", def("k", false, func(d *queue.Task) { d.ProjectID = "x" })), false},
		{"another scheduler", newDef, running("old", def("k", false, func(d *queue.Task) { d.SchedulerID = "x" })), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, queue.CancelsInProgress("new", &tt.def, tt.other))
		})
	}
}

func TestPlanClaim(t *testing.T) {
	t.Parallel()
	otherProject := run("k-other-project", "low", 2, "sup")
	otherProject.ProjectID = "elsewhere"
	tests := []struct {
		name           string
		runs           []queue.PendingRun
		keys           []queue.FlowKeyState
		count          int
		want           []string
		wantSuperseded map[string][]string
	}{
		{
			name:  "priority, then FIFO",
			runs:  []queue.PendingRun{run("a", "low", 1, ""), run("b", "high", 2, ""), run("c", "low", 3, ""), run("d", "high", 4, "")},
			count: 3,
			want:  []string{"b", "d", "a"},
		},
		{
			name: "one task per key and claim, competing with plain tasks",
			runs: []queue.PendingRun{run("k1", "high", 1, "k"), run("k2", "highest", 2, "k"), run("p1", "high", 3, ""),
				run("p2", "low", 4, "")},
			keys:  []queue.FlowKeyState{{Key: "k", Pending: 2}},
			count: 4,
			want:  []string{"k2", "p1", "p2"},
		},
		{
			name:  "a key at its limit offers nothing",
			runs:  []queue.PendingRun{run("k1", "highest", 1, "k"), run("p1", "low", 2, "")},
			keys:  []queue.FlowKeyState{{Key: "k", Limit: 1, Pending: 1, Running: 1}},
			count: 2,
			want:  []string{"p1"},
		},
		{
			name: "keys take turns: a claim for one run looks at one key",
			runs: []queue.PendingRun{run("a1", "lowest", 1, "a"), run("b1", "highest", 2, "b")},
			keys: []queue.FlowKeyState{{Key: "a", Pending: 1, LastClaimed: at(time.Second)},
				{Key: "b", Pending: 1, LastClaimed: at(2 * time.Second)}},
			count: 1,
			want:  []string{"a1"},
		},
		{
			name: "supersede hands out the newest and resolves the older of its owner",
			runs: []queue.PendingRun{run("k-old", "highest", 1, "sup"), otherProject, run("k-new", "low", 3, "sup"),
				run("p", "medium", 4, "")},
			keys:           []queue.FlowKeyState{{Key: "sup", Supersede: true, Pending: 3}},
			count:          2,
			want:           []string{"p", "k-new"},
			wantSuperseded: map[string][]string{"k-new": {"k-old"}},
		},
		{
			name:  "nothing to claim",
			keys:  []queue.FlowKeyState{{Key: "k", Pending: 0}},
			count: 5,
			want:  []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			plan := queue.PlanClaim(tt.runs, tt.keys, at(0), tt.count)
			require.Equal(t, tt.want, ids(plan.Runs))
			var superseded map[string][]string
			for by, runs := range plan.Superseded {
				if superseded == nil {
					superseded = map[string][]string{}
				}
				superseded[by] = ids(runs)
			}
			require.Equal(t, tt.wantSuperseded, superseded)
		})
	}
}
