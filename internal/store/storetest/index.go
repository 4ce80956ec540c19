package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/index"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

func withRoutes(routes ...string) func(*queue.Task) {
	return func(t *queue.Task) { t.Routes = routes }
}

func withExtra(extra string) func(*queue.Task) {
	return func(t *queue.Task) { t.Extra = json.RawMessage(extra) }
}

// entryRef is what the index tests compare of an entry.
type entryRef struct {
	Path   string
	TaskID string
	Rank   float64
}

func refsOf(entries []index.Entry) []entryRef {
	out := make([]entryRef, len(entries))
	for i, e := range entries {
		out[i] = entryRef{e.Path(), e.TaskID, e.Rank}
	}
	return out
}

// found returns the entry at path, or nil.
func (e *env) found(path string, now time.Time) *index.Entry {
	e.t.Helper()
	ns, name := index.Split(path)
	got, err := e.s.GetIndexedTask(e.ctx, ns, name, now)
	if err == store.ErrNotFound {
		return nil
	}
	require.NoError(e.t, err)
	return got
}

// testIndexCompletedTasks: a task resolving completed is indexed at each
// of its index routes in the resolving transaction, with rank, expiry and
// data from extra.index; other resolutions index nothing; a lower rank
// does not replace an entry, an equal one does.
func testIndexCompletedTasks(t *testing.T, open Opener) {
	e := setup(t, open)
	later := Epoch.Add(2 * time.Second)
	e.bring("t1", queue.StateCompleted, withRoutes("index.proj.app.latest", "index.proj.app.t1", "notify.x", "index.bad..path"),
		withExtra(`{"index":{"rank":5,"data":{"rev":"abc"}}}`))
	got := e.found("proj.app.latest", later)
	require.NotNil(t, got)
	require.Equal(t, "t1", got.TaskID)
	require.Equal(t, 5.0, got.Rank)
	require.JSONEq(t, `{"rev":"abc"}`, string(got.Data))
	require.True(t, got.Expires.Equal(Epoch.Add(48*time.Hour)), "expires defaults to the task's: %v", got.Expires)
	require.NotNil(t, e.found("proj.app.t1", later))

	// Failed and exception resolutions are not indexed.
	e.bring("t2", queue.StateFailed, withRoutes("index.proj.app.failed"))
	e.bring("t3", queue.StateException, withRoutes("index.proj.app.failed"))
	require.Nil(t, e.found("proj.app.failed", later))

	// A lower rank leaves the entry; an equal rank with explicit expiry
	// replaces it.
	e.bring("t4", queue.StateCompleted, withRoutes("index.proj.app.latest"), withExtra(`{"index":{"rank":4}}`))
	require.Equal(t, "t1", e.found("proj.app.latest", later).TaskID)
	expires := Epoch.Add(30 * time.Hour)
	e.bring("t5", queue.StateCompleted, withRoutes("index.proj.app.latest"),
		withExtra(fmt.Sprintf(`{"index":{"rank":5,"expires":%q}}`, expires.Format(time.RFC3339))))
	got = e.found("proj.app.latest", later)
	require.Equal(t, "t5", got.TaskID)
	require.True(t, got.Expires.Equal(expires))
	require.JSONEq(t, `{}`, string(got.Data))

	// A malformed extra.index keeps the task out of the index.
	e.bring("t6", queue.StateCompleted, withRoutes("index.proj.bad"), withExtra(`{"index":{"rank":"high"}}`))
	require.Nil(t, e.found("proj.bad", later))

	// The namespaces above the entries are listed, expiring at the end
	// of the day of the latest entry's expiry.
	roots, next, err := e.s.ListIndexNamespaces(e.ctx, "", later, store.Page{})
	require.NoError(t, err)
	require.Empty(t, next)
	require.Len(t, roots, 1)
	require.Equal(t, "proj", roots[0].Path())
	require.True(t, roots[0].Expires.Equal(index.NamespaceExpiry(Epoch.Add(48*time.Hour))), "%v", roots[0].Expires)
	sub, _, err := e.s.ListIndexNamespaces(e.ctx, "proj", later, store.Page{})
	require.NoError(t, err)
	require.Len(t, sub, 1)
	require.Equal(t, "proj.app", sub[0].Path())
	entries, _, err := e.s.ListIndexedTasks(e.ctx, "proj.app", later, store.Page{})
	require.NoError(t, err)
	require.Equal(t, []entryRef{{"proj.app.latest", "t5", 5}, {"proj.app.t1", "t1", 5}}, refsOf(entries))

	// Where each task can be found now: t1 lost proj.app.latest to t5.
	at, err := e.s.IndexedTaskPaths(e.ctx, "t1", later)
	require.NoError(t, err)
	require.Equal(t, []entryRef{{"proj.app.t1", "t1", 5}}, refsOf(at))
	at, err = e.s.IndexedTaskPaths(e.ctx, "t5", later)
	require.NoError(t, err)
	require.Equal(t, []entryRef{{"proj.app.latest", "t5", 5}}, refsOf(at))
	at, err = e.s.IndexedTaskPaths(e.ctx, "t5", expires)
	require.NoError(t, err)
	require.Empty(t, at, "expired entries are left out")
}

