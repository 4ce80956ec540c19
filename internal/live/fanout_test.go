package live

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/events"
)

func message(i int) events.Message {
	return events.Message{Exchange: "task-pending", RoutingKey: "primary.x", Body: []byte(`{"n":` + strconv.Itoa(i) + `}`)}
}

// manualRing is a ring whose seals the test makes: a seal it would
// schedule is only noted.
func manualRing() (*ring, *int) {
	r := newRing()
	scheduled := new(int)
	r.afterFunc = func(time.Duration, func()) { *scheduled++ }
	return r, scheduled
}

// readAll reads what c has not read: the events, and the runs.
func readAll(t *testing.T, r *ring, c *cursor) ([]*frame, []*run) {
	t.Helper()
	runs, lost, _ := r.read(c, nil)
	require.False(t, lost)
	var frames []*frame
	for _, run := range runs {
		frames = append(frames, run.frames...)
	}
	return frames, runs
}

// TestSlowReaderIsDroppedNotWaitedFor: a reader that stops reading is
// dropped once the ring no longer holds what it has yet to read, while
// publishing goes on without it; readers that keep up get every event, in
// order, each event encoded once and each sealed run joined once for all
// of them.
func TestSlowReaderIsDroppedNotWaitedFor(t *testing.T) {
	t.Parallel()
	r, _ := manualRing()
	slow, fast, other := r.subscribe(), r.subscribe(), r.subscribe()
	var got, gotOther []*frame
	const n = 3 * ringFrames
	for i := range n {
		r.publish([]events.Message{message(i)})
		if i%64 == 63 {
			r.seal()
			f, runs := readAll(t, r, fast)
			fo, runsOther := readAll(t, r, other)
			require.Len(t, runs, 1)
			require.Same(t, runs[0], runsOther[0], "one run, shared")
			b := runs[0].bytes()
			require.Equal(t, &b[0], &runsOther[0].bytes()[0], "joined once")
			got, gotOther = append(got, f...), append(gotOther, fo...)
		}
	}
	_, lost, _ := r.read(slow, nil)
	require.True(t, lost, "the slow reader is told it lost events")
	require.Len(t, got, n)
	for i := range got {
		require.Same(t, got[i], gotOther[i], "one frame per event, shared")
		b := got[i].bytes()
		require.Equal(t, &b[0], &gotOther[i].bytes()[0], "encoded once")
		require.Contains(t, string(b), `"payload":{"n":`+strconv.Itoa(i)+`}`)
	}
	require.Equal(t, 3, r.count())
}

// TestRingSealsAtAPace: events are sealed within streamPace of the last
// seal (at once after a quiet time), one seal scheduled at a time; a
// reader behind reads each run it missed, shared with the others, and a
// reader waiting is woken by the seal.
func TestRingSealsAtAPace(t *testing.T) {
	t.Parallel()
	r := newRing()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return now }
	var delays []time.Duration
	r.afterFunc = func(d time.Duration, _ func()) { delays = append(delays, d) }
	behind, upToDate := r.subscribe(), r.subscribe()
	runs, _, more := r.read(upToDate, nil)
	require.Empty(t, runs)

	r.publish([]events.Message{message(0)})
	r.publish([]events.Message{message(1)})
	require.Equal(t, []time.Duration{0}, delays, "after a quiet time: at once, and once")
	runs, _, _ = r.read(upToDate, nil)
	require.Empty(t, runs, "nothing is read before its seal")
	r.seal()
	select {
	case <-more:
	default:
		t.Fatal("a reader waiting for more was not woken")
	}
	first, _ := readAll(t, r, upToDate)
	require.Len(t, first, 2)

	now = now.Add(100 * time.Millisecond)
	r.publish([]events.Message{message(2)})
	require.Equal(t, []time.Duration{0, streamPace - 100*time.Millisecond}, delays)
	r.seal()
	_, latest := readAll(t, r, upToDate)
	got, missed := readAll(t, r, behind)
	require.Len(t, got, 3)
	require.Len(t, missed, 2, "the two runs it missed")
	require.Same(t, latest[0], missed[1])
	r.seal()
	require.Len(t, delays, 2, "nothing new: nothing sealed")
}

// TestRingBounds: the ring holds at most ringFrames events and ringBytes
// of them, and nothing while nobody reads.
func TestRingBounds(t *testing.T) {
	t.Parallel()
	r, _ := manualRing()
	r.publish([]events.Message{message(0)})
	require.Zero(t, r.head, "nobody reads: nothing kept")

	c := r.subscribe()
	big := events.Message{Exchange: "task-pending", RoutingKey: "primary.x", Body: []byte(`"` + strings.Repeat("x", 1<<20) + `"`)}
	for range 40 {
		r.publish([]events.Message{big})
	}
	require.LessOrEqual(t, r.bytes, ringBytes)
	require.Less(t, r.head-r.tail, uint64(20), "big events are dropped by their size")
	r.seal()
	_, lost, _ := r.read(c, nil)
	require.True(t, lost)

	for i := range 2 * ringFrames {
		r.publish([]events.Message{message(i)})
	}
	require.Equal(t, uint64(ringFrames), r.head-r.tail)
	r.seal()
	for _, run := range r.runs {
		require.GreaterOrEqual(t, run.from, r.tail, "runs that lost events are let go")
	}

	r.publish([]events.Message{message(0)}) // not sealed yet
	r.unsubscribe()
	require.Equal(t, r.head, r.tail, "the last reader leaving empties the ring")
	require.Zero(t, r.bytes)
	next := r.subscribe()
	_, lost, _ = r.read(next, nil)
	require.False(t, lost, "the next reader starts afresh")
	r.unsubscribe()
	r.close()
	require.Nil(t, r.subscribe(), "a closed ring takes no readers")
}
