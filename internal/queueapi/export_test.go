package queueapi

import "time"

// ParkedCalls counts the claimWork calls parked now (park.go), so tests
// can act once a call waits instead of sleeping and hoping.
func (s *Server) ParkedCalls() int {
	return s.parked.len()
}

// ShortestLongPoll is the least a claimWork call that finds no work waits
// with the given LongPoll (the long-poll's random spread).
func ShortestLongPoll(longPoll time.Duration) time.Duration {
	return longPoll - longPoll/longPollSpread
}
