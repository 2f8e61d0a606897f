package grpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/protocol"
)

// client is what the endpoint knows of one 5.x client.
type client struct {
	id string
	// owner names the accounts the client id was first seen with
	// (accountOf): calls of other accounts with this id are refused, so
	// that nobody ends or re-sets another account's client.
	owner string
	// settings are the last Telemetry settings of the client's open
	// streams; dropped when its last stream closes.
	settings *grpcapi.Settings
	streams  int // open Telemetry streams
	seen     time.Time
}

func status(c grpcapi.Code, msg string) *grpcapi.Status {
	return &grpcapi.Status{Code: c, Message: msg}
}

func ok() *grpcapi.Status { return status(grpcapi.Code_OK, "OK") }

// clientID is the x-mq-client-id metadata every 5.x client sends.
func clientID(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-mq-client-id"); len(v) > 0 {
		return v[0]
	}
	return ""
}

// clientExpiry forgets a client that sent no heartbeat or settings for this
// long (the clients heartbeat every 10s), so the table stays bounded.
const clientExpiry = 2 * time.Minute

// maxClientID bounds the client id the table keeps.
const maxClientID = 256

// errForeignClient: a call names a client id bound to another account.
var errForeignClient = errors.New("the client id belongs to another account")

// claimClient returns the client entry of the call's client id, made if
// new and bound to the call's account, and marks it seen; nil without a
// usable client id. Called with s.mu held.
func (s *Server) claimClient(ctx context.Context) (*client, error) {
	id := clientID(ctx)
	if id == "" || len(id) > maxClientID {
		return nil, nil
	}
	owner := accountOf(ctx)
	now := time.Now()
	if now.Sub(s.swept) > clientExpiry/2 {
		s.swept = now
		for k, c := range s.clients {
			if c.streams == 0 && now.Sub(c.seen) > clientExpiry {
				delete(s.clients, k)
			}
		}
	}
	c := s.clients[id]
	if c == nil {
		c = &client{id: id, owner: owner}
		s.clients[id] = c
	}
	if c.owner != owner {
		return nil, fmt.Errorf("client id %s: %w", id, errForeignClient)
	}
	c.seen = now
	return c, nil
}

// touch marks the call's client seen.
func (s *Server) touch(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.claimClient(ctx)
	return err
}

// topic looks a topic up for a request, answering the status a 5.x client
// expects when it is missing.
func (s *Server) topic(r *grpcapi.Resource) (*protocol.TopicConfig, *grpcapi.Status) {
	name := r.GetName()
	if name == "" {
		return nil, status(grpcapi.Code_ILLEGAL_TOPIC, "topic name is empty")
	}
	if err := protocol.ValidateTopic(name); err != nil {
		return nil, status(grpcapi.Code_ILLEGAL_TOPIC, err.Error())
	}
	tc, found := s.b.TopicConfig(name)
	if !found {
		return nil, status(grpcapi.Code_TOPIC_NOT_FOUND, "topic "+name+" not found")
	}
	return tc, nil
}

// acceptTypes are the message types every topic takes over gRPC: 4.x topics
// carry no message type attribute.
var acceptTypes = []grpcapi.MessageType{grpcapi.MessageType_NORMAL, grpcapi.MessageType_FIFO, grpcapi.MessageType_DELAY, grpcapi.MessageType_TRANSACTION}

func permission(tc *protocol.TopicConfig, readable, writable bool) grpcapi.Permission {
	readable = readable && tc.Perm&protocol.PermRead != 0
	writable = writable && tc.Perm&protocol.PermWrite != 0
	switch {
	case readable && writable:
		return grpcapi.Permission_READ_WRITE
	case readable:
		return grpcapi.Permission_READ
	case writable:
		return grpcapi.Permission_WRITE
	}
	return grpcapi.Permission_NONE
}

// Heartbeat records the client as alive.
func (s *Server) Heartbeat(ctx context.Context, req *grpcapi.HeartbeatRequest) (*grpcapi.HeartbeatResponse, error) {
	if clientID(ctx) == "" {
		return &grpcapi.HeartbeatResponse{Status: status(grpcapi.Code_CLIENT_ID_REQUIRED, "x-mq-client-id metadata is required")}, nil
	}
	if err := s.touch(ctx); err != nil {
		return &grpcapi.HeartbeatResponse{Status: status(grpcapi.Code_FORBIDDEN, err.Error())}, nil
	}
	return &grpcapi.HeartbeatResponse{Status: ok()}, nil
}