// testIndexConcurrentCompletions: tasks completed at once (sharing
// transactions where the driver combines them) are all indexed, and the
// shared path ends with the highest rank.
func testIndexConcurrentCompletions(t *testing.T, open Opener) {
	e := setup(t, open)
	const n = 24
	for i := range n {
		id := fmt.Sprintf("c%02d", i)
		e.create(id, Epoch, withRoutes("index.proj.latest", "index.proj.each."+id, "index.other."+id),
			withExtra(fmt.Sprintf(`{"index":{"rank":%d}}`, i)))
		e.claim(id, Epoch)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			now := Epoch.Add(time.Second)
			_, errs[i] = e.s.UpdateTask(e.ctx, store.UpdateTaskParams{TaskID: fmt.Sprintf("c%02d", i), Now: now, Apply: report(queue.StateCompleted, 0, now)})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	later := Epoch.Add(2 * time.Second)
	require.Equal(t, fmt.Sprintf("c%02d", n-1), e.found("proj.latest", later).TaskID)
	each, _, err := e.s.ListIndexedTasks(e.ctx, "proj.each", later, store.Page{})
	require.NoError(t, err)
	require.Len(t, each, n)
	roots, _, err := e.s.ListIndexNamespaces(e.ctx, "", later, store.Page{})
	require.NoError(t, err)
	require.Len(t, roots, 2)
}

// testIndexInsertListExpire covers the API side: explicit inserts with the
// rank rule, paging, lookups of several paths, deletion and data expiry.
func testIndexInsertListExpire(t *testing.T, open Opener) {
	e := setup(t, open)
	insertAt := func(path, taskID string, rank float64, expires, now time.Time) *index.Entry {
		t.Helper()
		ns, name := index.Split(path)
		got, err := e.s.InsertIndexedTask(e.ctx, index.Entry{Namespace: ns, Name: name, Rank: rank, TaskID: taskID,
			Data: json.RawMessage(`{"k":1}`), Expires: expires}, now)
		require.NoError(t, err)
		return got
	}
	insert := func(path, taskID string, rank float64, expires time.Time) *index.Entry {
		t.Helper()
		return insertAt(path, taskID, rank, expires, Epoch)
	}
	long, short := Epoch.Add(72*time.Hour), Epoch.Add(time.Hour)
	require.Equal(t, "A", insert("a.b.c", "A", 10, long).TaskID)
	require.Equal(t, "A", insert("a.b.c", "B", 9, long).TaskID, "a lower rank answers the stored entry")
	require.Equal(t, "C", insert("a.b.c", "C", 10, long).TaskID, "an equal rank replaces")
	require.Equal(t, "H", insert("a.exp", "H", 44, short).TaskID)
	require.Equal(t, "H", insertAt("a.exp", "L", 43, long, short.Add(-time.Second)).TaskID, "a live entry of higher rank stays")
	require.Equal(t, "L", insertAt("a.exp", "L", 43, long, short).TaskID, "an expired entry gives way to a lower rank")
	require.Equal(t, "L", e.found("a.exp", short.Add(time.Hour)).TaskID)
	for i := range 5 {
		insert(fmt.Sprintf("a.list.n%d", i), fmt.Sprintf("L%d", i), 0, long)
	}
	insert("a.list.gone", "G", 0, short)
	insert("top", "T", 0, long) // an entry in the root namespace
	require.Equal(t, "T", e.found("top", Epoch).TaskID)

	var all []entryRef
	page := store.Page{Limit: 2}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		got, next, err := e.s.ListIndexedTasks(e.ctx, "a.list", Epoch.Add(2*time.Hour), page)
		require.NoError(t, err)
		all = append(all, refsOf(got)...)
		if next == "" {
			break
		}
		page.ContinuationToken = next
	}
	require.Equal(t, []entryRef{{"a.list.n0", "L0", 0}, {"a.list.n1", "L1", 0}, {"a.list.n2", "L2", 0}, {"a.list.n3", "L3", 0}, {"a.list.n4", "L4", 0}}, all,
		"an expired entry is not listed")
	_, _, err := e.s.ListIndexedTasks(e.ctx, "a.list", Epoch, store.Page{ContinuationToken: "!!"})
	require.ErrorIs(t, err, store.ErrBadContinuationToken)

	ns, next, err := e.s.ListIndexNamespaces(e.ctx, "a", Epoch, store.Page{Limit: 1})
	require.NoError(t, err)
	require.Equal(t, "a.b", ns[0].Path())
	ns, next, err = e.s.ListIndexNamespaces(e.ctx, "a", Epoch, store.Page{Limit: 1, ContinuationToken: next})
	require.NoError(t, err)
	require.Equal(t, "a.list", ns[0].Path())
	require.Empty(t, next)

	found, err := e.s.FindIndexedTasks(e.ctx, []string{"a.list.n3", "missing.x", "a.b.c", "a.list.gone", "a.list.n3"}, Epoch.Add(2*time.Hour))
	require.NoError(t, err)
	require.Equal(t, []entryRef{{"a.list.n3", "L3", 0}, {"a.b.c", "C", 10}}, refsOf(found))

	require.NoError(t, e.s.DeleteIndexedTask(e.ctx, "a.b", "c"))
	require.NoError(t, e.s.DeleteIndexedTask(e.ctx, "a.b", "c"), "deleting twice is fine")
	require.Nil(t, e.found("a.b.c", Epoch))
	require.Equal(t, "B", insert("a.b.c", "B", 1, long).TaskID, "after a delete any rank goes in")

	require.NotNil(t, e.found("a.list.gone", Epoch))
	require.Nil(t, e.found("a.list.gone", short), "an entry is gone at its expiry instant")
	entries, namespaces, err := e.s.ExpireIndex(e.ctx, Epoch.Add(50*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, entries)
	require.Equal(t, 0, namespaces, "namespaces live until their latest entry's day ends")
	entries, namespaces, err = e.s.ExpireIndex(e.ctx, index.NamespaceExpiry(long).Add(time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, 8, entries)    // a.exp included
	require.Equal(t, 3, namespaces) // a, a.b, a.list
}
