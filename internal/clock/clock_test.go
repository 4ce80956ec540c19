package clock_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/clock"
)

func TestSystem(t *testing.T) {
	t.Parallel()
	var c clock.Clock = clock.System{}
	require.Greater(t, c.Now().Year(), 2000, "the wall clock, not a zero time")
}
