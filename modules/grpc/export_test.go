package grpc

// WaitingPulls counts the pulls long-polling for a message (tests).
func (s *Server) WaitingPulls() int { return int(s.waiters.n.Load()) }

// Conns are the open connections and those refused by the connection
// limits so far (tests).
func (s *Server) Conns() (open int, refused int64) { return s.lim.counts() }
