package hooks

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// cronVector is one entry of testdata/cron.json (see testdata/gen).
type cronVector struct {
	Pattern string              `json:"pattern"`
	Error   string              `json:"error"`
	Next    map[string][]string `json:"next"`
}

func TestCronMatchesCronParser(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/cron.json")
	require.NoError(t, err)
	var vectors []cronVector
	require.NoError(t, json.Unmarshal(raw, &vectors))
	require.NotEmpty(t, vectors)
	for _, v := range vectors {
		t.Run(v.Pattern, func(t *testing.T) {
			t.Parallel()
			p, err := ParseCron(v.Pattern)
			if v.Error != "" {
				require.Error(t, err)
				require.Equal(t, v.Error, err.Error())
				return
			}
			require.NoError(t, err)
			for ref, want := range v.Next {
				at, err := time.Parse(time.RFC3339Nano, ref)
				require.NoError(t, err)
				var got []string
				for range want {
					next, ok := p.Next(at)
					require.True(t, ok, "no due time after %s", at)
					got = append(got, next.Format("2006-01-02T15:04:05.000Z"))
					at = next
				}
				require.Equal(t, want, got, "after %s", ref)
			}
		})
	}
}

func TestCronRefusesHashedValues(t *testing.T) {
	t.Parallel()
	for _, pattern := range []string{"H * * * *", "0 H(0-30)/5 * * * *"} {
		_, err := ParseCron(pattern)
		require.ErrorContains(t, err, "H", pattern)
	}
}
