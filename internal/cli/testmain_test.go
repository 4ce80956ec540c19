package cli

import (
	"testing"

	"github.com/hopper-ci/hopper/internal/e2e"
)

// TestMain removes the hopper binary the tests built (e2e.Binary).
func TestMain(m *testing.M) { e2e.Main(m) }
