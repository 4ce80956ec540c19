package workermanager_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	wm "github.com/hopper-ci/hopper/internal/workermanager"
)

var now = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func TestToSpawn(t *testing.T) {
	t.Parallel()
	c := wm.Capacity{Min: 1, Max: 10, ScalingRatio: 1, PerWorker: 1}
	for _, tc := range []struct {
		name string
		c    wm.Capacity
		d    wm.Demand
		want int
	}{
		{"idle pool below its minimum gets it", c, wm.Demand{}, 1},
		{"idle pool at its minimum stays", c, wm.Demand{Running: 1}, 0},
		{"backlog grows the pool", c, wm.Demand{Pending: 5, Running: 1, Claimed: 1}, 5},
		{"idle running capacity takes pending work first", c, wm.Demand{Pending: 3, Running: 3}, 0},
		{"requested capacity counts as coming", c, wm.Demand{Pending: 4, Requested: 4}, 0},
		{"never past the maximum", c, wm.Demand{Pending: 100, Running: 4, Claimed: 4}, 6},
		{"stopping capacity counts until it has stopped", c, wm.Demand{Pending: 100, Running: 4, Claimed: 4, Stopping: 6}, 0},
		{"scaling ratio halves the growth, rounded up", wm.Capacity{Max: 10, ScalingRatio: 0.5}, wm.Demand{Pending: 5}, 3},
		{"zero maximum never spawns", wm.Capacity{Min: 0, Max: 0, ScalingRatio: 1}, wm.Demand{Pending: 9}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, wm.ToSpawn(tc.c, tc.d))
		})
	}
}

func staticPool(config string) *wm.Pool {
	return &wm.Pool{WorkerPoolID: "prov/type", ProviderID: "static", Config: json.RawMessage(config)}
}

func TestLifecycleDefaults(t *testing.T) {
	t.Parallel()
	l := staticPool(`{}`).Lifecycle()
	require.Equal(t, wm.Lifecycle{ReregistrationTimeout: 96 * time.Hour, QueueInactivityTimeout: 2 * time.Hour}, l)
	l = staticPool(`{"lifecycle":{"registrationTimeout":600,"reregistrationTimeout":3600,"queueInactivityTimeout":1800}}`).Lifecycle()
	require.Equal(t, wm.Lifecycle{RegistrationTimeout: 10 * time.Minute, ReregistrationTimeout: time.Hour, QueueInactivityTimeout: 30 * time.Minute}, l)
	require.JSONEq(t, `{}`, string(staticPool(`{}`).WorkerConfig()))
	require.JSONEq(t, `{"a":1}`, string(staticPool(`{"workerConfig":{"a":1}}`).WorkerConfig()))
	require.Error(t, wm.CheckConfig(wm.ProviderTypeDocker, json.RawMessage(`{"minCapacity":3,"maxCapacity":2}`)))
	require.Error(t, wm.CheckConfig(wm.ProviderTypeKubernetes, json.RawMessage(`{"minCapacity":3,"maxCapacity":2}`)))
}

// TestCapacityPerWorker: a dynamic pool counts each worker at the
// capacity its worker is told to run with (the pool page said 1 where
// the worker ran 2 tasks at once), and a config saying two different
// things is refused.
func TestCapacityPerWorker(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		config string
		want   int
		ok     bool
	}{
		{`{"minCapacity":0,"maxCapacity":4}`, 1, true},
		{`{"minCapacity":0,"maxCapacity":4,"capacityPerWorker":3}`, 3, true},
		{`{"minCapacity":0,"maxCapacity":4,"workerConfig":{"hopperWorker":{"capacity":2}}}`, 2, true},
		{`{"minCapacity":0,"maxCapacity":4,"capacityPerWorker":2,"workerConfig":{"hopperWorker":{"capacity":2}}}`, 2, true},
		{`{"minCapacity":0,"maxCapacity":4,"capacityPerWorker":1,"workerConfig":{"hopperWorker":{"capacity":2}}}`, 1, false},
	} {
		pool := &wm.Pool{WorkerPoolID: "prov/type", ProviderID: "docker", Config: json.RawMessage(tc.config)}
		require.Equal(t, tc.want, pool.Capacity().PerWorker, tc.config)
		err := wm.CheckConfig(wm.ProviderTypeDocker, pool.Config)
		require.Equal(t, tc.ok, err == nil, "%s: %v", tc.config, err)
	}
	require.Equal(t, 2, staticPool(`{"workerConfig":{"hopperWorker":{"capacity":2}}}`).WorkerCapacity())
	require.Equal(t, 0, staticPool(`{}`).WorkerCapacity())
}

