package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// flowBlockCase is a task's extra (and routes) with a flow block, or
// something close to one.
type flowBlockCase struct {
	name   string
	extra  string
	routes []string
}

// validFlowBlocks are blocks createTask takes: ParseFlow gives a policy.
var validFlowBlocks = []flowBlockCase{
	{name: "fail-fast alone", extra: `{"flow": {"failFast": true}}`},
	{name: "fail-fast, key null", extra: `{"flow": {"failFast": true, "key": null, "limit": null}}`},
	{name: "limit", extra: `{"flow": {"key": "k1", "limit": 2}}`},
	{name: "everything", extra: `{"flow": {"key": "k2", "limit": 10000, "supersede": true, "cancelInProgress": true, "failFast": true}}`},
	{name: "key from route", extra: `{"flow": {"supersede": true}}`, routes: []string{"index.x", "coalesce.v1.rk"}},
	{name: "cancel, key from route", extra: `{"flow": {"cancelInProgress": true, "key": null, "failFast": false}}`, routes: []string{"coalesce.v1.rk2"}},
	{name: "names in any case", extra: `{"flow": {"KEY": "k3", "Limit": 3, "SuperSede": false, "CANCELINPROGRESS": true}}`},
	{name: "kelvin sign and long s", extra: `{"flow": {"\u212aey": "k4", "ſupersede": true, "limit": 1}}`},
	{name: "escaped names", extra: `{"flow": {"\u006bey": "k5", "\u0053upersede": true}}`},
	{name: "last member wins", extra: `{"flow": {"limit": 5, "key": "x", "limit": 1, "key": "k6", "failFast": true, "FailFast": false}}`},
	{name: "null resets", extra: `{"flow": {"key": "k7", "limit": 4, "supersede": true, "limit": null}}`},
	{name: "last flow member wins", extra: `{"flow": {"bogus": 1}, "other": "x", "flow": {"failFast": true}}`},
	{name: "other members", extra: `{"a": [1, {"flow": 2}], "flow": {"key": "k8", "limit": 7}, "\u0000": "\ud800"}`},
	{name: "lone surrogates", extra: `{"\ud800x": 1, "flow": {"failFast": true}, "\udc00": "\udbff", "y": "\ud83d\ude00\\ud800"}`},
	{name: "escaped backslashes", extra: `{"z\\u0000": "\\ud800", "flow": {"key": "k9", "limit": 2}}`},
}

// invalidFlowBlocks are blocks ParseFlow refuses or does not see (nil):
// createTask never stored one, but a task stored before flow control
// existed (migration 007) may have any.
var invalidFlowBlocks = []flowBlockCase{
	{name: "no flow", extra: `{"other": "flow"}`},
	{name: "escaped flow", extra: `{"\u0066low": {"failFast": true}}`},
	{name: "extra an array", extra: `[{"flow": {"failFast": true}}]`},
	{name: "null block", extra: `{"flow": null}`},
	{name: "string block", extra: `{"flow": "failFast"}`},
	{name: "empty block", extra: `{"flow": {}}`},
	{name: "fail-fast false", extra: `{"flow": {"failFast": false}}`},
	{name: "fail-fast overridden", extra: `{"flow": {"failFast": true, "failfast": null}}`},
	{name: "key alone", extra: `{"flow": {"key": "x"}}`},
	{name: "key with fail-fast", extra: `{"flow": {"key": "x", "failFast": true}}`},
	{name: "empty key", extra: `{"flow": {"key": "", "failFast": true}}`},
	{name: "zero limit", extra: `{"flow": {"key": "x", "limit": 0}}`},
	{name: "negative zero limit", extra: `{"flow": {"key": "x", "limit": -0}}`},
	{name: "huge limit", extra: `{"flow": {"key": "x", "limit": 10001}}`},
	{name: "fractional limit", extra: `{"flow": {"key": "x", "limit": 1.0}}`},
	{name: "exponent limit", extra: `{"flow": {"key": "x", "limit": 1e1}}`},
	{name: "overflowing limit overridden", extra: `{"flow": {"key": "x", "limit": 99999999999999999999, "limit": 1}}`},
	{name: "string limit", extra: `{"flow": {"key": "x", "limit": "1"}}`},
	{name: "string switch", extra: `{"flow": {"key": "x", "supersede": "true"}}`},
	{name: "number key", extra: `{"flow": {"key": 1, "supersede": true}}`},
	{name: "unknown member", extra: `{"flow": {"key": "x", "limit": 1, "lmit": 1}}`},
	{name: "unknown null member", extra: `{"flow": {"failFast": true, "other": null}}`},
	{name: "dotless i", extra: `{"flow": {"key": "x", "lımit": 1}}`},
	{name: "surrogate member", extra: `{"flow": {"failFast": true, "\ud800": 1}}`},
	{name: "NUL member", extra: `{"flow": {"failFast": true, "\u0000": 1}}`},
	{name: "no key", extra: `{"flow": {"limit": 1}}`},
	{name: "two routes", extra: `{"flow": {"limit": 1}}`, routes: []string{"coalesce.v1.a", "coalesce.v1.b"}},
}