// NotifyClientTermination forgets the client: its settings, and its
// entry once it has no stream open. Only the client's own account may.
func (s *Server) NotifyClientTermination(ctx context.Context, req *grpcapi.NotifyClientTerminationRequest) (*grpcapi.NotifyClientTerminationResponse, error) {
	id := clientID(ctx)
	if id == "" || len(id) > maxClientID {
		return &grpcapi.NotifyClientTerminationResponse{Status: ok()}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.clients[id]
	if c == nil {
		return &grpcapi.NotifyClientTerminationResponse{Status: ok()}, nil
	}
	if c.owner != accountOf(ctx) {
		return &grpcapi.NotifyClientTerminationResponse{Status: status(grpcapi.Code_FORBIDDEN, fmt.Sprintf("client id %s: %v", id, errForeignClient))}, nil
	}
	c.settings = nil
	if c.streams == 0 {
		delete(s.clients, id)
	}
	return &grpcapi.NotifyClientTerminationResponse{Status: ok()}, nil
}

// serverSettings is the client's settings completed with what the server
// decides: body size limit for publishers; retry policy and batch
// defaults for subscribers.
func (s *Server) serverSettings(in *grpcapi.Settings) *grpcapi.Settings {
	out := proto.Clone(in).(*grpcapi.Settings)
	switch ps := out.PubSub.(type) {
	case *grpcapi.Settings_Publishing:
		if ps.Publishing == nil {
			ps.Publishing = &grpcapi.Publishing{}
		}
		ps.Publishing.MaxBodySize = int32(s.b.Config().MaxMessageSize)
		// As the proxy (enableTopicMessageTypeCheck): the clients check a
		// message's type against its route's accept_message_types, all
		// four for an untyped topic (msgtype.go).
		ps.Publishing.ValidateMessageType = true
		if out.BackoffPolicy == nil {
			// The clients sync their send retries from this and refuse
			// settings without one: the 5.x Java client's producer default.
			out.BackoffPolicy = &grpcapi.RetryPolicy{MaxAttempts: 3, Strategy: &grpcapi.RetryPolicy_ExponentialBackoff{
				ExponentialBackoff: &grpcapi.ExponentialBackoff{Initial: durationpb.New(10 * time.Millisecond), Max: durationpb.New(time.Second), Multiplier: 2},
			}}
		}
	case *grpcapi.Settings_Subscription:
		if ps.Subscription == nil {
			ps.Subscription = &grpcapi.Subscription{}
		}
		if ps.Subscription.ReceiveBatchSize == nil {
			ps.Subscription.ReceiveBatchSize = proto.Int32(32)
		}
		if ps.Subscription.LongPollingTimeout == nil {
			ps.Subscription.LongPollingTimeout = durationpb.New(20 * time.Second)
		}
		// The group's retry policy, whatever the client sent, as RocketMQ
		// 5's proxy merges it (retrypolicy.go): the pop service sends a
		// message to the dead-letter queue after the same MaxAttempts.
		policy, orderly := s.groupPolicy(ps.Subscription.GetGroup().GetName())
		out.BackoffPolicy = retryPolicyProto(policy)
		if orderly {
			// A group configured orderly is FIFO whatever the client
			// declared (RocketMQ 5's proxy answers the group's switch).
			ps.Subscription.Fifo = proto.Bool(true)
		}
		s.liteSettings(out) // lite.go
	}
	return out
}

// Telemetry is the settings stream: each Settings the client sends is
// answered with the server's settings, and check-backs of transactions go
// to the client on it (transaction_check.go). The stream stays open until
// the client closes it or the endpoint stops. A refused command (a
// missing permission, a client id of another account) is answered with a
// TelemetryCommand carrying only the status, and the stream ends (auth.go
// says why); settings naming neither publishing nor subscription, or a
// bad topic or group name, end it with gRPC INVALID_ARGUMENT, as RocketMQ's
// proxy ends it.
func (s *Server) Telemetry(stream grpcapi.MessagingService_TelemetryServer) error {
	ctx := stream.Context()
	ts, err := s.openStream(ctx)
	if err != nil {
		// As the proxy answers a refusal of its pipeline: once the client
		// asked something.
		if _, rerr := stream.Recv(); rerr != nil {
			return refusedInStream(stream, rerr)
		}
		_ = stream.Send(&grpcapi.TelemetryCommand{Status: status(grpcapi.Code_FORBIDDEN, err.Error())}) //nolint:errcheck // a client gone has no one to tell
		return nil
	}
	defer s.closeStream(ts)
	cmds := make(chan *grpcapi.TelemetryCommand)
	errc := make(chan error, 1)
	go func() { // ends with the stream: Recv fails once the handler returns
		for {
			c, err := stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case cmds <- c:
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case <-s.done:
			return nil
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return refusedInStream(stream, err) // else the client closed the stream or went away
		case c := <-ts.outbox():
			if err := stream.Send(c); err != nil {
				return nil // the client went away
			}
		case c := <-cmds:
			settings := c.GetSettings()
			if settings == nil {
				// Thread stack traces and verify results answer commands we
				// never send; ignore them.
				continue
			}
			if n := proto.Size(settings); n > int(s.cfg.MaxSettingsSize) {
				return grpcstatus.Errorf(codes.ResourceExhausted, "telemetry settings of %d bytes are over grpc.max_settings_size %d", n, s.cfg.MaxSettingsSize)
			}
			if err := checkSettings(settings); err != nil {
				return err
			}
			s.streamSettings(ts, settings)
			if err := stream.Send(&grpcapi.TelemetryCommand{Status: ok(), Command: &grpcapi.TelemetryCommand_Settings{Settings: s.serverSettings(settings)}}); err != nil {
				return nil // the client went away
			}
		}
	}
}

// refusedInStream answers, inside the stream, a refusal that ended its
// receiving (auth.go's refusalError) and ends the stream; any other
// receive error means the client closed the stream or went away. A
// bad-request refusal ends the stream with its gRPC error.
func refusedInStream(stream grpcapi.MessagingService_TelemetryServer, err error) error {
	var re *refusalError
	if !errors.As(err, &re) {
		return nil
	}
	if !re.r.inStream() {
		return re
	}
	_ = stream.Send(&grpcapi.TelemetryCommand{Status: re.r.status()}) //nolint:errcheck // a client gone has no one to tell
	return nil
}

// checkSettings refuses settings as RocketMQ's proxy does
// (ClientActivity.processAndWriteClientSettings): neither publishing nor
// subscription, or a bad topic or group name end the stream with gRPC
// INVALID_ARGUMENT; a subscription of a client that is no consumer ends
// it with INTERNAL (the proxy's IllegalArgumentException).
func checkSettings(st *grpcapi.Settings) error {
	bad := func(format string, args ...any) error {
		return grpcstatus.Errorf(codes.InvalidArgument, "process client telemetryCommand failed. "+format, args...)
	}
	switch {
	case st.GetPublishing() != nil:
		for _, t := range st.GetPublishing().GetTopics() {
			if t.GetName() == "" {
				return bad("topic name is empty")
			}
			if err := protocol.ValidateTopic(t.GetName()); err != nil {
				return bad("%v", err)
			}
		}
	case st.GetSubscription() != nil:
		g := st.GetSubscription().GetGroup().GetName()
		if g == "" {
			return bad("consumer group is empty")
		}
		if err := protocol.ValidateGroup(g); err != nil {
			return bad("%v", err)
		}
		switch st.GetClientType() {
		case grpcapi.ClientType_PUSH_CONSUMER, grpcapi.ClientType_SIMPLE_CONSUMER,
			grpcapi.ClientType_LITE_PUSH_CONSUMER, grpcapi.ClientType_LITE_SIMPLE_CONSUMER: // lite.go
		default:
			ct := st.GetClientType()
			return grpcstatus.Errorf(codes.Internal, "process client telemetryCommand failed. Client type is not consumer, type: %v", ct)
		}
	default:
		return grpcstatus.Error(codes.InvalidArgument, "there is no publishing or subscription data in settings")
	}
	return nil
}