func TestStaticRegistration(t *testing.T) {
	t.Parallel()
	pool := staticPool(`{"lifecycle":{"reregistrationTimeout":3600}}`)
	secret := "s3cret"
	_, err := wm.NewStaticWorker(pool, "g", "w", 1, now.Add(time.Hour), "", now)
	require.ErrorContains(t, err, "staticSecret")
	_, err = wm.NewStaticWorker(pool, "g", "w", 1, now.Add(-time.Hour), secret, now)
	require.ErrorContains(t, err, "future")
	w, err := wm.NewStaticWorker(pool, "g", "w", 0, now.Add(24*time.Hour), secret, now)
	require.NoError(t, err)
	require.Equal(t, wm.StateRunning, w.State)
	require.Equal(t, 1, w.Capacity)
	require.NotContains(t, w.StaticSecretHash, secret)
	require.True(t, w.SameStaticWorker("static", secret))
	require.False(t, w.SameStaticWorker("static", "other"))

	_, err = w.Register(pool, wm.ProviderTypeStatic, "static", "wrong", "next-1", now)
	require.ErrorContains(t, err, "bad staticSecret")
	_, err = w.Register(pool, wm.ProviderTypeStatic, "other", secret, "next-1", now)
	require.ErrorContains(t, err, "does not have provider")
	reg, err := w.Register(pool, wm.ProviderTypeStatic, "static", secret, "next-1", now)
	require.NoError(t, err)
	require.Equal(t, now.Add(time.Hour), reg.Expires)
	require.Equal(t, now, w.RegisteredAt)
	// A static machine registers again after a restart.
	_, err = w.Register(pool, wm.ProviderTypeStatic, "static", secret, "next-2", now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, now, w.RegisteredAt, "the first registration's time stays")

	_, err = w.Reregister(pool, "next-1", "next-3", now.Add(2*time.Minute))
	require.ErrorContains(t, err, "Could not generate credentials", "a superseded secret is refused")
	reg, err = w.Reregister(pool, "next-2", "next-3", now.Add(2*time.Minute))
	require.NoError(t, err)
	require.Equal(t, now.Add(2*time.Minute+time.Hour), reg.Expires)
	// The answer carrying next-3 was lost: next-2 is good again, until
	// the secret it is traded for is used.
	_, err = w.Reregister(pool, "next-2", "next-4", now.Add(3*time.Minute))
	require.NoError(t, err, "the secret of a reregistration whose answer was lost")
	_, err = w.Reregister(pool, "next-3", "next-5", now.Add(3*time.Minute))
	require.Error(t, err, "the lost secret was replaced")
	_, err = w.Reregister(pool, "next-4", "next-5", now.Add(3*time.Minute))
	require.NoError(t, err)
	_, err = w.Reregister(pool, "next-2", "next-6", now.Add(3*time.Minute))
	require.Error(t, err, "using the new secret retires the old")
	_, err = w.Reregister(pool, "next-3", "next-6", now.Add(3*time.Minute))
	require.Error(t, err)

	require.True(t, w.Remove(wm.ProviderTypeStatic, now.Add(4*time.Minute)))
	require.Equal(t, wm.StateStopped, w.State)
	require.False(t, w.Remove(wm.ProviderTypeStatic, now.Add(5*time.Minute)), "removing twice changes nothing")
	_, err = w.Register(pool, wm.ProviderTypeStatic, "static", secret, "next-5", now.Add(5*time.Minute))
	require.ErrorContains(t, err, "not running")
	_, err = w.Reregister(pool, "next-5", "next-7", now.Add(5*time.Minute))
	require.Error(t, err, "a removed worker reregisters with no secret")
	_, err = w.Reregister(pool, "next-4", "next-7", now.Add(5*time.Minute))
	require.Error(t, err)

	expired, err := wm.NewStaticWorker(pool, "g", "x", 1, now.Add(time.Minute), secret, now)
	require.NoError(t, err)
	_, err = expired.Register(pool, wm.ProviderTypeStatic, "static", secret, "n", now.Add(2*time.Minute))
	require.ErrorContains(t, err, "expired")
}

