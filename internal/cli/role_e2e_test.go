package cli_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestEndToEndRoleUpdate: a role's scopes are changed in place (added,
// removed, replaced) and its description too; creating a role that exists
// says how to change it.
func TestEndToEndRoleUpdate(t *testing.T) {
	t.Parallel()
	needBinary(t)
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	env := srv.Env()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const id = "hook-id:proj/nightly"

	res := hopper(ctx, t, env, "role", "create", id, "--description", "nightly build", "--scope", "queue:create-task:lowest:proj/linux", "--scope", "queue:scheduler-id:-")
	require.Equal(t, 0, res.code, res.stderr)
	res = hopper(ctx, t, env, "role", "create", id, "--description", "nightly build", "--scope", "queue:create-task:lowest:proj/linux")
	require.Equal(t, 1, res.code)
	require.Contains(t, res.stderr, "creating role "+id+": it exists already, with other scopes or description (change it with `hopper role update "+id+" --add-scope …`")

	res = hopper(ctx, t, env, "role", "update", id, "--add-scope", "queue:create-task:project:none", "--add-scope", "queue:scheduler-id:-", "--json")
	require.Equal(t, 0, res.code, res.stderr)
	role := decode[tcclient.Role](t, res)
	require.Equal(t, []string{"queue:create-task:lowest:proj/linux", "queue:scheduler-id:-", "queue:create-task:project:none"}, role.Scopes)
	require.Equal(t, "nightly build", role.Description)

	res = hopper(ctx, t, env, "role", "update", id, "--remove-scope", "queue:scheduler-id:-", "--description", "the nightly build", "--json")
	require.Equal(t, 0, res.code, res.stderr)
	role = decode[tcclient.Role](t, res)
	require.Equal(t, []string{"queue:create-task:lowest:proj/linux", "queue:create-task:project:none"}, role.Scopes)
	require.Equal(t, "the nightly build", role.Description)

	res = hopper(ctx, t, env, "role", "update", id, "--scope", "queue:create-task:lowest:proj/other", "--json")
	require.Equal(t, 0, res.code, res.stderr)
	require.Equal(t, []string{"queue:create-task:lowest:proj/other"}, decode[tcclient.Role](t, res).Scopes)

	res = hopper(ctx, t, env, "role", "update", id, "--remove-scope", "queue:nope")
	require.Equal(t, 1, res.code)
	require.Contains(t, res.stderr, `it has no scope "queue:nope" to remove`)
	res = hopper(ctx, t, env, "role", "update", id)
	require.Equal(t, 64, res.code, res.stderr)
	res = hopper(ctx, t, env, "role", "update", "no-such-role", "--add-scope", "x")
	require.Equal(t, 1, res.code)
	require.Contains(t, res.stderr, "getting role no-such-role: 404")

	// The audit log has every change, who made it and when.
	res = hopper(ctx, t, env, "audit", "role", id)
	require.Equal(t, 0, res.code, res.stderr)
	require.Regexp(t, `^WHEN\s+WHO\s+ACTION\s+ENTITY\n`, res.stdout)
	require.Regexp(t, `(?m)^\S+Z\s+static/taskcluster/root\s+created\s+role `+regexp.QuoteMeta(id)+`$`, res.stdout)
	require.Equal(t, 3, strings.Count(res.stdout, " updated "), res.stdout)
	res = hopper(ctx, t, env, "audit", "by", "static/taskcluster/root", "--json")
	require.Equal(t, 0, res.code, res.stderr)
	history := decode[tcclient.AuditHistoryResponse](t, res).AuditHistory
	require.GreaterOrEqual(t, len(history), 4)
	require.Equal(t, tcclient.AuditEntry{ClientID: "static/taskcluster/root", ActionType: "created", EntityID: id, EntityType: "role", Created: history[len(history)-4].Created},
		history[len(history)-4])
	res = hopper(ctx, t, env, "audit", "role", "never-was")
	require.Equal(t, 0, res.code, res.stderr)
	require.Equal(t, "No changes recorded (entries are kept 30 days).\n", res.stdout)
}
