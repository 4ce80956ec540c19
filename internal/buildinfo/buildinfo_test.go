package buildinfo_test

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/buildinfo"
)

func TestFromBuildInfo(t *testing.T) {
	t.Parallel()
	vcs := func(rev, at, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: at}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "1e64542abcdef0123456789abcdef0123456789a"
	tests := []struct {
		name        string
		main        string
		settings    []debug.BuildSetting
		override    string
		short, long string
	}{
		{"go install of a release", "v0.2.0", nil, "", "v0.2.0", "v0.2.0 (built with go1.26.8)"},
		{"go build in a clean checkout (pseudo-version)", "v0.0.0-20261126233000-1e64542abcde", vcs(rev, "2026-11-26T23:30:00Z", "false"), "",
			"v0.0.0-20261126233000-1e64542abcde", "v0.0.0-20261126233000-1e64542abcde (committed 2026-11-26T23:30:00Z, built with go1.26.8)"},
		{"go build in a modified checkout", "v0.0.0-20261126233000-1e64542abcde+dirty", vcs(rev, "2026-11-26T23:30:00Z", "true"), "",
			"v0.0.0-20261126233000-1e64542abcde-dirty", "v0.0.0-20261126233000-1e64542abcde-dirty (committed 2026-11-26T23:30:00Z, built with go1.26.8)"},
		{"stamped, no module version", "(devel)", vcs(rev, "2026-11-26T23:30:00Z", "false"), "",
			"devel-1e64542abcde", "devel-1e64542abcde (committed 2026-11-26T23:30:00Z, built with go1.26.8)"},
		{"not stamped (go run, -buildvcs=false)", "(devel)", nil, "", "devel", "devel (built with go1.26.8)"},
		{"ldflags override wins", "(devel)", vcs(rev, "2026-11-26T23:30:00Z", "false"), "v9.9.9",
			"v9.9.9", "v9.9.9 (commit 1e64542abcde, committed 2026-11-26T23:30:00Z, built with go1.26.8)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			info := buildinfo.FromBuildInfo(&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/hopper-ci/hopper", Version: tt.main}, Settings: tt.settings}, tt.override)
			require.Equal(t, tt.short, info.Short())
			require.Equal(t, tt.long, info.String())
		})
	}
}
