package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/postgres"
	"github.com/hopper-ci/hopper/internal/store/storetest"
)

// TestTransitionNotificationStatements: the notifications of a
// transition cost two statements of its transaction, however many fire:
// the notifications' insert and their outbox messages' insert.
func TestTransitionNotificationStatements(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	log := &postgres.StatementTracer{KeepText: true}
	db, err := postgres.Open(context.Background(), url, postgres.Options{Schema: newSchema(t, url), MaxConns: 4, Tracer: log})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, k := range []int{1, 5} {
		taskID := fmt.Sprintf("notify%dTaskAAAAAAAAAAAAAA", k)[:22]
		var routes []string
		for i := range k {
			routes = append(routes, fmt.Sprintf("notify.email.dev%d@example.com.on-failed", i))
		}
		def := storetest.NewTask("prov/notify-statements", now, func(d *queue.Task) { d.Routes = routes })
		_, err := db.CreateTask(ctx, store.CreateTaskParams{TaskID: taskID, Task: def, Now: now})
		require.NoError(t, err)
		_, err = db.UpdateTask(ctx, store.UpdateTaskParams{TaskID: taskID, Now: now, Apply: func(ts *queue.TaskState, tr *queue.Transition) error {
			return ts.Claim(0, "wg", "w", now, now.Add(time.Hour), tr)
		}})
		require.NoError(t, err)
		log.Take()
		_, err = db.UpdateTask(ctx, store.UpdateTaskParams{TaskID: taskID, Now: now, Apply: func(ts *queue.TaskState, tr *queue.Transition) error {
			return ts.ReportFailed(0, now, tr)
		}})
		require.NoError(t, err)
		sent := log.Take()
		var notifying []string
		for _, q := range sent {
			if strings.Contains(q, "notify_outbox") || strings.Contains(q, "INTO outbox") {
				notifying = append(notifying, strings.Fields(q)[2])
			}
		}
		t.Logf("reportFailed with %d notifications: %d statements sent (the process's), %d of them for the notifications", k, len(sent), len(notifying))
		require.Equal(t, []string{"notify_outbox", "outbox"}, notifying, "%d notifications", k)
	}
}
