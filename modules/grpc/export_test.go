package grpc

// WaitingPulls counts the pulls long-polling for a message (tests).
func (s *Server) WaitingPulls() int { return int(s.waiters.n.Load()) }
