package notifysend_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/clock"
	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/notifysend"
	"github.com/hopper-ci/hopper/internal/notifysend/chattest"
	"github.com/hopper-ci/hopper/internal/notifysend/mailpittest"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/store/postgres"
	"github.com/hopper-ci/hopper/internal/store/sqlite"
	"github.com/hopper-ci/hopper/internal/store/storetest"
	"github.com/hopper-ci/hopper/internal/testclock"
)

var schemaSeq atomic.Int64

// testQueue is the task queue of the tests' tasks.
const testQueue = "prov-notify/wt-notify"

// replicas opens n stores over one fresh database of the driver: n hopper
// replicas on one PostgreSQL schema, or one SQLite store n times.
func replicas(t testing.TB, driver string, n int) []store.Store {
	t.Helper()
	ctx := context.Background()
	if driver == "sqlite" {
		db, err := sqlite.Open(ctx, t.TempDir()+"/hopper.db")
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		out := make([]store.Store, n)
		for i := range out {
			out[i] = db
		}
		return out
	}
	url := os.Getenv("HOPPER_TEST_POSTGRES")
	if url == "" {
		t.Skip("HOPPER_TEST_POSTGRES not set: no PostgreSQL to test against")
	}
	schema := fmt.Sprintf("hopper_maint_notify_%d_%d", time.Now().UnixNano()%1e9, schemaSeq.Add(1))
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), url)
		if err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			_ = conn.Close(context.Background())
		}
	})
	var out []store.Store
	for range n {
		db, err := postgres.Open(ctx, url, postgres.Options{Schema: schema, MaxConns: 4})
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		out = append(out, db)
	}
	return out
}

// failTask creates a task with routes at now and drives it to failed.
func failTask(t testing.TB, st store.Store, taskID string, now time.Time, routes ...string) {
	t.Helper()
	ctx := context.Background()
	def := storetest.NewTask(testQueue, now, func(d *queue.Task) {
		d.Routes, d.TaskGroupID = routes, taskID
		d.Metadata.Name = "nightly " + taskID
	})
	_, err := st.CreateTask(ctx, store.CreateTaskParams{TaskID: taskID, Task: def, Now: now})
	require.NoError(t, err)
	for _, apply := range []func(*queue.TaskState, *queue.Transition) error{
		func(ts *queue.TaskState, tr *queue.Transition) error {
			return ts.Claim(0, "wg", "w1", now, now.Add(time.Hour), tr)
		},
		func(ts *queue.TaskState, tr *queue.Transition) error { return ts.ReportFailed(0, now, tr) },
	} {
		_, err := st.UpdateTask(ctx, store.UpdateTaskParams{TaskID: taskID, Now: now, Apply: apply})
		require.NoError(t, err)
	}
}

func newSender(st store.Store, d notifysend.Channels, clock clock.Clock, owner string) *notifysend.Sender {
	return &notifysend.Sender{Store: st, Deliver: d, Clock: clock, RootURL: "https://hopper.example", Owner: owner,
		Batch: 5, Concurrency: 3, Metrics: notifysend.NewMetrics(st),
		LogTail: func(_ context.Context, taskID string, runID int) (string, error) {
			return fmt.Sprintf("last line of %s run %d", taskID, runID), nil
		}}
}

