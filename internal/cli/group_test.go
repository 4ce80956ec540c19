package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

func member(taskID, name, state string) tcclient.TaskGroupMember {
	return tcclient.TaskGroupMember{
		Status: tcclient.TaskStatus{TaskID: taskID, TaskGroupID: taskB, State: state},
		Task:   tcclient.TaskDefinition{Metadata: tcclient.TaskMetadata{Name: name}},
	}
}

func TestSummarizeAndRenderGroup(t *testing.T) {
	t.Parallel()
	members := []tcclient.TaskGroupMember{
		member("t1", "build linux", tcclient.StateCompleted),
		member("t2", "build mac", tcclient.StateRunning),
		member("t3", "", tcclient.StateRunning),
		member("t4", "lint", tcclient.StateFailed),
		member("t5", "docs", tcclient.StatePending),
		member("t6", "deploy", tcclient.StateUnscheduled),
		member("t7", "a", tcclient.StateRunning),
		member("t8", "b", tcclient.StateRunning),
	}
	s := SummarizeGroup(taskB, members, nil)
	require.Equal(t, 8, s.Total)
	require.Equal(t, 2, s.Resolved)
	require.False(t, s.Done)
	require.False(t, s.Success)
	require.Equal(t, map[string]int{"unscheduled": 1, "pending": 1, "running": 4, "completed": 1, "failed": 1, "exception": 0}, s.Counts)

	require.Equal(t, []string{
		"Task group aGQjzPjDTCGGZHZdHO9Jkw: 2/8 resolved",
		"[##########------------------------------]  25%",
		"  unscheduled     1",
		"  pending         1",
		"  running         4  build mac, t3, a, +1 more",
		"  completed       1",
		"  failed          1  lint",
		"  exception       0",
	}, RenderGroupFrame(s, false))
	require.Equal(t, "Task group aGQjzPjDTCGGZHZdHO9Jkw: 2/8 resolved (unscheduled 1, pending 1, running 4, completed 1, failed 1, exception 0)",
		RenderGroupLine(s))

	colored := RenderGroupFrame(s, true)
	require.Equal(t, "  \x1b[31mfailed\x1b[0m          1  lint", colored[6])

	done := SummarizeGroup(taskB, []tcclient.TaskGroupMember{member("t1", "x", tcclient.StateCompleted)}, nil)
	require.True(t, done.Done)
	require.True(t, done.Success)
	require.Equal(t, "[########################################] 100%", RenderGroupFrame(done, false)[1])

	empty := SummarizeGroup(taskB, nil, nil)
	require.True(t, empty.Success, "an empty group has nothing left to do")
	require.Equal(t, []GroupTask{}, empty.Tasks)
}

func TestProgressBar(t *testing.T) {
	t.Parallel()
	require.Equal(t, "[----]", progressBar(0, 3, 4))
	require.Equal(t, "[#---]", progressBar(1, 3, 4))
	require.Equal(t, "[##--]", progressBar(2, 3, 4))
	require.Equal(t, "[####]", progressBar(3, 3, 4))
	require.Equal(t, "[####]", progressBar(0, 0, 4))
}

func TestFrameWriterRedrawsInPlace(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	f := &frameWriter{w: &b}
	f.draw([]string{"a", "b", "c"})
	require.Equal(t, "\x1b[2Ka\n\x1b[2Kb\n\x1b[2Kc\n\x1b[J", b.String())
	b.Reset()
	f.draw([]string{"x"})
	require.Equal(t, "\x1b[3F\x1b[2Kx\n\x1b[J", b.String())
	b.Reset()
	f.draw([]string{"x"})
	require.Empty(t, b.String(), "an unchanged frame is not redrawn")
	f.draw([]string{"y", "z"})
	require.Equal(t, "\x1b[1F\x1b[2Ky\n\x1b[2Kz\n\x1b[J", b.String())
}

// groupCanned serves a two-task group that finishes after three polls, the
// second task ending in last.
func groupCanned(t *testing.T, last string) *cannedQueue {
	canned := newCannedQueue(t)
	canned.groupPolls = func(n int) []tcclient.TaskGroupMember {
		switch n {
		case 0:
			return []tcclient.TaskGroupMember{member(taskA, "build", tcclient.StateRunning), member(taskB, "test", tcclient.StatePending)}
		case 1:
			return []tcclient.TaskGroupMember{member(taskA, "build", tcclient.StateCompleted), member(taskB, "test", tcclient.StateRunning)}
		default:
			return []tcclient.TaskGroupMember{member(taskA, "build", tcclient.StateCompleted), member(taskB, "test", last)}
		}
	}
	return canned
}

