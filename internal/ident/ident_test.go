package ident_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/ident"
)

func TestTaskQueueID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		id       string
		ok       bool
		prov, wt string
	}{
		{"prov/wt", true, "prov", "wt"},
		{"Prov_1-x/w-t9", true, "Prov_1-x", "w-t9"},
		{"prov/WT", false, "", ""},  // worker types are lower case
		{"prov/w_t", false, "", ""}, // and have no underscore
		{"prov/wt-", false, "", ""}, // nor end in a dash
		{"prov", false, "", ""},     // both halves
		{"a/b/c", false, "", ""},    // one slash
		{"p/" + string(make([]byte, 0)), false, "", ""},
		{"abcdefghijklmnopqrstuvwxyzabcdefghijklm/wt", false, "", ""}, // 39 characters
	} {
		prov, wt, ok := ident.SplitTaskQueueID(tc.id)
		require.Equal(t, tc.ok, ok, tc.id)
		require.Equal(t, tc.ok, ident.ValidTaskQueueID(tc.id), tc.id)
		require.Equal(t, tc.prov, prov, tc.id)
		require.Equal(t, tc.wt, wt, tc.id)
	}
	require.True(t, ident.Identifier().MatchString("abcdefghijklmnopqrstuvwxyzabcdefghijkl"), "38 characters")
	require.False(t, ident.Identifier().MatchString("a b"))
	require.True(t, ident.WorkerType().MatchString("a"))
	require.False(t, ident.WorkerType().MatchString("1a"))
}