// TestNotifySenderEmailOnce: failed tasks with email routes are mailed
// through a real SMTP server (Mailpit) by two senders racing on two
// replicas: every notification arrives exactly once, with the console link
// and the log's last line, and is recorded sent.
func TestNotifySenderEmailOnce(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			stores := replicas(t, driver, 2)
			mp := mailpittest.Start(t, mailpittest.Options{TLS: "starttls", Username: "ci", Password: "mail-pass-1"})
			d, err := notifysend.New(&notifysend.Config{SMTP: &notifysend.SMTPConfig{Host: "127.0.0.1", Port: mp.SMTPPort,
				CAFile: mp.CAFile, Username: "ci", Password: "mail-pass-1", From: "hopper@ci.example"}}, notifysend.Options{})
			require.NoError(t, err)
			clock := testclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			const tasks = 24
			for i := range tasks {
				failTask(t, stores[i%2], fmt.Sprintf("task-%02d", i), clock.Now(),
					fmt.Sprintf("notify.email.dev%02d@example.com.on-failed", i), "notify.email.ops@example.com.on-completed")
			}
			ctx := context.Background()
			var wg sync.WaitGroup
			for i, st := range stores {
				s := newSender(st, d, clock, fmt.Sprintf("sender-%d", i))
				wg.Go(func() {
					_, err := s.Drain(ctx)
					require.NoError(t, err)
				})
			}
			wg.Wait()
			got := mp.Messages(t)
			require.Len(t, got, tasks, "each notification once")
			seen := map[string]bool{}
			for _, m := range got {
				require.False(t, seen[m.MessageID], "message %s twice", m.MessageID)
				seen[m.MessageID] = true
			}
			m := mp.Message(t, got[0].ID)
			taskID := strings.TrimSuffix(strings.TrimPrefix(m.To[0].Address, "dev"), "@example.com")
			require.Equal(t, "[hopper] nightly task-"+taskID+": failed (task-"+taskID+")", m.Subject)
			require.Contains(t, m.Text, "https://hopper.example/ui/#/task/task-"+taskID)
			require.Contains(t, m.Text, "last line of task-"+taskID+" run 0")
			require.Contains(t, m.HTML, `href="https://hopper.example/ui/#/task/task-`+taskID+`"`)
			list, _, err := stores[0].ListTaskNotifications(ctx, "task-"+taskID, store.Page{})
			require.NoError(t, err)
			require.Len(t, list, 1)
			require.Equal(t, notify.StateSent, list[0].State)
			require.Equal(t, list[0].ID+"@ci.example", m.MessageID)
			states, err := stores[1].NotificationStates(ctx)
			require.NoError(t, err)
			require.Equal(t, map[string]int{notify.StateSent: tasks}, states)
		})
	}
}

