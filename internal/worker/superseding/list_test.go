package superseding_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/worker/superseding"
)

// The task ids of the seeds' example. The seeds' middle id,
// "909mRog1E98Va0g-bb91ba", is not a valid taskId (its 9th character is
// not in [Q-T]) so no queue could hold it; seed9 stands in for it.
const (
	seedE = "E5SBRfo-RfOIxh0V4187Qg" // the initial task
	seed9 = "909mRog1S9eVa0g-bb91bA"
	seedK = "KGt8egfvRaqxczIRgOScaw"
)

func TestParseList(t *testing.T) {
	t.Parallel()
	long := make([]string, 0, 3)
	for range 3 {
		long = append(long, fmt.Sprintf("%q", tcclient.NewTaskID()))
	}
	tests := []struct {
		name    string
		body    string
		max     int
		want    []string
		wantErr string
	}{
		{name: "seed 001 answer", body: `{"supersedes": ["E5SBRfo-RfOIxh0V4187Qg", "909mRog1S9eVa0g-bb91bA", "KGt8egfvRaqxczIRgOScaw"]}`,
			want: []string{seedE, seed9, seedK}},
		{name: "other properties ignored", body: `{"supersedes": ["E5SBRfo-RfOIxh0V4187Qg"], "note": 1}`, want: []string{seedE}},
		{name: "empty list", body: `{"supersedes": []}`, want: []string{}},
		{name: "empty list need not contain the initial task", body: `{"supersedes": [], "x": null}`, want: []string{}},
		{name: "not JSON", body: `<html>`, wantErr: "not a JSON object"},
		{name: "JSON array", body: `["E5SBRfo-RfOIxh0V4187Qg"]`, wantErr: "not a JSON object"},
		{name: "JSON null", body: `null`, wantErr: "not a JSON object"},
		{name: "missing property", body: `{"tasks": []}`, wantErr: `no "supersedes"`},
		{name: "null list", body: `{"supersedes": null}`, wantErr: "not an array"},
		{name: "string list", body: `{"supersedes": "E5SBRfo-RfOIxh0V4187Qg"}`, wantErr: "not an array"},
		{name: "number entry", body: `{"supersedes": ["E5SBRfo-RfOIxh0V4187Qg", 7]}`, wantErr: `[1] is not a string`},
		{name: "bad taskId", body: `{"supersedes": ["E5SBRfo-RfOIxh0V4187Qg", "not-a-slug"]}`, wantErr: `"not-a-slug" is not a taskId`},
		{name: "the seeds' literal middle id", body: `{"supersedes": ["E5SBRfo-RfOIxh0V4187Qg", "909mRog1E98Va0g-bb91ba"]}`, wantErr: "is not a taskId"},
		{name: "bad version nibble", body: `{"supersedes": ["E5SBRfo-RfOIxh0V4187Qg", "E5SBRfo-AfOIxh0V4187Qg"]}`, wantErr: "is not a taskId"},
		{name: "duplicates", body: `{"supersedes": ["E5SBRfo-RfOIxh0V4187Qg", "909mRog1S9eVa0g-bb91bA", "909mRog1S9eVa0g-bb91bA"]}`, wantErr: "more than once"},
		{name: "initial task absent", body: `{"supersedes": ["909mRog1S9eVa0g-bb91bA", "KGt8egfvRaqxczIRgOScaw"]}`, wantErr: "does not contain the initial task"},
		{name: "too long", max: 3, body: `{"supersedes": ["E5SBRfo-RfOIxh0V4187Qg", ` + strings.Join(long[:3], ",") + `]}`, wantErr: "4 tasks, more than the worker's limit of 3"},
		{name: "at the limit", max: 2, body: `{"supersedes": ["E5SBRfo-RfOIxh0V4187Qg", "909mRog1S9eVa0g-bb91bA"]}`, want: []string{seedE, seed9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			max := tt.max
			if max == 0 {
				max = 32
			}
			got, err := superseding.ParseList([]byte(tt.body), seedE, max)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				var u *superseding.UnusableError
				require.True(t, errors.As(err, &u))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestChoosePrimary covers docs/contract/worker.md §5.4 under both orders: the
// descending form of a list must pick the same primary and secondaries as
// its ascending form.
func TestChoosePrimary(t *testing.T) {
	t.Parallel()
	const a, b, c, d = "a", "b", "c", "d"
	tests := []struct {
		name      string
		ascending []string
		held      []string
		primary   string
		secs      []string
	}{
		{name: "seed example: newest taken elsewhere", ascending: []string{seedE, seed9, seedK}, held: []string{seedE, seed9},
			primary: seed9, secs: []string{seedE}},
		{name: "all held: the last wins", ascending: []string{seedE, seed9, seedK}, held: []string{seedE, seed9, seedK},
			primary: seedK, secs: []string{seedE, seed9}},
		{name: "only the initial task", ascending: []string{a, b, c}, held: []string{b}, primary: b},
		{name: "initial task is the newest", ascending: []string{a, b, c}, held: []string{a, c}, primary: c, secs: []string{a}},
		{name: "gaps below and above", ascending: []string{a, b, c, d}, held: []string{a, c}, primary: c, secs: []string{a}},
		{name: "nothing held", ascending: []string{a, b}, held: nil},
	}
	for _, tt := range tests {
		for _, order := range []string{superseding.Ascending, superseding.Descending} {
			t.Run(tt.name+"/"+order, func(t *testing.T) {
				t.Parallel()
				received := tt.ascending
				if order == superseding.Descending {
					received = superseding.Normalize(tt.ascending, superseding.Descending) // what a dw-era service sends
				}
				list := superseding.Normalize(received, order)
				require.Equal(t, tt.ascending, list)
				held := map[string]bool{}
				for _, h := range tt.held {
					held[h] = true
				}
				p, secs := superseding.ChoosePrimary(list, func(id string) bool { return held[id] })
				if tt.primary == "" {
					require.Equal(t, -1, p)
					require.Empty(t, secs)
					return
				}
				require.Equal(t, tt.primary, list[p])
				var got []string
				for _, i := range secs {
					require.Less(t, i, p, "secondaries are below the primary")
					got = append(got, list[i])
				}
				require.Equal(t, tt.secs, got)
			})
		}
	}
}

// TestSeed000Convention checks the seed 000 example literally: a
// descending list where everything but the first entry was claimed runs
// the second entry.
func TestSeed000Convention(t *testing.T) {
	t.Parallel()
	received := []string{seedK, seed9, seedE}
	list := superseding.Normalize(received, superseding.Descending)
	p, secs := superseding.ChoosePrimary(list, func(id string) bool { return id != seedK })
	require.Equal(t, seed9, list[p])
	require.Equal(t, []string{seedE}, []string{list[secs[0]]})
	require.Equal(t, []string{seedK, seed9, seedE}, received, "Normalize must not modify its input")
}

func TestRequestURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"https://coalesce.example.com/v1/list/3600/5/key", "https://coalesce.example.com/v1/list/3600/5/key?taskId=" + seedE},
		{"https://x.example/list?branch=main&x=a+b", "https://x.example/list?branch=main&x=a+b&taskId=" + seedE},
		{"https://x.example/list?taskId=old&b=1", "https://x.example/list?b=1&taskId=" + seedE},
		{"http://127.0.0.1:8080/api/superseder/v1/list/0/0/k#frag", "http://127.0.0.1:8080/api/superseder/v1/list/0/0/k?taskId=" + seedE},
	}
	for _, tt := range tests {
		got, err := superseding.RequestURL(tt.in, seedE)
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got, tt.in)
	}
}