func TestGroupCommand(t *testing.T) {
	t.Parallel()
	t.Run("plain lines until every task completed", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, groupCanned(t, tcclient.StateCompleted).URL, nil)
		require.NoError(t, h.exec(context.Background(), "group", "--watch", taskB))
		require.Equal(t, `Task group aGQjzPjDTCGGZHZdHO9Jkw: 0/2 resolved (unscheduled 0, pending 1, running 1, completed 0, failed 0, exception 0)
Task group aGQjzPjDTCGGZHZdHO9Jkw: 1/2 resolved (unscheduled 0, pending 0, running 1, completed 1, failed 0, exception 0)
Task group aGQjzPjDTCGGZHZdHO9Jkw: 2/2 resolved (unscheduled 0, pending 0, running 0, completed 2, failed 0, exception 0)
`, h.stdout.String())
	})
	t.Run("terminal redraws and a failure exits 1", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, groupCanned(t, tcclient.StateFailed).URL, nil)
		h.env.TTY = true
		h.vars["NO_COLOR"] = "1"
		err := h.exec(context.Background(), "group", "--watch", taskB)
		require.Equal(t, ExitFailed, exitCode(err))
		require.EqualError(t, err, "task group "+taskB+": 1 of 2 tasks did not complete (1 failed, 0 exception)")
		out := h.stdout.String()
		require.Equal(t, 2, strings.Count(out, "\x1b[8F"), "two redraws of the eight-line frame")
		require.Contains(t, out, "\x1b[2K[####################--------------------]  50%\n")
		require.True(t, strings.HasSuffix(out, "\x1b[2K  exception       0\n\x1b[Jfailed  "+taskB+"  test\n"), out)
	})
	t.Run("json prints the final summary only", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, groupCanned(t, tcclient.StateException).URL, nil)
		err := h.exec(context.Background(), "group", "--watch", "--json", taskB)
		require.Equal(t, ExitFailed, exitCode(err))
		var s GroupSummary
		require.NoError(t, json.Unmarshal([]byte(h.stdout.String()), &s))
		require.Equal(t, GroupSummary{
			TaskGroupID: taskB, Total: 2, Resolved: 2, Done: true, Success: false,
			Counts: map[string]int{"unscheduled": 0, "pending": 0, "running": 0, "completed": 1, "failed": 0, "exception": 1},
			Tasks: []GroupTask{
				{TaskID: taskA, Name: "build", State: "completed"},
				{TaskID: taskB, Name: "test", State: "exception"},
			},
		}, s)
	})
	t.Run("without --watch lists once", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, groupCanned(t, tcclient.StateCompleted).URL, nil)
		require.NoError(t, h.exec(context.Background(), "group", taskB))
		require.Equal(t, `Task group aGQjzPjDTCGGZHZdHO9Jkw: 0/2 resolved (unscheduled 0, pending 1, running 1, completed 0, failed 0, exception 0)
running      `+taskA+`  build
pending      `+taskB+`  test
`, h.stdout.String())
	})
	t.Run("a listing with a failed task exits 1", func(t *testing.T) {
		t.Parallel()
		canned := newCannedQueue(t)
		canned.groupPolls = func(int) []tcclient.TaskGroupMember {
			return []tcclient.TaskGroupMember{member(taskA, "build", tcclient.StateFailed), member(taskB, "test", tcclient.StatePending)}
		}
		h := newHarness(t, canned.URL, nil)
		err := h.exec(context.Background(), "group", "--json", taskB)
		require.Equal(t, ExitFailed, exitCode(err))
		var s GroupSummary
		require.NoError(t, json.Unmarshal([]byte(h.stdout.String()), &s))
		require.False(t, s.Done)
		require.Equal(t, 1, s.Counts["failed"])
	})
	t.Run("unknown group", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, newCannedQueue(t).URL, nil)
		err := h.exec(context.Background(), "group", taskA)
		require.Equal(t, ExitFailed, exitCode(err))
		require.EqualError(t, err, "listing task group "+taskA+": ResourceNotFound (HTTP 404): no such thing")
	})
}

// dependent is a member that waits for deps.
func dependent(taskID, name, state, requires string, deps ...string) tcclient.TaskGroupMember {
	m := member(taskID, name, state)
	m.Task.Dependencies, m.Task.Requires = deps, requires
	return m
}