// generatedFlowBlocks are n blocks drawn from members of every name (in
// several spellings, repeated, or unknown) with values of every type, for
// the upgrade to compute as ParseFlow does: a fixed seed, so a failure
// repeats.
func generatedFlowBlocks(n int) []flowBlockCase {
	rng := rand.New(rand.NewPCG(54, 36))
	names := [][]string{
		{"key", "KEY", "Key", "\u212aey"},
		{"limit", "LIMIT", "Limit"},
		{"supersede", "Supersede", "\u017fupersede"},
		{"cancelInProgress", "cancelinprogress", "CancelInProgress"},
		{"failFast", "failfast", "FAILFAST"},
		{"lmit", "keys"},
	}
	// Each name's values: the first `valid` are of its type (in range);
	// the rest are drawn one time in eight.
	values := [][]string{
		{`"gk"`, `null`, `""`, `1`},
		{`1`, `3`, `10000`, `null`, `0`, `10001`, `2.0`, `"2"`},
		{`true`, `false`, `null`, `"true"`},
		{`true`, `false`, `null`, `1`},
		{`true`, `false`, `null`, `"false"`},
		{`1`, `null`},
	}
	valid := []int{2, 4, 3, 3, 3, 2}
	routes := [][]string{nil, {"coalesce.v1.rk"}, {"coalesce.v1.a", "coalesce.v1.b"}}
	var out []flowBlockCase
	for i := range n {
		var members []string
		for range rng.IntN(5) {
			f := rng.IntN(len(names))
			if f == len(names)-1 && rng.IntN(4) > 0 {
				f = rng.IntN(len(names) - 1) // unknown names rarely
			}
			v := rng.IntN(valid[f])
			if rng.IntN(8) == 0 {
				v = rng.IntN(len(values[f]))
			}
			members = append(members, `"`+names[f][rng.IntN(len(names[f]))]+`": `+values[f][v])
		}
		out = append(out, flowBlockCase{name: fmt.Sprint("generated ", i),
			extra: `{"flow": {` + strings.Join(members, ", ") + `}}`, routes: routes[rng.IntN(len(routes))]})
	}
	return out
}

// flowTask is a task of testQueue with the case's extra and routes.
func (c flowBlockCase) task(now time.Time) *queue.Task {
	return NewTask(testQueue, now, withExtra(c.extra), func(d *queue.Task) {
		if c.routes != nil {
			d.Routes = c.routes
		}
	})
}

// parsedFlow is what ParseFlow gives for a definition (nil when it
// refuses the block).
func parsedFlow(t *testing.T, def *queue.Task) *queue.FlowPolicy {
	t.Helper()
	p, err := queue.ParseFlow(def)
	if err != nil {
		return nil
	}
	return p
}

