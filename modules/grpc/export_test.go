package grpc

import (
	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/proto"
)

// WaitingPulls counts the pulls long-polling for a message (tests).
func (s *Server) WaitingPulls() int { return int(s.waiters.n.Load()) }

// Conns are the open connections and those refused by the connection
// limits so far (tests).
func (s *Server) Conns() (open int, refused int64) { return s.lim.Counts() }

// HeldSettings is the size of the Telemetry settings the endpoint keeps
// (tests).
func (s *Server) HeldSettings() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.clients {
		if c.settings != nil {
			n += proto.Size(c.settings)
		}
	}
	return n
}

// HeldReceived is the body bytes ReceiveMessage calls hold (tests).
func (s *Server) HeldReceived() int64 { return s.recvHeld.used.Load() }

// ReceiveWaits counts the ReceiveMessage calls waiting for messages
// (tests).
func (s *Server) ReceiveWaits() int { return int(s.recvWaits.n.Load()) }

// Connection buffers (tests).
const (
	ConnReadBuffer  = connReadBuffer
	ConnWriteBuffer = connWriteBuffer
)

// SendCodec is the server's codec (tests).
func SendCodec() encoding.CodecV2 { return newSendCodec() }

// TransportOptions are the endpoint's grpc-go options without its
// interceptors (tests: a bare grpc-go server configured as the endpoint).
func (s *Server) TransportOptions() ([]grpclib.ServerOption, error) { return s.transportOptions() }
