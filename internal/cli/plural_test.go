package cli

import "testing"

func TestCount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n      int
		noun   string
		plural []string
		want   string
	}{
		{0, "task", nil, "0 tasks"},
		{1, "task", nil, "1 task"},
		{2, "task", nil, "2 tasks"},
		{1, "dependency", []string{"dependencies"}, "1 dependency"},
		{2, "dependency", []string{"dependencies"}, "2 dependencies"},
		{1, "argument", nil, "1 argument"},
	} {
		if got := count(tc.n, tc.noun, tc.plural...); got != tc.want {
			t.Errorf("count(%d, %q, %q) = %q, want %q", tc.n, tc.noun, tc.plural, got, tc.want)
		}
	}
}
