package worker

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/worker/superseding"
)

// recordingSet is a SecondarySet that resolves its claims superseded and
// records what the worker told it.
type recordingSet struct {
	claims []*Claim
	mu     sync.Mutex
	calls  []Outcome
	at     time.Time
}

func (s *recordingSet) Finish(ctx context.Context, primary superseding.Claim, o Outcome) {
	s.mu.Lock()
	s.calls = append(s.calls, o)
	s.at = time.Now()
	s.mu.Unlock()
	for _, c := range s.claims {
		c.StopReclaiming()
		if o.TaskCodeConcluded() {
			_, _ = c.Queue().ReportException(ctx, c.TaskID, c.RunID, tcclient.ReasonSuperseded)
		}
	}
}

func TestSupersedeHookSwapsPrimary(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{claimTimeout: 2 * time.Second})
	b.creds = b.fake.AddClient("superseding-worker", "queue:claim-work:"+testQueue, "queue:worker-id:tg/tw", "queue:claim-task:"+testQueue)
	b.cfg.Credentials = CredentialsConfig{ClientID: b.creds.ClientID, AccessToken: b.creds.AccessToken}
	initial := b.createTask(t, map[string]any{
		"command": [][]string{sh("echo initial-ran")}, "maxRunTime": 30,
		"supersederUrl": "https://superseder.example.com/v1/list/0/0/key",
	}, taskOpts{})
	newer := b.createTask(t, map[string]any{"command": [][]string{sh("echo newer-ran; sleep 2.5")}, "maxRunTime": 30}, taskOpts{})

	set := &recordingSet{}
	b.cfg.NumberOfTasksToRun = 1
	w := b.newWorker(t)
	var gotURL string
	w.supersede = func(ctx context.Context, req superseding.Request) (superseding.Result, error) {
		gotURL = req.SupersederURL
		require.Equal(t, initial, req.Initial.Ref().TaskID)
		tc, err := req.Host.Queue().ClaimTask(ctx, newer, 0, &tcclient.ClaimTaskRequest{WorkerGroup: "tg", WorkerID: "tw"})
		if err != nil {
			return superseding.Result{}, err
		}
		held, err := req.Host.HoldClaim(*tc)
		if err != nil {
			return superseding.Result{}, err
		}
		set.claims = []*Claim{req.Initial.(*Claim)}
		return superseding.Result{Primary: held, Secondaries: set, LogLines: []string{"superseding: primary " + newer}}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, err := w.Run(ctx)
	require.NoError(t, err)
	require.Equal(t, ExitOK, code)

	require.Equal(t, "https://superseder.example.com/v1/list/0/0/key", gotURL)
	require.Equal(t, tcclient.StateCompleted, b.status(t, newer).State)
	st := b.status(t, initial)
	require.Equal(t, tcclient.ReasonSuperseded, st.Runs[0].ReasonResolved)
	require.Len(t, set.calls, 1)
	require.Equal(t, Outcome{State: tcclient.StateCompleted}, set.calls[0])

	log := b.backingLog(t, newer, 0)
	require.Contains(t, log, "superseding: primary "+newer)
	require.Contains(t, log, "newer-ran")
	require.NotContains(t, log, "initial-ran")
	require.Empty(t, b.fake.Artifacts(initial, 0), "the superseded task's run got no uploads from the worker")

	// The initial claim kept being reclaimed while the newer task ran
	// (2-s claims, 2.5-s command), and Finish came before the primary's
	// resolution.
	var initialReclaims int
	var completedAt time.Time
	for _, r := range b.fake.Requests() {
		if strings.HasPrefix(r.Path, "/api/queue/v1/task/"+initial+"/runs/0/reclaim") && r.Status == 200 {
			initialReclaims++
		}
		if r.Path == "/api/queue/v1/task/"+newer+"/runs/0/completed" {
			completedAt = r.Time
		}
	}
	require.Positive(t, initialReclaims)
	require.True(t, set.at.Before(completedAt))
}

func TestSupersedeErrorRunsInitialTask(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	id := b.createTask(t, map[string]any{
		"command": [][]string{sh("echo ran")}, "maxRunTime": 30,
		"supersederUrl": "https://superseder.example.com/list",
	}, taskOpts{})
	b.cfg.NumberOfTasksToRun = 1
	w := b.newWorker(t)
	w.supersede = func(context.Context, superseding.Request) (superseding.Result, error) {
		return superseding.Result{}, context.DeadlineExceeded
	}
	code, err := w.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, ExitOK, code)
	require.Equal(t, tcclient.StateCompleted, b.status(t, id).State)
	require.Contains(t, b.backingLog(t, id, 0), "[taskcluster:warn ")
	require.Contains(t, b.backingLog(t, id, 0), "superseding skipped: context deadline exceeded")
}

