package grpc

import (
	"bytes"
	"context"
	"math/rand/v2"
	"time"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/modules/pop"
	"github.com/quivermq/quiver/modules/transaction"
)

// telemetryStream is an open Telemetry stream. Commands the server starts
// (orphaned-transaction recovery) go through out; the stream's handler is
// the only writer of the stream.
type telemetryStream struct {
	client string
	c      *client          // its entry in Server.clients
	ps     []auth.Principal // the accounts it was opened with (auth.go)
	out    chan *grpcapi.TelemetryCommand
	// topics the client publishes to: its publishing settings and the
	// topics of its transactional sends. Guarded by Server.mu.
	topics map[string]bool
}

// streamQueue bounds the commands waiting for one stream; a check-back
// that finds it full goes to another client or waits for the next round.
const streamQueue = 16

// maxStreamTopics bounds the topics remembered per stream.
const maxStreamTopics = 1024

// openStream registers a Telemetry stream of the calling client; nil
// without a client id (such a stream is not asked anything and its
// settings are not kept). A client id bound to another account is
// refused.
func (s *Server) openStream(ctx context.Context) (*telemetryStream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.claimClient(ctx)
	if c == nil {
		return nil, err
	}
	c.streams++
	ts := &telemetryStream{client: c.id, c: c, ps: callPrincipals(ctx), out: make(chan *grpcapi.TelemetryCommand, streamQueue), topics: map[string]bool{}}
	if s.streams == nil {
		s.streams = map[*telemetryStream]struct{}{}
	}
	s.streams[ts] = struct{}{}
	return ts, nil
}

// closeStream forgets a stream; the client's settings go with its last
// stream.
func (s *Server) closeStream(ts *telemetryStream) {
	if ts == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.streams, ts)
	if ts.c.streams--; ts.c.streams <= 0 {
		ts.c.streams = 0
		ts.c.settings = nil
	}
	ts.c.seen = time.Now()
}

// outbox is the stream's command queue (nil, never ready, for no stream).
func (ts *telemetryStream) outbox() <-chan *grpcapi.TelemetryCommand {
	if ts == nil {
		return nil
	}
	return ts.out
}

// streamSettings keeps the client's settings while the stream is open
// and records its publishing topics.
func (s *Server) streamSettings(ts *telemetryStream, settings *grpcapi.Settings) {
	if ts == nil {
		return
	}
	topics := settings.GetPublishing().GetTopics()
	s.mu.Lock()
	defer s.mu.Unlock()
	ts.c.settings = settings
	ts.c.seen = time.Now()
	for _, t := range topics {
		if len(ts.topics) < maxStreamTopics {
			ts.topics[t.GetName()] = true
		}
	}
}

// notePublisher records that a client sent a transactional message to a
// topic, on each of its open streams.
func (s *Server) notePublisher(client, topic string) {
	if client == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for ts := range s.streams {
		if ts.client == client && len(ts.topics) < maxStreamTopics {
			ts.topics[topic] = true
		}
	}
}

// txChecker is the endpoint's transaction.CheckTransport.
type txChecker struct{ s *Server }

var _ transaction.CheckTransport = txChecker{}

// CheckBack sends RecoverOrphanedTransactionCommand to one client that
// publishes to the half message's topic and holds an open Telemetry
// stream. It serves only half messages of the 5.x convention (producer
// group = topic): a 4.x producer group's are left to its remoting
// producers.
func (c txChecker) CheckBack(ctx context.Context, chk transaction.Check) bool {
	s, m := c.s, chk.Message
	if chk.Group == "" || chk.Group != m.Topic {
		return false
	}
	s.mu.Lock()
	var candidates []*telemetryStream
	for ts := range s.streams {
		if ts.topics[m.Topic] {
			candidates = append(candidates, ts)
		}
	}
	s.mu.Unlock()
	if s.auth != nil {
		// A stream is authenticated once, when it opens: its accounts'
		// permission is checked again, with the current rules, before
		// a half message (body included) is sent on it.
		allowed := candidates[:0]
		for _, ts := range candidates {
			if err := s.auth.mayPublish(ctx, ts.ps, m.Topic); err != nil {
				s.log.Debug("grpc: no check-back to a client that may no longer publish", "client", ts.client, "topic", m.Topic, "err", err)
				continue
			}
			allowed = append(allowed, ts)
		}
		candidates = allowed
	}
	if len(candidates) == 0 {
		return false
	}
	cmd := &grpcapi.TelemetryCommand{Status: ok(), Command: &grpcapi.TelemetryCommand_RecoverOrphanedTransactionCommand{
		RecoverOrphanedTransactionCommand: &grpcapi.RecoverOrphanedTransactionCommand{
			Message:       s.txMessage(m),
			TransactionId: s.txID(m.CommitLogOffset, m.QueueOffset, m.Topic, m.Properties[message.PropertyUniqKey]),
		},
	}}
	start := rand.IntN(len(candidates))
	for i := range candidates {
		ts := candidates[(start+i)%len(candidates)]
		select {
		case ts.out <- cmd:
			s.log.Debug("grpc: transaction check-back queued", "client", ts.client, "topic", m.Topic, "msg_id", m.UniqKey(), "checks", chk.Times)
			return true
		default: // that client's queue is full: try another
		}
	}
	return false
}

// txMessage is a half message as a 5.x producer's checker sees it: its
// user properties without the transaction's system properties, message
// type TRANSACTION. m is borrowed: the body is copied.
func (s *Server) txMessage(m *message.Ext) *grpcapi.Message {
	cp := *m
	cp.Body = bytes.Clone(m.Body)
	pm := s.toProto(pop.Received{Message: &cp, Queue: m.QueueID}, 0)
	sp := pm.SystemProperties
	sp.MessageType = grpcapi.MessageType_TRANSACTION
	sp.ReceiptHandle, sp.InvisibleDuration, sp.DeliveryAttempt, sp.QueueOffset = nil, nil, nil, nil
	return pm
}
