package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		header []string
		rows   [][]any
		want   string
	}{
		{name: "list", header: []string{"ID", "COUNT", "NOTE"},
			rows: [][]any{{"a", 3, "first"}, {"longer-id", 12, ""}},
			want: "ID         COUNT  NOTE\n" +
				"a          3      first\n" +
				"longer-id  12     \n"},
		{name: "key and value", rows: [][]any{{"taskId:", "abc"}, {"expandedScopes:", "x"}, {"", "y"}},
			want: "taskId:          abc\n" +
				"expandedScopes:  x\n" +
				"                 y\n"},
		{name: "a last cell sets no width", header: []string{"A", "B"}, rows: [][]any{{"1", "a long last cell"}, {"22", "b"}},
			want: "A   B\n1   a long last cell\n22  b\n"},
		{name: "empty", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			tb := newTable(&out, tc.header...)
			for _, r := range tc.rows {
				tb.row(r...)
			}
			require.NoError(t, tb.flush())
			require.Equal(t, tc.want, out.String())
		})
	}
}
