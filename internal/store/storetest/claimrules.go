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
	c := &claimRulesRun{t: t, e: setup(t, open), r: rand.New(rand.NewPCG(uint64(seed), 0)), seed: seed, now: Epoch,
		m: &claimModel{running: map[string]*queue.TaskState{}, keys: map[string]*queue.FlowKeyState{}}}
	for range 100 {
		for range c.r.IntN(5) {
			c.create()
		}
		if len(c.m.running) > 0 && c.r.IntN(3) == 0 {
			c.endOne()
		}
		c.claim(1 + c.r.IntN(4))
		// Claims at the same instant leave their keys' turns tied (broken
		// by key); deadlines (an hour after creation) never pass.
		c.now = c.now.Add(time.Duration(c.r.IntN(3)) * time.Second)
	}
	pending, _ := c.e.counts(c.now)
	require.Equal(t, len(c.m.pending), pending, "the store's pending runs are the model's (seed %d)", seed)
}

// claimRulesRun is one randomized run of testClaimRules: the store, the
// model of what the rules say it holds, and the random source.
type claimRulesRun struct {
	t    *testing.T
	e    *env
	r    *rand.Rand
	seed int64
	m    *claimModel
	now  time.Time
	next int // the tasks created so far
}

// randomTask returns a random task's changes: a priority, maybe the other
// project, and (two times in three) a flow block under one of
// claimRulesKeys, whose policy the model's key takes on.
func (c *claimRulesRun) randomTask() (mutate []func(*queue.Task), key *claimRulesKey) {
	priorities := []string{"highest", "high", "medium", "lowest"}
	mutate = []func(*queue.Task){withPriority(priorities[c.r.IntN(len(priorities))])}
	if c.r.IntN(2) == 0 {
		mutate = append(mutate, func(d *queue.Task) { d.ProjectID = "other" })
	}
	if c.r.IntN(3) == 0 {
		return mutate, nil
	}
	key = &claimRulesKeys[c.r.IntN(len(claimRulesKeys))]
	limit := key.limit
	if limit < 0 {
		limit = 1 + c.r.IntN(3)
	}
	block := map[string]any{"key": key.name, "supersede": key.supersede, "cancelInProgress": key.cancelInProgress}
	if limit > 0 {
		block["limit"] = limit
	}
	encoded, err := json.Marshal(block)
	require.NoError(c.t, err)
	mutate = append(mutate, withFlow(string(encoded)))
	k := c.m.keys[key.name]
	if k == nil {
		k = &queue.FlowKeyState{Key: key.name}
		c.m.keys[key.name] = k
	}
	k.Limit, k.Supersede = limit, key.supersede
	return mutate, key
}

// create creates a random task, which must cancel exactly the running
// tasks queue.CancelsInProgress says, and adds its pending run to the
// model.
func (c *claimRulesRun) create() {
	c.next++
	id := fmt.Sprintf("t%03d", c.next)
	mutate, key := c.randomTask()
	res := c.e.create(id, c.now, mutate...)
	created := res.Task
	// What the rules say the create cancels.
	var want []string
	for _, running := range c.m.running {
		if queue.CancelsInProgress(id, &created.Task, running) {
			want = append(want, running.TaskID)
		}
	}
	got := changedIDs(res.Changes)[1:]
	slices.Sort(want)
	slices.Sort(got)
	require.Equal(c.t, nonNil(want), nonNil(got), "creating %s cancels what queue.CancelsInProgress says (seed %d)", id, c.seed)
	for _, cancelled := range got {
		c.m.stopRunning(cancelled)
	}
	c.m.seq++
	c.m.pending = append(c.m.pending, queue.NewPendingRun(created, c.m.seq))
	if key != nil {
		c.m.keys[key.name].Pending++
	}
}

// endOne completes a random running task, making room under its key's
// limit.
func (c *claimRulesRun) endOne() {
	running := slices.Sorted(func(yield func(string) bool) {
		for id := range c.m.running {
			if !yield(id) {
				return
			}
		}
	})
	id := running[c.r.IntN(len(running))]
	c.e.mustApply(id, c.now, report(queue.StateCompleted, len(c.m.running[id].Runs)-1, c.now))
	c.m.stopRunning(id)
}

// claim claims count runs, which must be exactly the runs queue.PlanClaim
// plans, in its order, superseding exactly what it says, and moves them in
// the model.
func (c *claimRulesRun) claim(count int) {
	plan := queue.PlanClaim(c.m.pending, c.m.keyStates(), c.now, count)
	res, got := c.e.flowClaim(count, c.now)
	want := []string{}
	for _, run := range plan.Runs {
		want = append(want, run.TaskID)
	}
	require.Equal(c.t, want, got, "a claim for %d takes what queue.PlanClaim says (seed %d)", count, c.seed)
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
	require.Equal(c.t, wantSuperseded, gotSuperseded, "the claim supersedes what queue.PlanClaim says (seed %d)", c.seed)

	for _, cl := range res.Claims {
		c.m.dropPending(cl.Task.TaskID)
		c.m.running[cl.Task.TaskID] = cl.Task
		if p := cl.Task.Task.Flow; p.Keyed() {
			k := c.m.keys[p.Key]
			k.Pending--
			k.Running++
			k.LastClaimed = c.now
		}
	}
	for _, runs := range plan.Superseded {
		for _, run := range runs {
			c.m.dropPending(run.TaskID)
			c.m.keys[run.FlowKey].Pending--
		}
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
