package live

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/events"
)

// TestSlowStreamIsDroppedNotWaitedFor: a stream that stops reading is
// dropped once it is streamBuffer events behind, publishing never waits
// for it, the streams that keep up get every event, and each event is
// encoded once for all of them.
func TestSlowStreamIsDroppedNotWaitedFor(t *testing.T) {
	t.Parallel()
	h := NewHub()
	slow, cancelSlow := h.subscribe(nil)
	defer cancelSlow()
	fast, cancelFast := h.subscribe(nil)
	defer cancelFast()
	other, cancelOther := h.subscribe(nil)
	defer cancelOther()

	var got, gotOther []*frame
	done := make(chan struct{})
	go func() {
		defer close(done)
		for len(got) < 3*streamBuffer || len(gotOther) < 3*streamBuffer {
			select {
			case f := <-fast.frames:
				got = append(got, f)
			case f := <-other.frames:
				gotOther = append(gotOther, f)
			}
		}
	}()
	start := time.Now()
	for i := range 3 * streamBuffer {
		h.Publish(t.Context(), events.Message{Exchange: "task-pending", RoutingKey: "primary.x", Body: []byte(`{"n":` + itoa(i) + `}`)})
		if i%64 == 0 {
			// Let the readers keep up: only the slow one falls behind.
			time.Sleep(time.Millisecond)
		}
	}
	require.Less(t, time.Since(start), 10*time.Second)
	select {
	case <-slow.overflow:
	default:
		t.Fatal("the slow stream was not dropped")
	}
	<-done
	require.Len(t, got, 3*streamBuffer)
	for i := range got {
		require.Same(t, got[i], gotOther[i], "one frame per event, shared")
		b := got[i].bytes()
		require.Equal(t, &b[0], &gotOther[i].bytes()[0], "encoded once")
		require.Contains(t, string(b), `"payload":{"n":`+itoa(i)+`}`)
	}
	require.Equal(t, 3, h.Subscribers(), "a dropped stream leaves when its handler ends")
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
