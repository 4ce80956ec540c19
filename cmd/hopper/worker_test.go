package main

import (
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/worker"
)

// TestWorkerFlagHelpShowsNormalizeDefaults holds `hopper worker --help` to
// the values Normalize fills in for flags left unset.
func TestWorkerFlagHelpShowsNormalizeDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := worker.Config{RootURL: "http://127.0.0.1:1", TaskQueueID: "prov/wt",
		Credentials: worker.CredentialsConfig{ClientID: "c", AccessToken: "t"}}.Normalize()
	require.NoError(t, err)
	flags := workerCommand().Flags()
	for name, value := range map[string]string{
		"worker-group":      cfg.WorkerGroup,
		"capacity":          strconv.Itoa(cfg.Capacity),
		"work-dir":          "./" + filepath.Base(cfg.WorkDir),
		"isolation":         cfg.Isolation,
		"task-network":      cfg.TaskNetwork,
		"engine":            cfg.Engine,
		"superseding-order": cfg.Superseding.Order,
	} {
		usage := flags.Lookup(name).Usage
		require.Regexp(t, `\(default:? `+regexp.QuoteMeta(value)+`\)`, usage, "--%s", name)
	}
}
