package authapi_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/authapi"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// TestKeyringReplicas: replicas sharing a database and the server key,
// starting at once and rotating at once, sign with and publish the same
// keys, on both drivers.
func TestKeyringReplicas(t *testing.T) {
	t.Parallel()
	for _, driver := range apitest.Drivers() {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			_, open := apitest.OpenStore(t, driver)
			key := [32]byte{1, 2, 3}
			sealer, err := auth.NewSealer(key[:])
			require.NoError(t, err)
			clock := testclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			const replicas = 4
			rings := make([]*authapi.Keyring, replicas)
			for i := range rings {
				rings[i] = authapi.NewKeyring(open(), sealer, clock)
			}
			ctx := context.Background()
			race := func() []auth.KeySchedule {
				out := make([]auth.KeySchedule, replicas)
				var wg sync.WaitGroup
				errs := make([]error, replicas)
				for i, r := range rings {
					wg.Go(func() { out[i], _, errs[i] = r.Schedule(ctx) })
				}
				wg.Wait()
				for _, err := range errs {
					require.NoError(t, err)
				}
				return out
			}
			same := func(got []auth.KeySchedule, n int) {
				t.Helper()
				for _, s := range got {
					require.Len(t, s, n)
					for i := range s {
						require.Equal(t, got[0][i].KeyID, s[i].KeyID)
						require.True(t, got[0][i].Private.Equal(s[i].Private))
					}
				}
			}
			same(race(), 1)
			clock.Advance(auth.SigningKeyRotation - auth.SigningKeyLead)
			got := race()
			same(got, 2)
			now := clock.Now()
			require.Equal(t, got[0][0].KeyID, got[0].Signing(now).KeyID, "the old key signs until the new one activates")
			require.Len(t, got[0].JWKS(now).Keys, 2, "the new key is published before it signs")
		})
	}
}