func TestDynamicRegistrationIsOnce(t *testing.T) {
	t.Parallel()
	pool := &wm.Pool{WorkerPoolID: "prov/type", ProviderID: "docker", Config: json.RawMessage(`{"lifecycle":{"registrationTimeout":300}}`)}
	w := wm.NewRequestedWorker(pool, "host", "c1", 1, now)
	w.StaticSecretHash = wm.HashSecret("proof")
	require.Equal(t, wm.StateRequested, w.State)
	require.Equal(t, now.Add(5*time.Minute), w.TerminateAfter)
	_, err := w.Register(pool, wm.ProviderTypeDocker, "docker", "proof", "s1", now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, wm.StateRunning, w.State)
	_, err = w.Register(pool, wm.ProviderTypeDocker, "docker", "proof", "s2", now.Add(2*time.Minute))
	require.ErrorContains(t, err, "already running", "a container registers once")
	require.True(t, w.Remove(wm.ProviderTypeDocker, now.Add(3*time.Minute)))
	require.Equal(t, wm.StateStopping, w.State)
	w.Stopped(now.Add(4 * time.Minute))
	require.Equal(t, wm.StateStopped, w.State)
}

func TestScan(t *testing.T) {
	t.Parallel()
	l := wm.Lifecycle{RegistrationTimeout: 5 * time.Minute, ReregistrationTimeout: time.Hour, QueueInactivityTimeout: 30 * time.Minute}
	requested := &wm.Worker{State: wm.StateRequested, Created: now, Expires: now.Add(48 * time.Hour), TerminateAfter: now.Add(5 * time.Minute)}
	running := &wm.Worker{State: wm.StateRunning, Created: now, RegisteredAt: now, Expires: now.Add(48 * time.Hour), TerminateAfter: now.Add(time.Hour)}
	for _, tc := range []struct {
		name     string
		w        *wm.Worker
		provider string
		act      wm.Activity
		keep     bool
		at       time.Duration
		remove   bool
	}{
		{"requested within its registration timeout stays", requested, "docker", wm.Activity{}, false, 4 * time.Minute, false},
		{"requested past its registration timeout goes", requested, "docker", wm.Activity{}, false, 6 * time.Minute, true},
		{"running and busy stays", running, "docker", wm.Activity{FirstClaim: now, LastDateActive: now.Add(20 * time.Minute)}, false, 40 * time.Minute, false},
		{"running and idle past queueInactivityTimeout goes", running, "docker", wm.Activity{FirstClaim: now, LastDateActive: now}, false, 31 * time.Minute, true},
		{"never claimed past queueInactivityTimeout goes", running, "docker", wm.Activity{}, false, 31 * time.Minute, true},
		{"idle but needed for the minimum stays", running, "docker", wm.Activity{}, true, 31 * time.Minute, false},
		{"missed reregistration goes even when needed", running, "docker", wm.Activity{}, true, 61 * time.Minute, true},
		{"static workers are never idle-stopped", running, "static", wm.Activity{}, false, 61 * time.Minute, false},
		{"static workers go at expiry", running, "static", wm.Activity{}, false, 49 * time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := *tc.w
			v := wm.Scan(&w, tc.provider, l, tc.act, tc.keep, now.Add(tc.at))
			require.Equal(t, tc.remove, v.Remove, v.Reason)
		})
	}
	stopped := &wm.Worker{State: wm.StateStopped, Expires: now}
	require.True(t, wm.Scan(stopped, "static", l, wm.Activity{}, false, now.Add(time.Second)).Expire)
}

func TestCredentialScopesAndClientID(t *testing.T) {
	t.Parallel()
	w := &wm.Worker{WorkerPoolID: "prov/type", WorkerGroup: "g", WorkerID: "w", ProviderID: "static"}
	require.Equal(t, "worker/static/prov/type/g/w", w.ClientID())
	require.Contains(t, w.CredentialScopes(), "queue:claim-work:prov/type")
	require.Contains(t, w.CredentialScopes(), "worker-manager:reregister-worker:prov/type/g/w")
}

func TestSummariseErrors(t *testing.T) {
	t.Parallel()
	errs := []wm.PoolError{
		{WorkerPoolID: "p/a", Reported: now.Add(-time.Hour), Kind: "k1", Title: "t1"},
		{WorkerPoolID: "p/a", Reported: now.Add(-48 * time.Hour), Kind: "k1", Title: "t2", LaunchConfigID: "lc"},
		{WorkerPoolID: "p/b", Reported: now.Add(-8 * 24 * time.Hour), Kind: "k2", Title: "t3"},
	}
	s := wm.SummariseErrors(errs, now, true)
	require.Equal(t, 2, s.Total)
	require.Len(t, s.Daily, 7)
	require.Len(t, s.Hourly, 24)
	require.Equal(t, map[string]int{"t1": 1, "t2": 1}, s.Title)
	require.Equal(t, map[string]int{"unknown": 1, "lc": 1}, s.LaunchConfig)
	sum := 0
	for _, v := range s.Hourly {
		sum += v
	}
	require.Equal(t, 1, sum)
}
