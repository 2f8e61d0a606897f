package grpc

import "time"

// SweepLiteOnce runs one TTL sweep tick and answers how long it held the
// lite index.
func (s *Server) SweepLiteOnce() time.Duration {
	held, _ := s.sweepLiteOnce()
	return held
}

// LiteTopics is how many lite topics the endpoint knows.
func (s *Server) LiteTopics() int {
	s.lite.mu.Lock()
	defer s.lite.mu.Unlock()
	return len(s.lite.all)
}

// CompactLite compacts the lite journal now, as the sweep does once it
// has grown.
func (s *Server) CompactLite() { s.compactLite() }
