package server

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/postgres"
	"github.com/hopper-ci/hopper/internal/store/sqlite"
)

// TestAnonymousRoleUpgradeGivesTodaysDefaults: the newest migration that
// upgrades an anonymous role left as an earlier hopper created it gives it
// DefaultAnonymousScopes, in their order (so that a later upgrade can tell
// it from a role the operator changed; storetest checks which roles it
// upgrades). A change of the defaults fails here until a migration
// upgrades the roles hopper created before it.
func TestAnonymousRoleUpgradeGivesTodaysDefaults(t *testing.T) {
	t.Parallel()
	want, err := json.Marshal(DefaultAnonymousScopes)
	require.NoError(t, err)
	setScopes := regexp.MustCompile(`UPDATE roles SET\s+scopes = '([^']*)'`)
	for name, load := range map[string]func() ([]store.Migration, error){"sqlite": sqlite.Migrations, "postgres": postgres.Migrations} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ms, err := load()
			require.NoError(t, err)
			var last store.Migration
			for _, m := range ms {
				if setScopes.MatchString(m.SQL) {
					last = m
				}
			}
			require.NotZero(t, last.Version, "a migration upgrades the anonymous role")
			got := setScopes.FindStringSubmatch(last.SQL)[1]
			require.Equal(t, string(want), got, "migration %d sets today's default anonymous scopes", last.Version)
		})
	}
}
