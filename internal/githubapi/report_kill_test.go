package githubapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/github"
	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// forgeBuild creates a pending task of the forge integration in a group
// of its own and records the group as a pending build of
// Codertocat/Hello-World, reporting as reporting says.
func (b *bundle) forgeBuild(t testing.TB, reporting string) string {
	t.Helper()
	ctx := context.Background()
	now := b.clock.Now()
	id := ident.NewSlugID()
	_, err := b.root.CreateTaskDocument(ctx, id, map[string]any{
		"taskQueueId": testQueue, "schedulerId": github.SchedulerID, "taskGroupId": id, "routes": []string{"statuses"},
		"created": now.Format(time.RFC3339), "deadline": now.Add(24 * time.Hour).Format(time.RFC3339),
		"payload": map[string]any{}, "metadata": map[string]any{"name": "t", "description": "d", "owner": "a@b.c", "source": "https://example.com"},
	})
	require.NoError(t, err)
	d := &store.GithubDelivery{Host: "github.com", DeliveryID: uuid.NewString(), Forge: "github", Event: "push", Body: []byte("{}"), Received: now}
	_, err = b.store.AddGithubDelivery(ctx, d)
	require.NoError(t, err)
	claimed, err := b.store.ClaimGithubDelivery(ctx, now, now.Add(time.Minute))
	require.NoError(t, err)
	require.NoError(t, b.store.FinishGithubDelivery(ctx, store.FinishGithubDeliveryParams{Host: d.Host, DeliveryID: d.DeliveryID,
		Lease: claimed.ClaimedUntil, State: store.DeliveryDone, Now: now, Builds: []store.GithubBuild{{TaskGroupID: id, Host: "github.com",
			Organization: "Codertocat", Repository: "Hello-World", SHA: "0123456789abcdef0123456789abcdef01234567", State: github.StatePending,
			EventType: "push", EventID: uuid.NewString(), InstallationID: 1, Reporting: reporting, Created: now, Updated: now}}}))
	return id
}

// TestReporterKilledHoldingGroupLease: a replica's reporter claimed the
// look at a build whose task just completed, and was killed: the build
// waits for the claim's lease (30 s, not renewed by the dead replica),
// then another replica's reporter moves it on and its status is sent
// once. On both drivers.
func TestReporterKilledHoldingGroupLease(t *testing.T) {
	t.Parallel()
	for _, driver := range apitest.Drivers() {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			db, _ := apitest.OpenStore(t, driver)
			b := setupOn(t, db)
			b.gh.Install("Codertocat", "Hello-World", 1)
			ctx := context.Background()
			groupID := b.forgeBuild(t, "")
			require.NoError(t, b.svc.Report(ctx))
			require.Empty(t, b.gh.Calls("/statuses/"), "pending, no status queued")

			_, err := b.root.ClaimTask(ctx, groupID, 0, &tcclient.ClaimTaskRequest{WorkerGroup: "g", WorkerID: "w"})
			require.NoError(t, err)
			_, err = b.root.ReportCompleted(ctx, groupID, 0)
			require.NoError(t, err)
			killed, err := b.store.ClaimOutbox(ctx, store.ClaimOutboxParams{Service: store.GithubService, Kind: store.GithubGroupChanged,
				Owner: "killed-replica", Now: b.clock.Now(), Lease: 30 * time.Second, Limit: 10})
			require.NoError(t, err)
			require.Len(t, killed, 1)

			b.clock.Advance(time.Second)
			require.NoError(t, b.svc.Report(ctx))
			got, err := b.store.GetGithubBuild(ctx, groupID)
			require.NoError(t, err)
			require.Equal(t, github.StatePending, got.State, "held by the killed replica")
			b.clock.Advance(30 * time.Second)
			require.NoError(t, b.svc.Report(ctx))
			require.NoError(t, b.svc.Report(ctx))
			got, err = b.store.GetGithubBuild(ctx, groupID)
			require.NoError(t, err)
			require.Equal(t, github.StateSuccess, got.State)
			statuses := b.gh.Calls("/statuses/")
			require.Len(t, statuses, 1)
			require.Equal(t, "success", statuses[0].Body["state"])
			ok, err := b.store.FinishOutbox(ctx, &killed[0], store.OutboxOutcome{Done: true, Now: b.clock.Now()})
			require.NoError(t, err)
			require.False(t, ok, "the killed replica's claim is no longer its")
		})
	}
}
