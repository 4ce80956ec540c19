package api

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBodyScanCountsValuesAndDepth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		json          string
		values, depth int
	}{
		{`{}`, 1, 1},
		{`{"a":1,"b":[true,null,"x"]}`, 8, 2}, // keys count too
		{`[{},{},{}]`, 4, 2},
		{`"a string with { and [ and \" inside"`, 1, 0},
		{`{"k":"\\"}`, 3, 1},
		{` [ 1 , -2.5e3 , [ [ ] ] ] `, 5, 3},
	}
	for _, tt := range tests {
		// Fed whole, and one byte at a time: the same counts.
		var whole, bytewise bodyScan
		whole.feed([]byte(tt.json))
		for i := range len(tt.json) {
			bytewise.feed([]byte(tt.json[i : i+1]))
		}
		for _, s := range []bodyScan{whole, bytewise} {
			require.Equal(t, tt.values, s.values, tt.json)
			require.Equal(t, tt.depth, s.maxDepth, tt.json)
		}
	}
}

func TestBodyBudgetWaitsThenRefuses(t *testing.T) {
	t.Parallel()
	b := newBodyBudget(100)
	ctx := context.Background()
	require.NoError(t, b.acquire(ctx, 60, time.Now().Add(time.Second)))
	// No room: refused once the wait is over.
	require.ErrorIs(t, b.acquire(ctx, 60, time.Now().Add(10*time.Millisecond)), errBodyBudget)
	// Room freed while waiting: the wait ends with it.
	done := make(chan error, 1)
	go func() { done <- b.acquire(ctx, 60, time.Now().Add(time.Minute)) }()
	b.release(60)
	require.NoError(t, <-done)
	b.release(60)
	require.NoError(t, b.acquire(ctx, 100, time.Now()))
}
