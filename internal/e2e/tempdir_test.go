package e2e_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
)

// TestNothingLeftInTemp runs this test binary again on a temporary
// directory of its own, where it builds hopper (e2e.Binary) as every
// end-to-end test does: once the tests end (e2e.Main), the directory is
// empty again.
func TestNothingLeftInTemp(t *testing.T) {
	if os.Getenv("HOPPER_E2E_TEMP_CHILD") == "1" {
		require.FileExists(t, e2e.Binary(t))
		return
	}
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips building the hopper binary")
	}
	tmp := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestNothingLeftInTemp$", "-test.count=1")
	cmd.Env = append(os.Environ(), "HOPPER_E2E_TEMP_CHILD=1", "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	require.Empty(t, names, "left in the temporary directory")
}
