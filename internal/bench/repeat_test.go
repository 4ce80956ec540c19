package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRepeatConcurrently(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	for _, tc := range []struct {
		name           string
		concurrency, n int
		failAt         int64 // the call that fails (0: none)
		wantCalls      int64
		wantErr        error
	}{
		{name: "every call made once", concurrency: 4, n: 100, wantCalls: 100},
		{name: "more goroutines than calls", concurrency: 8, n: 3, wantCalls: 3},
		{name: "nothing to do", concurrency: 4, n: 0, wantCalls: 0},
		{name: "the first error stops the rest", concurrency: 1, n: 100, failAt: 5, wantCalls: 5, wantErr: boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int64
			err := repeatConcurrently(context.Background(), tc.concurrency, tc.n, func(context.Context) error {
				if calls.Add(1) == tc.failAt {
					return boom
				}
				return nil
			})
			require.ErrorIs(t, err, tc.wantErr)
			require.Equal(t, tc.wantCalls, calls.Load())
		})
	}
}