func TestClaimLoopPacingAndRejectedCredentials(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.cfg.ClaimInterval = Duration{250 * time.Millisecond}
	b.cfg.IdleTimeout = Duration{1200 * time.Millisecond}
	w := b.newWorker(t)
	code, err := w.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, ExitOK, code, "idle timeout ends the worker normally")
	var starts []time.Time
	for _, r := range b.fake.Requests() {
		if strings.HasPrefix(r.Path, "/api/queue/v1/claim-work/") {
			starts = append(starts, r.Time)
		}
	}
	require.GreaterOrEqual(t, len(starts), 2)
	for i := 1; i < len(starts); i++ {
		require.GreaterOrEqual(t, starts[i].Sub(starts[i-1]), 250*time.Millisecond-60*time.Millisecond, "claimWork calls closer than ClaimInterval")
	}

	// Consecutive claimWork errors back off exponentially.
	b3 := setup(t, setupOpts{})
	b3.cfg.ClaimInterval = Duration{200 * time.Millisecond}
	b3.cfg.IdleTimeout = Duration{2500 * time.Millisecond}
	b3.fake.InjectFault("claimWork", 400, 400, 400)
	w3 := b3.newWorker(t)
	code, err = w3.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, ExitOK, code)
	starts = nil
	for _, r := range b3.fake.Requests() {
		if strings.HasPrefix(r.Path, "/api/queue/v1/claim-work/") {
			starts = append(starts, r.Time)
		}
	}
	require.GreaterOrEqual(t, len(starts), 4)
	// Arrival times at the fake jitter by the request latency, hence the
	// slack.
	const slack = 60 * time.Millisecond
	require.GreaterOrEqual(t, starts[1].Sub(starts[0]), 200*time.Millisecond-slack)
	require.GreaterOrEqual(t, starts[2].Sub(starts[1]), 400*time.Millisecond-slack)
	require.GreaterOrEqual(t, starts[3].Sub(starts[2]), 800*time.Millisecond-slack)
	require.Greater(t, starts[3].Sub(starts[2]), starts[2].Sub(starts[1])+200*time.Millisecond, "no exponential back-off")

	// Credentials the queue rejects on the first call stop the worker.
	b2 := setup(t, setupOpts{})
	b2.cfg.Credentials.AccessToken = "wrong"
	w2 := b2.newWorker(t)
	code, err = w2.Run(context.Background())
	require.Error(t, err)
	require.Equal(t, 1, code)
}

// TestHoldClaimRefusesARunAlreadyHeld: the queue answers a holder's
// repeated claimTask with the claim again, so a superseding step that
// claims a run this worker already holds must not get a second Claim (the
// task would run twice); once released, the run may be held again.
func TestHoldClaimRefusesARunAlreadyHeld(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	id := b.createTask(t, map[string]any{
		"command": [][]string{sh("echo ran")}, "maxRunTime": 30,
		"supersederUrl": "https://superseder.example.com/list",
	}, taskOpts{})
	b.cfg.NumberOfTasksToRun = 1
	w := b.newWorker(t)
	var holdErr error
	w.supersede = func(_ context.Context, req superseding.Request) (superseding.Result, error) {
		c := req.Initial.(*Claim)
		again := tcclient.TaskClaim{Status: c.Status, RunID: c.RunID, WorkerGroup: "tg", WorkerID: "tw",
			TakenUntil: tcclient.Time{Time: c.TakenUntil()}, Task: c.Task, Credentials: c.Credentials()}
		_, holdErr = req.Host.HoldClaim(again)
		return superseding.Result{}, holdErr
	}
	code, err := w.Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, ExitOK, code)
	require.ErrorContains(t, holdErr, "already held")
	require.Equal(t, tcclient.StateCompleted, b.status(t, id).State)
	require.Equal(t, 1, strings.Count(b.backingLog(t, id, 0), "ran\n"))
}

// TestClaimAgainAtOnceAfterWork: a worker whose last claimWork brought a
// task asks again as soon as it has free capacity, however long
// claimInterval is; only after an empty answer does it keep the gap. (A
// dependent task used to wait for the rest of a 5 s interval after its
// dependency completed.)
func TestClaimAgainAtOnceAfterWork(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.cfg.ClaimInterval = Duration{time.Hour}
	b.cfg.Capacity = 1
	b.cfg.NumberOfTasksToRun = 2
	first := b.createTask(t, map[string]any{"command": [][]string{sh("echo one")}, "maxRunTime": 30}, taskOpts{})
	second := b.createTask(t, map[string]any{"command": [][]string{sh("echo two")}, "maxRunTime": 30}, taskOpts{})
	w := b.newWorker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code, err := w.Run(ctx)
	require.NoError(t, ctx.Err(), "the second claim waited for claimInterval")
	require.NoError(t, err)
	require.Equal(t, ExitOK, code)
	require.Equal(t, tcclient.StateCompleted, b.status(t, first).State)
	require.Equal(t, tcclient.StateCompleted, b.status(t, second).State)
}
