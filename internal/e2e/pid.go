package e2e

// PID returns the operating-system process id of the running `hopper
// serve`, so that tests can read its resource usage from /proc.
func (s *Server) PID() int { return s.cmd.Process.Pid }