// testUpgradeFlow stores tasks with flow blocks as migrations up to 053
// left them (flow_key set where createTask set it), then upgrades:
// migration 054 stores each one's policy in its row, which a freshly
// opened store (no cached definitions) reads back as ParseFlow gives it.
func testUpgradeFlow(t *testing.T, before Upgrader) {
	exec, open := before(t, 53)
	now := Epoch
	want := map[string]*queue.FlowPolicy{}
	insert := func(id string, def *queue.Task, flowKey string) {
		exec(legacyTaskInsert(t, queue.NewTaskState(id, *def), "NULL", "NULL", "NULL", "NULL"))
		if flowKey != "" {
			exec(fmt.Sprintf(`UPDATE tasks SET flow_key = '%s' WHERE task_id = '%s'`, flowKey, id))
		}
	}
	var ids []string
	for i, c := range append(append([]flowBlockCase{}, validFlowBlocks...), invalidFlowBlocks...) {
		id := fmt.Sprintf("flow%02d", i)
		def := c.task(now)
		p := parsedFlow(t, def)
		if i < len(validFlowBlocks) {
			require.NotNil(t, p, "case %q is valid", c.name)
		} else {
			require.Nil(t, p, "case %q is invalid", c.name)
		}
		key := ""
		if p.Keyed() {
			key = p.Key // as createTask stored it
		}
		insert(id, def, key)
		want[id] = p
		ids = append(ids, id)
	}
	valid := 0
	for i, c := range generatedFlowBlocks(300) {
		id := fmt.Sprintf("generated%03d", i)
		def := c.task(now)
		p := parsedFlow(t, def)
		if p != nil {
			valid++
		}
		key := ""
		if p.Keyed() {
			key = p.Key
		}
		insert(id, def, key)
		want[id] = p
		ids = append(ids, id)
	}
	// Both outcomes are well represented.
	require.Greater(t, valid, 30, "generated blocks ParseFlow takes")
	require.Less(t, valid, 270, "generated blocks ParseFlow refuses")
	t.Logf("%d of 300 generated blocks valid", valid)
	// A keyed block stored before migration 007, without flow_key: the
	// claims have always treated it as inert (no key's policy applies to
	// the row), and the upgrade stores no policy for it.
	insert("pre007", NewTask(testQueue, now, withFlow(`{"key": "old", "limit": 1}`)), "")
	want["pre007"] = nil
	ids = append(ids, "pre007")
	// A task without a block keeps NULL.
	insert("plain", NewTask(testQueue, now), "")
	want["plain"] = nil
	ids = append(ids, "plain")

	s := open()
	ctx := context.Background()
	for _, id := range ids {
		got, err := s.GetTask(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want[id], got.Task.Flow, "task %s (%s)", id, got.Task.Extra)
	}
}

// testStoredFlowRead writes, after migration 054, rows whose stored policy
// differs from their definition's flow block: a store reads the stored
// one, so reading a task does not parse the block.
func testStoredFlowRead(t *testing.T, before Upgrader) {
	exec, open := before(t, 54)
	now := Epoch
	for _, row := range []struct {
		id, flow, flowKey string
	}{
		{id: "storedNULL", flow: "NULL", flowKey: "NULL"},
		{id: "storedFailFast", flow: "4", flowKey: "NULL"},
		{id: "storedKeyed", flow: fmt.Sprint(3<<3 | 2), flowKey: "'other'"},
	} {
		def := NewTask(testQueue, now, withFlow(`{"key": "k", "limit": 2, "supersede": true}`))
		exec(legacyTaskInsert(t, queue.NewTaskState(row.id, *def), "NULL", "NULL", "NULL", "NULL"))
		exec(fmt.Sprintf(`UPDATE tasks SET flow = %s, flow_key = %s WHERE task_id = '%s'`, row.flow, row.flowKey, row.id))
	}
	s := open()
	ctx := context.Background()
	for id, want := range map[string]*queue.FlowPolicy{
		"storedNULL":     nil,
		"storedFailFast": {FailFast: true},
		"storedKeyed":    {Key: "other", Limit: 3, CancelInProgress: true},
	} {
		got, err := s.GetTask(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, got.Task.Flow, "task %s reads its stored policy, not its block", id)
	}
}

