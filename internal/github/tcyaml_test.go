package github

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/schema"
)

// TestYAMLErrorsNameTheProblemLine: a syntax error names the line where
// the problem is, not the line where the collection around it starts (the
// YAML parser's own line, one or two earlier).
func TestYAMLErrorsNameTheProblemLine(t *testing.T) {
	t.Parallel()
	reg, err := schema.New()
	require.NoError(t, err)
	for _, tc := range []struct{ name, text, want string }{
		{"a bad indentation", "version: 1\ntasks:\n  - a: 1\n   b: 2\n",
			"YAMLException: yaml: line 4: did not find expected '-' indicator (in the block that starts on line 2)"},
		{"an unclosed flow sequence", "version: 1\npolicy:\n  pullRequests: public\ntasks:\n  - taskId: x\n    bad: [unclosed\n    other: 1\n",
			"YAMLException: yaml: line 6: did not find expected ',' or ']' (in the block that starts on line 5)"},
		{"a tab where the line is", "version: 1\ntasks:\n\t- a: 1\n",
			"YAMLException: yaml: line 3: found character that cannot start any token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseConfig(reg, []byte(tc.text))
			require.ErrorContains(t, err, tc.want)
		})
	}
}
