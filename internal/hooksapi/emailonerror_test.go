package hooksapi_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestScheduledFailureEmailsTheOwner: a scheduled fire that creates no
// task (its role lacks a scope, or its template does not render) queues
// one email to the hook's owner with the error, as Taskcluster's
// emailOnError does; emailOnError: false and successful fires send
// nothing, and a fire finished twice mails once.
func TestScheduledFailureEmailsTheOwner(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers() {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setupOn(t, driver)
			b.firer.RootURL = "https://hopper.example.com"
			ctx := context.Background()
			create := func(group, id, metadata string, task json.RawMessage) {
				_, err := b.root.CreateHook(ctx, group, id, &tcclient.Hook{Metadata: json.RawMessage(metadata),
					Schedule: []string{"0 * * * * *"}, Task: task})
				require.NoError(t, err)
			}
			b.hookRole(t, "ok")
			create("ok", "fine", `{"name":"n","description":"d","owner":"fine@example.com"}`, taskTemplate(""))
			create("noscope", "nightly", `{"name":"n","description":"d","owner":"team@example.com"}`, taskTemplate(""))
			create("render", "broken", `{"name":"n","description":"d","owner":"dev@example.com","emailOnError":true}`,
				taskTemplate(`,"extra":{"subject":"${status.state}"}`))
			create("quiet", "nightly", `{"name":"n","description":"d","owner":"quiet@example.com","emailOnError":false}`, taskTemplate(""))

			b.clock.Set(b.nextDue(t, "ok", "fine").Add(100 * time.Millisecond))
			require.Equal(t, 4, b.fireDue(t, b.firer))
			require.Equal(t, "success", b.fires(t, "ok", "fine")[0].Result)

			sent, err := b.store.ClaimNotifications(ctx, store.ClaimNotificationsParams{Owner: "test", Now: b.clock.Now().Add(time.Minute),
				Lease: notify.Lease, Limit: 10, RateLimit: notify.RateLimitCount, RateWindow: notify.RateLimitWindow})
			require.NoError(t, err)
			mails := map[string]notify.Email{}
			for _, n := range sent {
				var m notify.Message
				require.NoError(t, json.Unmarshal(n.Message, &m))
				require.NotNil(t, m.Email)
				mails[n.Target] = *m.Email
			}
			require.Len(t, mails, 2, "the owners of the two failed hooks that want mail: %v", mails)
			mail := mails["team@example.com"]
			require.Equal(t, "Scheduled hook noscope/nightly created no task", mail.Subject)
			require.Contains(t, mail.Content, "InsufficientScopes")
			require.Contains(t, mail.Content, "hook-id:noscope/nightly")
			require.Equal(t, "https://hopper.example.com/ui/#/hooks/noscope/nightly", mail.Link.Href)
			require.Contains(t, mails["dev@example.com"].Content, "status")
		})
	}
}
