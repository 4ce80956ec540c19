package githubapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
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

// killedAfterCreate is a replica's store whose process dies right after
// the forge created a check run: neither the check run's id nor the
// outbox entry's outcome is recorded.
type killedAfterCreate struct {
	store.Store
}

func (k killedAfterCreate) SetGithubCheckRunID(ctx context.Context, p store.SetGithubCheckRunIDParams) error {
	if p.CheckRunID > 0 {
		return errors.New("killed")
	}
	return k.Store.SetGithubCheckRunID(ctx, p)
}

func (killedAfterCreate) FinishOutbox(context.Context, *store.OutboxMessage, store.OutboxOutcome) (bool, error) {
	return true, nil
}

// TestChecksReplicaKilledAfterCreate: `checks-v1` reporting under a
// replica kill. A replica created a task's check run on GitHub and was
// killed before recording its id; when the entry's lease runs out,
// another replica finds the check run it made (by the task's
// external_id, on the commit) and updates it instead of creating a
// second one: one check run per run of a task, on both drivers.
func TestChecksReplicaKilledAfterCreate(t *testing.T) {
	t.Parallel()
	for _, driver := range apitest.Drivers() {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			db, _ := apitest.OpenStore(t, driver)
			b := setupOn(t, db)
			b.gh.Install("Codertocat", "Hello-World", 1)
			ctx := context.Background()
			groupID := b.forgeBuild(t, github.ReportingChecks)

			killed := *b.svc
			killed.Store = killedAfterCreate{b.store}
			require.NoError(t, killed.Report(ctx))
			require.Len(t, b.gh.Calls("/check-runs"), 1, "created, not recorded")
			check, err := b.store.GetGithubCheck(ctx, "github.com", groupID, 0)
			require.NoError(t, err)
			require.Equal(t, store.GithubCheckCreating, check.CheckRunID)

			b.clock.Advance(2 * time.Minute) // the entry's lease runs out
			require.NoError(t, b.svc.Report(ctx))
			_, err = b.root.ClaimTask(ctx, groupID, 0, &tcclient.ClaimTaskRequest{WorkerGroup: "g", WorkerID: "w"})
			require.NoError(t, err)
			_, err = b.root.ReportCompleted(ctx, groupID, 0)
			require.NoError(t, err)
			for range 3 {
				require.NoError(t, b.svc.Report(ctx))
			}
			var created []string
			for _, c := range b.gh.Calls("/check-runs") {
				if c.Method == http.MethodPost && strings.HasSuffix(c.Path, "/check-runs") {
					created = append(created, c.Body["external_id"].(string))
				}
			}
			require.Equal(t, []string{groupID}, created, "one check run for the task's run")
			check, err = b.store.GetGithubCheck(ctx, "github.com", groupID, 0)
			require.NoError(t, err)
			require.Equal(t, "completed", check.State)
			require.Positive(t, check.CheckRunID)
			require.NotEmpty(t, b.gh.Calls(fmt.Sprintf("/check-runs/%d", check.CheckRunID)), "the one created, updated")
		})
	}
}