// Reopener gives a fresh, empty, migrated store, and opens another store
// on the same database (as after a restart, or another replica): one
// whose definition cache is empty.
type Reopener func(t *testing.T) (s store.Store, reopen func() store.Store)

// RunStoredFlow checks that the flow policy createTask parsed is stored
// with the task: a store that did not create the tasks reads each one's
// policy as ParseFlow gives it, on every path that reads tasks.
func RunStoredFlow(t *testing.T, open Reopener) {
	s, reopen := open(t)
	ctx := context.Background()
	now := Epoch
	want := map[string]*queue.FlowPolicy{}
	var ids []string
	for i, c := range validFlowBlocks {
		id := fmt.Sprintf("flow%02d", i)
		def := c.task(now)
		// As queue.BuildTask's callers do, the store parses the block at
		// create; createTask passes it parsed.
		if i%2 == 0 {
			def.Flow = parsedFlow(t, def)
		}
		_, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: id, Task: def, Now: now})
		require.NoError(t, err, "creating %s", c.name)
		want[id] = parsedFlow(t, c.task(now))
		ids = append(ids, id)
	}
	_, err := s.CreateTask(ctx, store.CreateTaskParams{TaskID: "plain", Task: NewTask(testQueue, now), Now: now})
	require.NoError(t, err)
	want["plain"] = nil
	ids = append(ids, "plain")

	check := func(what string, tasks []*queue.TaskState) {
		t.Helper()
		require.Len(t, tasks, len(ids), what)
		for _, got := range tasks {
			require.Equal(t, want[got.TaskID], got.Task.Flow, "%s: task %s", what, got.TaskID)
		}
	}
	// Each read through a store of its own, whose cache is empty.
	fresh := reopen()
	var one []*queue.TaskState
	for _, id := range ids {
		got, err := fresh.GetTask(ctx, id)
		require.NoError(t, err)
		one = append(one, got)
	}
	check("GetTask", one)
	all, err := reopen().GetTasks(ctx, ids)
	require.NoError(t, err)
	check("GetTasks", all)
	pending, _, err := reopen().ListPending(ctx, testQueue, now, store.Page{Limit: 100})
	require.NoError(t, err)
	var states []*queue.TaskState
	for _, p := range pending {
		states = append(states, p.Task)
	}
	check("ListPending", states)
	history, _, err := reopen().ListTasks(ctx, store.TaskFilter{TaskQueueID: testQueue}, store.Page{Limit: 100})
	require.NoError(t, err)
	states = nil
	for _, h := range history {
		states = append(states, h.TaskState)
	}
	check("ListTasks", states)
	// Claims read plain tasks and tasks under a key by two statements;
	// each claimed task carries its stored policy.
	res, err := reopen().ClaimWork(ctx, store.ClaimWorkParams{TaskQueueID: testQueue, WorkerGroup: workerGroup, WorkerID: workerID,
		Count: 100, Now: now, TakenUntil: now.Add(claimTimeout)})
	require.NoError(t, err)
	require.NotEmpty(t, res.Claims)
	keyed := 0
	for _, c := range res.Claims {
		require.Equal(t, want[c.Task.TaskID], c.Task.Task.Flow, "ClaimWork: task %s", c.Task.TaskID)
		if c.Task.Task.Flow.Keyed() {
			keyed++
		}
	}
	require.NotZero(t, keyed, "a claim took tasks under a key")
}