// TestNotifySenderRetriesAndGivesUp: a mail server answering 451 leaves the
// notification pending, retried with back-off until notify.MaxAttempts,
// then failed with the reason; a channel hopper has no configuration for
// fails at once, saying so. The tasks' own life-cycles were never held up.
func TestNotifySenderRetriesAndGivesUp(t *testing.T) {
	t.Parallel()
	st := replicas(t, "sqlite", 1)[0]
	mp := mailpittest.Start(t, mailpittest.Options{Chaos: "Recipient:451:100"})
	d, err := notifysend.New(&notifysend.Config{SMTP: &notifysend.SMTPConfig{Host: "127.0.0.1", Port: mp.SMTPPort, TLS: "none",
		From: "hopper@ci.example"}}, notifysend.Options{})
	require.NoError(t, err)
	clock := testclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	failTask(t, st, "retry-me", clock.Now(), "notify.email.dev@example.com.on-failed", "notify.slack-channel.C0123.on-failed")
	ctx := context.Background()
	s := newSender(st, d, clock, "s")
	for attempt := 1; attempt <= notify.MaxAttempts; attempt++ {
		n, err := s.Drain(ctx)
		require.NoError(t, err)
		want := 1
		if attempt == 1 {
			want = 2 // and the Slack one, failed at once
		}
		require.Equal(t, want, n, "attempt %d", attempt)
		clock.Advance(notify.MaxRetry + time.Minute)
	}
	list, _, err := st.ListTaskNotifications(ctx, "retry-me", store.Page{})
	require.NoError(t, err)
	require.Len(t, list, 2)
	byChannel := map[string]store.Notification{}
	for _, n := range list {
		byChannel[n.Channel] = n
	}
	mail := byChannel[notify.ChannelEmail]
	require.Equal(t, notify.StateFailed, mail.State)
	require.Equal(t, notify.MaxAttempts, mail.Attempts)
	require.Contains(t, mail.Error, "451")
	require.Contains(t, mail.Error, "gave up after 8 attempts")
	slack := byChannel[notify.ChannelSlack]
	require.Equal(t, notify.StateFailed, slack.State)
	require.Equal(t, 1, slack.Attempts)
	require.Contains(t, slack.Error, "slack-channel channel is not configured")
	n, err := s.Drain(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to send")
	require.Empty(t, mp.Messages(t))
	task, err := st.GetTask(ctx, "retry-me")
	require.NoError(t, err)
	require.Equal(t, queue.StateFailed, task.State())
}

// BenchmarkNotifySenderSMTP measures notifications per second through the
// outbox: each iteration records 100 emails (not timed), then two senders
// on two replicas claim, send them to a local SMTP server (Mailpit, plain
// SMTP on loopback) and record them sent.
func BenchmarkNotifySenderSMTP(b *testing.B) {
	for _, driver := range []string{"sqlite", "postgres"} {
		b.Run(driver, func(b *testing.B) {
			stores := replicas(b, driver, 2)
			mp := mailpittest.Start(b, mailpittest.Options{})
			d, err := notifysend.New(&notifysend.Config{SMTP: &notifysend.SMTPConfig{Host: "127.0.0.1", Port: mp.SMTPPort, TLS: "none",
				From: "hopper@ci.example"}}, notifysend.Options{})
			require.NoError(b, err)
			clock := testclock.New(time.Now())
			ctx := context.Background()
			senders := []*notifysend.Sender{
				{Store: stores[0], Deliver: d, Clock: clock, Owner: "a", Batch: 32, Concurrency: 8},
				{Store: stores[1], Deliver: d, Clock: clock, Owner: "b", Batch: 32, Concurrency: 8},
			}
			const perIteration = 100
			sent, i := 0, 0
			for b.Loop() {
				b.StopTimer()
				for range perIteration {
					i++
					_, _, err := stores[i%2].EnqueueNotification(ctx, &notify.Message{Email: &notify.Email{
						Address: fmt.Sprintf("user%d@example.com", i), Subject: fmt.Sprintf("bench %d", i), Content: "hello"}}, clock.Now())
					require.NoError(b, err)
				}
				b.StartTimer()
				var wg sync.WaitGroup
				var total atomic.Int64
				for _, s := range senders {
					wg.Go(func() {
						n, err := s.Drain(ctx)
						require.NoError(b, err)
						total.Add(int64(n))
					})
				}
				wg.Wait()
				sent += int(total.Load())
			}
			b.ReportMetric(float64(sent)/b.Elapsed().Seconds(), "notifications/s")
		})
	}
}

// diesBeforeRecording is a store whose process dies after each send and
// before recording it: the outcome never reaches the database.
type diesBeforeRecording struct {
	store.Store
}

func (diesBeforeRecording) FinishNotification(context.Context, *store.Notification, notify.Outcome, time.Time) (bool, error) {
	return true, nil
}

// TestNotifySenderCrashBetweenSendAndRecord: a sender that dies after a
// send and before recording it leaves the notification leased; when the
// lease runs out another sender sends it again. The email arrives twice
// with one Message-ID; Matrix posts it once (the txnId is the
// notification's id). Nothing is lost.
func TestNotifySenderCrashBetweenSendAndRecord(t *testing.T) {
	t.Parallel()
	st := replicas(t, "sqlite", 1)[0]
	mp := mailpittest.Start(t, mailpittest.Options{})
	hs := chattest.NewMatrix(t, "syt_crash", "!room:localhost")
	d, err := notifysend.New(&notifysend.Config{
		SMTP:   &notifysend.SMTPConfig{Host: "127.0.0.1", Port: mp.SMTPPort, TLS: "none", From: "hopper@ci.example"},
		Matrix: &notifysend.MatrixConfig{BaseURL: hs.URL, AccessToken: "syt_crash"},
	}, notifysend.Options{})
	require.NoError(t, err)
	clock := testclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	failTask(t, st, "crashy", clock.Now(), "notify.email.dev@example.com.on-failed", "notify.matrix-room.!room:localhost.on-failed")

	dying := newSender(diesBeforeRecording{st}, d, clock, "dying")
	n, err := dying.Pass(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, n)
	list, _, err := st.ListTaskNotifications(context.Background(), "crashy", store.Page{})
	require.NoError(t, err)
	for _, n := range list {
		require.Equal(t, notify.StatePending, n.State, "sent, not recorded")
		require.Equal(t, "dying", n.LeaseOwner)
	}

	next := newSender(st, d, clock, "next")
	n, err = next.Drain(context.Background())
	require.NoError(t, err)
	require.Zero(t, n, "the lease holds")
	clock.Advance(notify.Lease + time.Second)
	n, err = next.Drain(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, n)
	list, _, err = st.ListTaskNotifications(context.Background(), "crashy", store.Page{})
	require.NoError(t, err)
	for _, n := range list {
		require.Equal(t, notify.StateSent, n.State)
		require.Equal(t, 2, n.Attempts)
	}
	mails := mp.Messages(t)
	require.Len(t, mails, 2, "email has no idempotency key: the copy is delivered")
	require.Equal(t, mails[0].MessageID, mails[1].MessageID, "with the same Message-ID")
	require.Len(t, hs.Events(), 1, "Matrix posts the event once")
	require.Equal(t, 2, hs.Puts())
}