const taskC = "ZB6WE4WJS9i0ZljHLp1TfQ"

func TestBlockedBy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		members []tcclient.TaskGroupMember
		blocked map[string]string
		stuck   bool
	}{
		{"a failed dependency blocks, transitively", []tcclient.TaskGroupMember{
			member(taskA, "build", tcclient.StateFailed),
			dependent(taskB, "test", tcclient.StateUnscheduled, "", taskA),
			dependent(taskC, "deploy", tcclient.StateUnscheduled, "all-completed", taskB),
		}, map[string]string{taskB: taskA, taskC: taskB}, true},
		{"an exception blocks", []tcclient.TaskGroupMember{
			member(taskA, "build", tcclient.StateException),
			dependent(taskB, "test", tcclient.StateUnscheduled, "", taskA),
		}, map[string]string{taskB: taskA}, true},
		{"all-resolved waits for the blocked task's deadline", []tcclient.TaskGroupMember{
			member(taskA, "build", tcclient.StateFailed),
			dependent(taskB, "test", tcclient.StateUnscheduled, "", taskA),
			dependent(taskC, "report", tcclient.StateUnscheduled, "all-resolved", taskB),
		}, map[string]string{taskB: taskA}, false},
		{"a running dependency blocks nothing", []tcclient.TaskGroupMember{
			member(taskA, "build", tcclient.StateRunning),
			dependent(taskB, "test", tcclient.StateUnscheduled, "", taskA),
		}, map[string]string{}, false},
		{"a task may name itself", []tcclient.TaskGroupMember{
			dependent(taskA, "self", tcclient.StateUnscheduled, "", taskA),
		}, map[string]string{}, false},
		{"something else can still run", []tcclient.TaskGroupMember{
			member(taskA, "build", tcclient.StateFailed),
			dependent(taskB, "test", tcclient.StateUnscheduled, "", taskA),
			member(taskC, "lint", tcclient.StatePending),
		}, map[string]string{taskB: taskA}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := SummarizeGroup(taskB, tc.members, nil)
			got := map[string]string{}
			for _, task := range s.Tasks {
				if task.BlockedBy != "" {
					got[task.TaskID] = task.BlockedBy
				}
			}
			require.Equal(t, tc.blocked, got)
			require.Equal(t, len(tc.blocked), s.Blocked)
			require.Equal(t, tc.stuck, s.Stuck)
		})
	}
	t.Run("a dependency outside the group", func(t *testing.T) {
		t.Parallel()
		s := SummarizeGroup(taskB, []tcclient.TaskGroupMember{dependent(taskB, "test", tcclient.StateUnscheduled, "", taskA)},
			map[string]depNode{taskA: {ID: taskA, State: tcclient.StateFailed}})
		require.Equal(t, taskA, s.Tasks[0].BlockedBy)
		require.True(t, s.Stuck)
	})
}

// TestGroupWatchEndsWhenNothingMoreCanRun: a failed step leaves its
// dependents unscheduled until their deadlines; the watch ends at once,
// exits 1 and says which task blocked which.
func TestGroupWatchEndsWhenNothingMoreCanRun(t *testing.T) {
	t.Parallel()
	canned := newCannedQueue(t)
	canned.groupPolls = func(n int) []tcclient.TaskGroupMember {
		build := tcclient.StateRunning
		if n > 0 {
			build = tcclient.StateFailed
		}
		return []tcclient.TaskGroupMember{
			member(taskA, "build", build),
			dependent(taskC, "test", tcclient.StateUnscheduled, "", taskA),
		}
	}
	h := newHarness(t, canned.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := h.exec(ctx, "group", "--watch", taskB)
	require.NoError(t, ctx.Err(), "the watch ended by itself")
	require.Equal(t, ExitFailed, exitCode(err))
	require.EqualError(t, err, "task group "+taskB+": 2 of 2 tasks did not complete (1 failed, 0 exception, 1 blocked); nothing more can run")
	require.Equal(t, `Task group aGQjzPjDTCGGZHZdHO9Jkw: 0/2 resolved (unscheduled 1, pending 0, running 1, completed 0, failed 0, exception 0)
Task group aGQjzPjDTCGGZHZdHO9Jkw: 1/2 resolved (unscheduled 1 (1 blocked), pending 0, running 0, completed 0, failed 1, exception 0)
failed  `+taskA+`  build
unscheduled  `+taskC+`  test  blocked by `+taskA+` (build, failed)
`, h.stdout.String())
}
