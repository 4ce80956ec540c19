package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/maintenance"
	"github.com/hopper-ci/hopper/internal/store/sqlite"
	"github.com/hopper-ci/hopper/internal/store/storetest"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// BenchmarkIdlePass measures, on SQLite, one tick of claim expiry and deadline
// resolution when nothing is due: what every replica pays four times a
// second, over a backlog of 1000 claimed tasks.
func BenchmarkIdlePass(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, b.TempDir()+"/hopper.db")
	require.NoError(b, err)
	b.Cleanup(func() { _ = st.Close() })
	clock := testclock.New(time.Now())
	bb := &bundle{store: st, clock: clock, pub: &storetest.ChangeRecorder{}}
	for range 1000 {
		bb.createClaimed(b, tcclient.NewTaskID(), time.Hour)
	}
	claims := &maintenance.ClaimExpirer{Store: st, Clock: clock}
	deadlines := &maintenance.DeadlineResolver{Store: st, Clock: clock, Delay: time.Minute}
	for b.Loop() {
		n, err := claims.RunOnce(ctx)
		if err != nil || n != 0 {
			b.Fatalf("claims: %d, %v", n, err)
		}
		n, err = deadlines.RunOnce(ctx)
		if err != nil || n != 0 {
			b.Fatalf("deadlines: %d, %v", n, err)
		}
	}
}
