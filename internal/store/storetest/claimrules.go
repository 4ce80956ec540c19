package storetest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
)

// claimRulesKey is a flow key of testClaimRules with its policy; limit -1
// makes every task declare a new limit (the newest task's policy wins).
type claimRulesKey struct {
	name             string
	limit            int
	supersede        bool
	cancelInProgress bool
}

var claimRulesKeys = []claimRulesKey{
	{name: "one-at-a-time", limit: 1},
	{name: "two-at-a-time", limit: 2},
	{name: "newest-wins", supersede: true},
	{name: "newest-wins-alone", supersede: true, limit: 1},
	{name: "replace-running", cancelInProgress: true, limit: 2},
	{name: "changing-limit", limit: -1},
}

// claimModel is what the claim rules know of the test queue: its pending
// runs, running tasks and flow keys, kept from what the test did.
type claimModel struct {
	pending []queue.PendingRun
	running map[string]*queue.TaskState
	keys    map[string]*queue.FlowKeyState
	seq     int64 // the runs made pending so far
}

func (m *claimModel) keyStates() []queue.FlowKeyState {
	var out []queue.FlowKeyState
	for _, k := range m.keys {
		out = append(out, *k)
	}
	return out
}

func (m *claimModel) dropPending(taskID string) {
	m.pending = slices.DeleteFunc(m.pending, func(r queue.PendingRun) bool { return r.TaskID == taskID })
}

func (m *claimModel) stopRunning(taskID string) {
	if k := m.running[taskID].Task.Flow; k.Keyed() {
		m.keys[k.Key].Running--
	}
	delete(m.running, taskID)
}

// testClaimRules checks the store against the claim rules as stated in Go
// (queue.PlanClaim, queue.CancelsInProgress), on randomized tasks:
// priorities, flow keys with limits, supersede and cancelInProgress, two
// projects. Every claim must take exactly the runs PlanClaim plans, in
// its order, and supersede exactly what it says; every create exactly
// cancel what CancelsInProgress allows. The seed is logged.
func testClaimRules(t *testing.T, open Opener) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(uint64(seed), 0))
	e := setup(t, open)
	m := &claimModel{running: map[string]*queue.TaskState{}, keys: map[string]*queue.FlowKeyState{}}
	priorities := []string{"highest", "high", "medium", "lowest"}
	now := Epoch
	next := 0

	create := func() {
		next++
		id := fmt.Sprintf("t%03d", next)
		mutate := []func(*queue.Task){withPriority(priorities[r.IntN(len(priorities))])}
		if r.IntN(2) == 0 {
			mutate = append(mutate, func(d *queue.Task) { d.ProjectID = "other" })
		}
		var key *claimRulesKey
		if r.IntN(3) > 0 {
			key = &claimRulesKeys[r.IntN(len(claimRulesKeys))]
			limit := key.limit
			if limit < 0 {
				limit = 1 + r.IntN(3)
			}
			block := map[string]any{"key": key.name, "supersede": key.supersede, "cancelInProgress": key.cancelInProgress}
			if limit > 0 {
				block["limit"] = limit
			}
			encoded, err := json.Marshal(block)
			require.NoError(t, err)
			mutate = append(mutate, withFlow(string(encoded)))
			k := m.keys[key.name]
			if k == nil {
				k = &queue.FlowKeyState{Key: key.name}
				m.keys[key.name] = k
			}
			k.Limit, k.Supersede = limit, key.supersede
		}
		res := e.create(id, now, mutate...)
		created := res.Task
		// What the rules say the create cancels.
		var want []string
		for _, running := range m.running {
			if queue.CancelsInProgress(id, &created.Task, running) {
				want = append(want, running.TaskID)
			}
		}
		got := changedIDs(res.Changes)[1:]
		slices.Sort(want)
		slices.Sort(got)
		require.Equal(t, nonNil(want), nonNil(got), "creating %s cancels what queue.CancelsInProgress says (seed %d)", id, seed)
		for _, c := range got {
			m.stopRunning(c)
		}
		m.seq++
		run := queue.NewPendingRun(created, m.seq)
		m.pending = append(m.pending, run)
		if key != nil {
			m.keys[key.name].Pending++
		}
	}

	claim := func(count int) {
		plan := queue.PlanClaim(m.pending, m.keyStates(), now, count)
		res, got := e.flowClaim(count, now)
		want := []string{}
		for _, run := range plan.Runs {
			want = append(want, run.TaskID)
		}
		require.Equal(t, want, got, "a claim for %d takes what queue.PlanClaim says (seed %d)", count, seed)
		wantSuperseded := map[string][]string{}
		for by, runs := range plan.Superseded {
			for _, run := range runs {
				wantSuperseded[by] = append(wantSuperseded[by], run.TaskID)
			}
		}
		gotSuperseded := map[string][]string{}
		for _, s := range res.Supersessions {
			for _, o := range s.Superseded {
				gotSuperseded[s.By.TaskID] = append(gotSuperseded[s.By.TaskID], o.TaskID)
			}
		}
		require.Equal(t, wantSuperseded, gotSuperseded, "the claim supersedes what queue.PlanClaim says (seed %d)", seed)

		for _, c := range res.Claims {
			m.dropPending(c.Task.TaskID)
			m.running[c.Task.TaskID] = c.Task
			if p := c.Task.Task.Flow; p.Keyed() {
				k := m.keys[p.Key]
				k.Pending--
				k.Running++
				k.LastClaimed = now
			}
		}
		for _, runs := range plan.Superseded {
			for _, run := range runs {
				m.dropPending(run.TaskID)
				m.keys[run.FlowKey].Pending--
			}
		}
	}

	for range 100 {
		for range r.IntN(5) {
			create()
		}
		if len(m.running) > 0 && r.IntN(3) == 0 {
			// A run ends, making room under its key's limit.
			running := slices.Sorted(func(yield func(string) bool) {
				for id := range m.running {
					if !yield(id) {
						return
					}
				}
			})
			id := running[r.IntN(len(running))]
			e.mustApply(id, now, report(queue.StateCompleted, len(m.running[id].Runs)-1, now))
			m.stopRunning(id)
		}
		claim(1 + r.IntN(4))
		// Claims at the same instant leave their keys' turns tied (broken
		// by key); deadlines (an hour after creation) never pass.
		now = now.Add(time.Duration(r.IntN(3)) * time.Second)
	}
	pending, _ := e.counts(now)
	require.Equal(t, len(m.pending), pending, "the store's pending runs are the model's (seed %d)", seed)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
