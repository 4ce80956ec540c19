package index

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
)

func TestPaths(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path     string
		valid    bool
		ns, name string
	}{
		{"a", true, "", "a"},
		{"a.b.c", true, "a.b", "c"},
		{"proj.v1_2-3.!~*'()%", true, "proj.v1_2-3", "!~*'()%"},
		{"", false, "", ""},
		{"a..b", false, "a.", "b"},
		{"a.", false, "a", ""},
		{".a", false, "", "a"},
		{"a/b", false, "", "a/b"},
		{"a b", false, "", "a b"},
	} {
		require.Equal(t, tc.valid, ValidPath(tc.path), tc.path)
		ns, name := Split(tc.path)
		require.Equal(t, tc.ns, ns, tc.path)
		require.Equal(t, tc.name, name, tc.path)
		if tc.valid {
			require.Equal(t, tc.path, Join(ns, name))
		}
	}
	long := "a"
	for len(long) < MaxPathLength {
		long += ".a"
	}
	require.False(t, ValidPath(long+".a"))
}

func TestAncestors(t *testing.T) {
	t.Parallel()
	require.Nil(t, Ancestors(""))
	require.Equal(t, []Ref{{"", "a"}}, Ancestors("a"))
	require.Equal(t, []Ref{{"", "a"}, {"a", "b"}, {"a.b", "c"}}, Ancestors("a.b.c"))
}

func TestNamespaceExpiry(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	require.Equal(t, time.Date(2030, 5, 7, 0, 0, 0, 0, time.UTC), NamespaceExpiry(at))
	require.Equal(t, time.Date(2030, 5, 7, 0, 0, 0, 0, time.UTC), NamespaceExpiry(time.Date(2030, 5, 6, 0, 0, 0, 0, time.UTC)))
}

func TestReplaces(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	live := now.Add(time.Hour)
	require.True(t, Replaces(nil, &Entry{Rank: -5}, now))
	require.True(t, Replaces(&Entry{Rank: 3, Expires: live}, &Entry{Rank: 3}, now), "the latest of equal ranks wins")
	require.True(t, Replaces(&Entry{Rank: 3, Expires: live}, &Entry{Rank: 4}, now))
	require.False(t, Replaces(&Entry{Rank: 3, Expires: live}, &Entry{Rank: 2}, now))
	require.True(t, Replaces(&Entry{Rank: 3, Expires: now}, &Entry{Rank: 2}, now), "an expired entry gives way to any rank")
}

func TestForCompletedTask(t *testing.T) {
	t.Parallel()
	taskExpires := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		routes  []string
		extra   string
		want    []string // paths
		rank    float64
		expires time.Time
		data    string
	}{
		{name: "defaults", routes: []string{"index.a.b", "notify.email.x", "index.a.b", "index.", "index.bad..x", "index.c"}, extra: `{}`,
			want: []string{"a.b", "c"}, expires: taskExpires, data: `{}`},
		{name: "no index routes", routes: []string{"tc-treeherder.v2.x"}, extra: `{"index":{"rank":3}}`},
		{name: "rank, expires, data", routes: []string{"index.z"}, extra: `{"index":{"rank":1700000000,"expires":"2030-02-03T04:05:06.789Z","data":{"k":[1]}}}`,
			want: []string{"z"}, rank: 1700000000, expires: time.Date(2030, 2, 3, 4, 5, 6, 789e6, time.UTC), data: `{"k":[1]}`},
		{name: "null index", routes: []string{"index.z"}, extra: `{"index":null}`, want: []string{"z"}, expires: taskExpires, data: `{}`},
		{name: "no extra", routes: []string{"index.z"}, want: []string{"z"}, expires: taskExpires, data: `{}`},
		{name: "rank not a number", routes: []string{"index.z"}, extra: `{"index":{"rank":"1"}}`},
		{name: "data not an object", routes: []string{"index.z"}, extra: `{"index":{"data":[1]}}`},
		{name: "expires not a date", routes: []string{"index.z"}, extra: `{"index":{"expires":"tomorrow"}}`},
		{name: "index not an object", routes: []string{"index.z"}, extra: `{"index":"yes"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := &queue.Task{Routes: tc.routes, Expires: queue.NewTime(taskExpires)}
			if tc.extra != "" {
				task.Extra = json.RawMessage(tc.extra)
			}
			got := ForCompletedTask("T", task)
			require.Len(t, got, len(tc.want))
			for i, e := range got {
				require.Equal(t, tc.want[i], e.Path())
				require.Equal(t, "T", e.TaskID)
				require.Equal(t, tc.rank, e.Rank)
				require.True(t, tc.expires.Equal(e.Expires), "%v", e.Expires)
				require.JSONEq(t, tc.data, string(e.Data))
			}
		})
	}
}
