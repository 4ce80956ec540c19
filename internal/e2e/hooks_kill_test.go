package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/hooks"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// hookLease is how long a replica holds a due hook while firing it (the
// Firer's default): a killed firing replica holds the hook that long.
const hookLease = 10 * time.Second

// TestHookDueTimesSurviveKilledFiringReplicas runs two `hopper serve`
// replicas on one PostgreSQL database with two hooks due every two and
// every three seconds, and three times kills (SIGKILL) a replica while it
// is firing a hook: the test holds a lock on the table of fire records,
// waits until a replica that created a scheduled fire's task waits on it
// to record the fire (holding the hook's lease and its row), kills that
// replica, lets the lock go and starts the replica again. A replica was up throughout, so no due time may be
// lost: the other replica takes the hook over when the dead one's lease
// ends and fires every due time since, each once, and the schedule goes
// on from those due times.
func TestHookDueTimesSurviveKilledFiringReplicas(t *testing.T) {
	t.Parallel()
	db := e2e.FreshPostgres(t)
	env := []string{"HOPPER_SECRET_KEY=" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"}
	// Each replica names its connections, so pg_stat_activity says which
	// replica a waiting createTask belongs to.
	start := func(name, dataDir string) *e2e.Server {
		u, err := url.Parse(db)
		require.NoError(t, err)
		q := u.Query()
		q.Set("application_name", name)
		u.RawQuery = q.Encode()
		return e2e.StartServer(t, e2e.ServerOptions{Args: []string{"--db", u.String()}, Env: env, DataDir: dataDir})
	}
	replicas := map[string]*e2e.Server{"hopper-a": start("hopper-a", ""), "hopper-b": start("hopper-b", "")}
	client := rootClient(replicas["hopper-b"])
	const patience = 2 * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, db)
	require.NoError(t, err)
	defer conn.Close(context.Background())

	const group, tq = "e2e-kill", "e2e-kill/hooks"
	schedules := map[string]string{"every-2s": "*/2 * * * * *", "every-3s": "*/3 * * * * *"}
	_, err = client.CreateRole(ctx, "hook-id:"+group+"/*", &tcclient.RoleRequest{Description: "scheduled e2e hooks",
		Scopes: []string{"queue:create-task:lowest:" + tq, "queue:create-task:project:none", "queue:scheduler-id:-"}})
	require.NoError(t, err)
	for id, pattern := range schedules {
		_, err = client.CreateHook(ctx, group, id, &tcclient.Hook{
			Metadata: json.RawMessage(`{"name":"` + id + `","description":"e2e","owner":"e2e@example.com"}`),
			Schedule: []string{pattern},
			Task: json.RawMessage(`{"taskQueueId":"` + tq + `","created":{"$fromNow":"0 seconds"},"deadline":{"$fromNow":"1 hour"},
				"payload":{},"metadata":{"name":"due ${now}","description":"${firedBy}","owner":"e2e@example.com","source":"https://example.com"}}`),
		})
		require.NoError(t, err)
	}
	// latestDue is the due time of a hook's newest fire record (its
	// task's created), zero before the first. A hook fires its due times
	// in order, so the newest record is the latest due time.
	latestDue := func(id string) time.Time {
		fires, err := client.AllLastFires(ctx, group, id)
		require.NoError(t, err)
		if len(fires) == 0 {
			return time.Time{}
		}
		task, err := client.Task(ctx, fires[0].TaskID)
		require.NoError(t, err)
		return task.Created.Time
	}
	firedSince := func(at time.Time) func() bool {
		return func() bool {
			for id := range schedules {
				if !latestDue(id).After(at) {
					return false
				}
			}
			return true
		}
	}
	testclock.WaitFor(t, patience, "both hooks to fire", firedSince(time.Time{}))

	const kills = 3
	var lastKill time.Time
	for k := range kills {
		lock, err := conn.Begin(ctx)
		require.NoError(t, err)
		_, err = lock.Exec(ctx, "LOCK TABLE hook_last_fires IN SHARE ROW EXCLUSIVE MODE")
		require.NoError(t, err)
		var victim string
		testclock.WaitFor(t, patience, "a replica's scheduled fire to wait to be recorded", func() bool {
			// The lock is held in this test's connection, so a separate
			// one asks who waits on it.
			err := conn.QueryRow(ctx, `SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
				WHERE NOT l.granted AND l.relation = 'hook_last_fires'::regclass ORDER BY a.query_start LIMIT 1`).Scan(&victim)
			return err == nil
		})
		srv := replicas[victim]
		require.NotNil(t, srv, "waiting connection of %q", victim)
		require.NoError(t, srv.Signal(syscall.SIGKILL))
		<-srv.Done()
		lastKill = time.Now()
		require.NoError(t, lock.Rollback(ctx))
		t.Logf("kill %d: %s, firing a scheduled hook, at %s", k+1, victim, lastKill.Format(time.TimeOnly+".000"))
		replicas[victim] = start(victim, srv.DataDir)
		if victim == "hopper-b" {
			client = rootClient(replicas[victim])
		}
		// Both hooks fire again for due times after the dead replica's
		// lease: the takeover is over.
		testclock.WaitFor(t, patience, fmt.Sprintf("the hooks to fire again after kill %d", k+1), firedSince(lastKill.Add(hookLease+time.Second)))
	}

	// Stop the schedules and let fires in flight end (every task created
	// has its fire record) before counting.
	for id := range schedules {
		_, err = client.UpdateHook(ctx, group, id, &tcclient.Hook{
			Metadata: json.RawMessage(`{"name":"stopped","description":"e2e","owner":"e2e@example.com"}`),
			Task:     json.RawMessage(`{}`),
		})
		require.NoError(t, err)
	}
	var fires map[string][]tcclient.HookFire
	testclock.WaitFor(t, patience, "every task to have its fire record and no more", func() bool {
		fires = map[string][]tcclient.HookFire{}
		total := 0
		for id := range schedules {
			f, err := client.AllLastFires(ctx, group, id)
			require.NoError(t, err)
			fires[id], total = f, total+len(f)
		}
		counts, err := client.TaskQueueCounts(ctx, tq)
		require.NoError(t, err)
		return counts.PendingTasks == total
	})

	var expected, fired, duplicated, lost int
	for id, pattern := range schedules {
		count := map[time.Time]int{}
		for _, f := range fires[id] {
			require.Equal(t, "success", f.Result, "fire %+v", f)
			task, err := client.Task(ctx, f.TaskID)
			require.NoError(t, err)
			count[task.Created.Time.UTC()]++
		}
		var dues []time.Time
		for due := range count {
			dues = append(dues, due)
		}
		sort.Slice(dues, func(i, j int) bool { return dues[i].Before(dues[j]) })
		first, last := dues[0], dues[len(dues)-1]
		require.True(t, last.After(lastKill.Add(hookLease)), "%s fired after the last takeover", id)
		sched, err := hooks.ParseSchedule([]string{pattern})
		require.NoError(t, err)
		var missing []string
		for due := first; !due.After(last); due, _ = sched.Next(due) {
			expected++
			switch n := count[due]; {
			case n == 0:
				lost++
				missing = append(missing, due.Format(time.TimeOnly))
			case n > 1:
				duplicated++
				fired++
			default:
				fired++
			}
		}
		t.Logf("%s: due times %s to %s, %d fires; lost: %v", id, first.Format(time.TimeOnly), last.Format(time.TimeOnly), len(fires[id]), missing)
	}
	t.Logf("%d kills of the firing replica: %d due times expected, %d fired, %d lost, %d fired more than once",
		kills, expected, fired, lost, duplicated)
	require.Zero(t, duplicated, "due times fired more than once")
	require.Zero(t, lost, "due times lost while a replica was up")
	require.Equal(t, expected, len(fires["every-2s"])+len(fires["every-3s"]), "one fire record per due time")
}