// TestSenderKilledHoldingSendLease: a replica's sender claimed a build's
// status (an outbox message of kind GithubSend) and was killed before
// sending it: the status waits for the claim's lease (30 s, not renewed
// by the dead replica), then another replica's sender sends it, once.
// On both drivers.
func TestSenderKilledHoldingSendLease(t *testing.T) {
	t.Parallel()
	for _, driver := range apitest.Drivers() {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			db, _ := apitest.OpenStore(t, driver)
			b := setupOn(t, db)
			b.gh.Install("Codertocat", "Hello-World", 1)
			ctx := context.Background()
			groupID := b.forgeBuild(t, "")
			_, err := b.root.ClaimTask(ctx, groupID, 0, &tcclient.ClaimTaskRequest{WorkerGroup: "g", WorkerID: "w"})
			require.NoError(t, err)
			_, err = b.root.ReportCompleted(ctx, groupID, 0)
			require.NoError(t, err)
			require.NoError(t, b.svc.UpdateBuilds(ctx))
			killed, err := b.store.ClaimOutbox(ctx, store.ClaimOutboxParams{Service: store.GithubService, Kind: store.GithubSend,
				Owner: "killed-replica", Now: b.clock.Now(), Lease: 30 * time.Second, Limit: 10})
			require.NoError(t, err)
			require.Len(t, killed, 1, "the build's success status")

			b.clock.Advance(time.Second)
			n, err := b.svc.SendDue(ctx)
			require.NoError(t, err)
			require.Zero(t, n, "held by the killed replica")
			require.Empty(t, b.gh.Calls("/statuses/"))
			b.clock.Advance(30 * time.Second)
			for range 2 {
				_, err = b.svc.SendDue(ctx)
				require.NoError(t, err)
			}
			statuses := b.gh.Calls("/statuses/")
			require.Len(t, statuses, 1)
			require.Equal(t, "success", statuses[0].Body["state"])
			ok, err := b.store.FinishOutbox(ctx, &killed[0], store.OutboxOutcome{Done: true, Now: b.clock.Now()})
			require.NoError(t, err)
			require.False(t, ok, "the killed replica's claim is no longer its")
			got, err := b.store.GetGithubOutbox(ctx, "github.com", "status:"+groupID)
			require.NoError(t, err)
			require.Equal(t, "sent", got.State)
		})
	}
}

// TestProcessorKilledHoldingDeliveryLease: a replica claimed a stored
// push delivery (its outbox message) and was killed before recording
// anything: the delivery waits for the claim's lease, then another
// replica processes it, once: one build, one task, one pending status,
// and the killed replica's claim can record nothing. On both drivers.
func TestProcessorKilledHoldingDeliveryLease(t *testing.T) {
	t.Parallel()
	for _, driver := range apitest.Drivers() {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			db, _ := apitest.OpenStore(t, driver)
			b := setupOn(t, db)
			push := example(t, "push", 4)
			sha := push["after"].(string)
			b.gh.Install("Codertocat", "Hello-World", 1)
			b.gh.SetFile("Codertocat", "Hello-World", sha, ".taskcluster.yml", decisionTask)
			b.role(t, "repo:github.com/Codertocat/Hello-World:branch:master")
			body, err := json.Marshal(push)
			require.NoError(t, err)
			id := uuid.NewString()
			status, _ := b.deliver(t, "push", id, body, webhookSecret)
			require.Equal(t, http.StatusNoContent, status)
			ctx := context.Background()
			lease := b.clock.Now().Add(b.svc.Lease)
			killed, err := b.store.ClaimGithubDelivery(ctx, b.clock.Now(), lease)
			require.NoError(t, err)
			require.Equal(t, id, killed.DeliveryID)

			b.clock.Advance(time.Second)
			n, err := b.svc.ProcessDue(ctx)
			require.NoError(t, err)
			require.Zero(t, n, "held by the killed replica")
			b.clock.Advance(b.svc.Lease)
			for range 2 {
				_, err = b.svc.ProcessDue(ctx)
				require.NoError(t, err)
				require.NoError(t, b.svc.Report(ctx))
			}
			d, err := b.store.GetGithubDelivery(ctx, "github.com", id)
			require.NoError(t, err)
			require.Equal(t, store.DeliveryDone, d.State, d.Error)
			require.Equal(t, 2, d.Attempts, "the killed claim and the one that processed it")
			builds := b.builds(t)
			require.Len(t, builds, 1)
			require.Len(t, b.groupTasks(t, builds[0].TaskGroupID), 1)
			require.Len(t, b.gh.Calls("/statuses/"), 1, "one pending status")
			err = b.store.FinishGithubDelivery(ctx, store.FinishGithubDeliveryParams{Host: "github.com", DeliveryID: id, Lease: lease,
				State: store.DeliveryFailed, Error: "killed", Now: b.clock.Now()})
			require.ErrorIs(t, err, store.ErrLeaseLost)
		})
	}
}
