package api

// ParkedCalls counts the claimWork calls parked now (park.go), so tests
// can act once a call waits instead of sleeping and hoping.
func (s *Server) ParkedCalls() int {
	s.parked.mu.Lock()
	defer s.parked.mu.Unlock()
	return len(s.parked.calls)
}
