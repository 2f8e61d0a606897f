package grpc

// AccessKey/SecretKey authentication of RocketMQ 5 clients, mapped onto
// the enabled auth plugins (the ACL's accounts and permissions).
//
// Every 5.x client signs every call with gRPC metadata:
//
//	authorization:  MQv2-HMAC-SHA1 Credential=<AccessKey>, SignedHeaders=x-mq-date-time, Signature=<hex>
//	x-mq-date-time: 20210309T195445Z (yyyyMMdd'T'HHmmss'Z', UTC)
//
// where Signature is hex(HMAC-SHA1(SecretKey, x-mq-date-time value))
// (rocketmq-clients: Java's Signature.java, golang/signature.go, Node.js
// getRequestMetadata; upper- or lower-case hex). RocketMQ's proxy
// (DefaultAuthenticationContextBuilder, ACL 1.0 PlainAccessResource.parse)
// takes the first "/"-separated part of Credential as the access key,
// hex-decodes Signature and checks it against the date-time value with the
// account's secret; it never compares the date-time with its clock, so a
// captured signature is good forever. This endpoint also refuses a
// date-time further than grpc.max_clock_skew from its clock (default
// 15 minutes; 0 turns the bound off, as RocketMQ).
//
// Each plugin authenticates the call through auth.HMACAuthenticator (white
// lists first, as for 4.x requests) and then authorizes, with its
// Authorizer, what the request names (needsOf) — RocketMQ 5's
// DefaultAuthorizationContextBuilder: PUB on the topic of SendMessage,
// EndTransaction and RecallMessage; SUB on group and topic of
// ReceiveMessage, AckMessage, ChangeInvisibleDuration,
// ForwardMessageToDeadLetterQueue, QueryAssignment, PullMessage and the
// offset RPCs; PUB or SUB on the topic of QueryRoute; SUB on a consumer's
// group for Heartbeat and NotifyClientTermination; and for each Telemetry
// settings command PUB on the publisher's topics, SUB on the subscriber's
// group and topics. Groups are authorized as %RETRY%<group>, as for 4.x.
//
// A refusal is answered in the response's status, as the other errors of
// this endpoint: UNAUTHORIZED (40100) when the credential does not
// authenticate, FORBIDDEN (40300) when a permission is missing, with the
// plugin's reason (it names the access key and resource, never a secret).
// A refused Telemetry command is answered inside the stream, as RocketMQ's
// proxy answers a refusal of its request pipeline
// (GrpcMessagingApplication.telemetry → writeResponse): one
// TelemetryCommand carrying only the status, after which the stream ends
// with gRPC OK. The 5.x clients fail startup() on that answer (a gRPC
// error instead makes them renew the stream forever, and startup() never
// returns). The proxy's ACL 2.0 answers 40100 for both kinds of refusal;
// this endpoint keeps 40300 for a missing permission, as for its other
// calls. A settings command naming no topic or group is not a refusal
// but a bad request: the stream ends with gRPC INVALID_ARGUMENT, as the
// proxy's ClientActivity.processTelemetryException ends it.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/grpcapi"
)

// AuthPlugin is one enabled auth plugin as the endpoint uses it (the
// kernel guard's Authenticators and Authorizers, pairwise).
type AuthPlugin struct {
	Authenticator auth.Authenticator
	Authorizer    auth.Authorizer
}

// Metadata keys of the 5.x clients.
const (
	mdAuthorization = "authorization"
	mdDateTime      = "x-mq-date-time"
	signAlgorithm   = "MQv2-HMAC-SHA1"
	dateTimeLayout  = "20060102T150405Z"
	// maxAuthHeader bounds what is parsed of the authorization header.
	maxAuthHeader = 1024
)

// guard checks calls against the enabled plugins; nil checks nothing.
type guard struct {
	plugins []guardPlugin
	skew    time.Duration // 0: unbounded
	now     func() time.Time
}

type guardPlugin struct {
	an auth.HMACAuthenticator
	az auth.Authorizer
}

// newGuard pairs each plugin's authenticator with its HMAC interface; a
// plugin without it cannot check 5.x clients, and the endpoint refuses to
// serve rather than let them through unchecked.
func newGuard(ps []AuthPlugin, skew time.Duration) (*guard, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	g := &guard{skew: skew, now: time.Now}
	for _, p := range ps {
		h, ok := p.Authenticator.(auth.HMACAuthenticator)
		if !ok || p.Authorizer == nil {
			return nil, fmt.Errorf("grpc: the auth plugin %T cannot check RocketMQ 5 client signatures (no auth.HMACAuthenticator): serving the endpoint would bypass it", p.Authenticator)
		}
		g.plugins = append(g.plugins, guardPlugin{an: h, az: p.Authorizer})
	}
	return g, nil
}

// refusal is why a call is refused: an authentication failure or a
// missing permission, with a message for the client.
type refusal struct {
	code grpcapi.Code // UNAUTHORIZED, FORBIDDEN, or a bad-request code
	msg  string
}

func (r *refusal) status() *grpcapi.Status { return status(r.code, r.msg) }

func (r *refusal) grpcError() error {
	c := codes.PermissionDenied
	switch r.code {
	case grpcapi.Code_UNAUTHORIZED:
		c = codes.Unauthenticated
	case grpcapi.Code_FORBIDDEN:
	default:
		c = codes.InvalidArgument
	}
	return grpcstatus.Error(c, r.msg)
}

// refusalError is a refusal returned by a guarded stream's RecvMsg; the
// Telemetry handler answers it inside the stream (service.go).
type refusalError struct{ r *refusal }

func (e *refusalError) Error() string { return e.r.msg }

// GRPCStatus makes the refusal the stream's gRPC status where it is not
// answered inside the stream.
func (e *refusalError) GRPCStatus() *grpcstatus.Status {
	st, _ := grpcstatus.FromError(e.r.grpcError())
	return st
}

// inStream reports whether a Telemetry stream answers r inside the
// stream (authentication and permission refusals) rather than ending
// with a gRPC error (a bad request).
func (r *refusal) inStream() bool {
	return r.code == grpcapi.Code_UNAUTHORIZED || r.code == grpcapi.Code_FORBIDDEN
}

// telemetryMethod is the full name of the Telemetry stream.
const telemetryMethod = "/apache.rocketmq.v2.MessagingService/Telemetry"

func unauthorized(format string, args ...any) *refusal {
	return &refusal{code: grpcapi.Code_UNAUTHORIZED, msg: fmt.Sprintf(format, args...)}
}

// credential is what the metadata of a call claims.
type credential struct {
	remote    string
	accessKey string
	content   []byte // the x-mq-date-time value
	mac       []byte
	signedAt  time.Time
}

// parseCredential reads the authorization and x-mq-date-time metadata. A
// call without authorization has no access key (a white-listed address
// may still pass); a malformed one is refused, as RocketMQ refuses it.
func parseCredential(ctx context.Context) (credential, *refusal) {
	var c credential
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		c.remote = p.Addr.String()
	}
	md, _ := metadata.FromIncomingContext(ctx)
	authz := md.Get(mdAuthorization)
	if len(authz) == 0 || authz[0] == "" {
		return c, nil
	}
	h := authz[0]
	if len(h) > maxAuthHeader {
		return c, unauthorized("authorization header is longer than %d bytes", maxAuthHeader)
	}
	method, rest, ok := strings.Cut(h, " ")
	if !ok {
		return c, unauthorized("authorization header is incorrect: want %q followed by Credential, SignedHeaders and Signature", signAlgorithm)
	}
	if method != signAlgorithm {
		return c, unauthorized("authorization header: unknown algorithm %q (want %s)", method, signAlgorithm)
	}
	var sig string
	var hasSig bool
	for kv := range strings.SplitSeq(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return c, unauthorized("authorization header: %q is not key=value", strings.TrimSpace(kv))
		}
		switch k {
		case "Credential":
			c.accessKey, _, _ = strings.Cut(v, "/") // AccessKey[/region/channel]
		case "Signature":
			sig, hasSig = v, true
		}
	}
	if c.accessKey == "" {
		return c, unauthorized("authorization header has no Credential")
	}
	if !hasSig {
		return c, unauthorized("authorization header has no Signature for accessKey=%s", c.accessKey)
	}
	mac, err := hex.DecodeString(sig)
	if err != nil || len(mac) == 0 {
		return c, unauthorized("authorization header: Signature is not hex for accessKey=%s", c.accessKey)
	}
	c.mac = mac
	dt := md.Get(mdDateTime)
	if len(dt) == 0 || dt[0] == "" {
		return c, unauthorized("%s metadata is required with a signature (accessKey=%s)", mdDateTime, c.accessKey)
	}
	c.content = []byte(dt[0])
	t, err := time.Parse(dateTimeLayout, dt[0])
	if err != nil {
		return c, unauthorized("%s %q is not yyyyMMdd'T'HHmmss'Z' (accessKey=%s)", mdDateTime, dt[0], c.accessKey)
	}
	c.signedAt = t
	return c, nil
}

// principals authenticates the call with every plugin: one principal per
// plugin, in order.
func (g *guard) authenticate(ctx context.Context) ([]auth.Principal, *refusal) {
	c, r := parseCredential(ctx)
	if r != nil {
		return nil, r
	}
	ps := make([]auth.Principal, len(g.plugins))
	for i, p := range g.plugins {
		pr, err := p.an.AuthenticateHMAC(ctx, auth.HMACRequest{RemoteAddr: c.remote, AccessKey: c.accessKey, Content: c.content, MAC: c.mac})
		if err != nil {
			return nil, unauthorized("%s", err.Error())
		}
		if !pr.Trusted && g.skew > 0 {
			// Checked once the signature is known good, so that the
			// answer does not tell a stranger the server's clock.
			if d := g.now().Sub(c.signedAt); d > g.skew || d < -g.skew {
				return nil, unauthorized("the signature of accessKey=%s is dated %s, %v from the server's clock (grpc.max_clock_skew %v): a replayed call or a wrong clock",
					c.accessKey, c.signedAt.Format(dateTimeLayout), d.Round(time.Second), g.skew)
			}
		}
		ps[i] = pr
	}
	return ps, nil
}

// need is one permission a request needs.
type need struct {
	res  auth.Resource
	act  auth.Action
	what string // "topic" or "group", for empty-name errors
}

func topicNeed(r *grpcapi.Resource, act auth.Action) need {
	return need{res: auth.Resource{Name: r.GetName()}, act: act, what: "topic"}
}

func groupNeed(r *grpcapi.Resource) need {
	return need{res: auth.Resource{Name: r.GetName(), IsGroup: true}, act: auth.Sub, what: "group"}
}

func isConsumer(t grpcapi.ClientType) bool {
	switch t {
	case grpcapi.ClientType_PUSH_CONSUMER, grpcapi.ClientType_SIMPLE_CONSUMER, grpcapi.ClientType_PULL_CONSUMER,
		grpcapi.ClientType_LITE_PUSH_CONSUMER, grpcapi.ClientType_LITE_SIMPLE_CONSUMER:
		return true
	}
	return false
}

// errUnknownRequest: a request type the table does not know needs admin,
// so that a new RPC is closed until it is listed.
var errUnknownRequest = errors.New("unknown request")

// needsOf lists what a request needs (see the file comment).
func needsOf(m any) ([]need, error) {
	switch r := m.(type) {
	case *grpcapi.QueryRouteRequest:
		return []need{topicNeed(r.GetTopic(), auth.Any)}, nil
	case *grpcapi.QueryAssignmentRequest:
		return []need{groupNeed(r.GetGroup()), topicNeed(r.GetTopic(), auth.Sub)}, nil
	case *grpcapi.HeartbeatRequest:
		if !isConsumer(r.GetClientType()) || r.GetGroup().GetName() == "" {
			return nil, nil
		}
		return []need{groupNeed(r.GetGroup())}, nil
	case *grpcapi.NotifyClientTerminationRequest:
		if r.GetGroup().GetName() == "" {
			return nil, nil // a producer's
		}
		return []need{groupNeed(r.GetGroup())}, nil
	case *grpcapi.SendMessageRequest:
		var ns []need
		seen := map[string]bool{}
		for _, msg := range r.GetMessages() {
			if t := msg.GetTopic().GetName(); !seen[t] {
				seen[t] = true
				ns = append(ns, topicNeed(msg.GetTopic(), auth.Pub))
			}
		}
		return ns, nil // no messages: SendMessage answers the error
	case *grpcapi.EndTransactionRequest:
		return []need{topicNeed(r.GetTopic(), auth.Pub)}, nil
	case *grpcapi.RecallMessageRequest:
		return []need{topicNeed(r.GetTopic(), auth.Pub)}, nil
	case *grpcapi.ReceiveMessageRequest:
		return []need{groupNeed(r.GetGroup()), topicNeed(r.GetMessageQueue().GetTopic(), auth.Sub)}, nil
	case *grpcapi.AckMessageRequest:
		return []need{groupNeed(r.GetGroup()), topicNeed(r.GetTopic(), auth.Sub)}, nil
	case *grpcapi.ChangeInvisibleDurationRequest:
		return []need{groupNeed(r.GetGroup()), topicNeed(r.GetTopic(), auth.Sub)}, nil
	case *grpcapi.ForwardMessageToDeadLetterQueueRequest:
		return []need{groupNeed(r.GetGroup()), topicNeed(r.GetTopic(), auth.Sub)}, nil
	case *grpcapi.PullMessageRequest:
		return []need{groupNeed(r.GetGroup()), topicNeed(r.GetMessageQueue().GetTopic(), auth.Sub)}, nil
	case *grpcapi.UpdateOffsetRequest:
		return []need{groupNeed(r.GetGroup()), topicNeed(r.GetMessageQueue().GetTopic(), auth.Sub)}, nil
	case *grpcapi.GetOffsetRequest:
		return []need{groupNeed(r.GetGroup()), topicNeed(r.GetMessageQueue().GetTopic(), auth.Sub)}, nil
	case *grpcapi.QueryOffsetRequest:
		return []need{topicNeed(r.GetMessageQueue().GetTopic(), auth.Sub)}, nil
	case *grpcapi.SyncLiteSubscriptionRequest:
		return []need{groupNeed(r.GetGroup()), topicNeed(r.GetTopic(), auth.Sub)}, nil
	case *grpcapi.TelemetryCommand:
		s := r.GetSettings()
		if s == nil {
			return nil, nil // answers to commands the server sent
		}
		var ns []need
		for _, t := range s.GetPublishing().GetTopics() {
			ns = append(ns, topicNeed(t, auth.Pub))
		}
		if sub := s.GetSubscription(); sub != nil {
			ns = append(ns, groupNeed(sub.GetGroup()))
			for _, e := range sub.GetSubscriptions() {
				ns = append(ns, topicNeed(e.GetTopic(), auth.Sub))
			}
		}
		return ns, nil
	}
	return nil, errUnknownRequest
}

// authorize checks that every principal holds everything m needs.
func (g *guard) authorize(ctx context.Context, ps []auth.Principal, m any) *refusal {
	ns, err := needsOf(m)
	if err != nil {
		ns = []need{{act: auth.Admin}}
	}
	for _, n := range ns {
		if n.act != auth.Admin && n.res.Name == "" {
			code := grpcapi.Code_ILLEGAL_TOPIC
			if n.res.IsGroup {
				code = grpcapi.Code_ILLEGAL_CONSUMER_GROUP
			}
			return &refusal{code: code, msg: n.what + " name is empty"}
		}
		for i, p := range g.plugins {
			if err := p.az.Authorize(ctx, ps[i], n.res, n.act); err != nil {
				return &refusal{code: grpcapi.Code_FORBIDDEN, msg: err.Error()}
			}
		}
	}
	return nil
}

// check authenticates and authorizes one request; the principals are
// those of the call's accounts.
func (g *guard) check(ctx context.Context, m any) ([]auth.Principal, *refusal) {
	ps, r := g.authenticate(ctx)
	if r != nil {
		return nil, r
	}
	return ps, g.authorize(ctx, ps, m)
}

// mayPublish re-checks, with the plugins' current rules, that the
// principals of a stream opened earlier may still publish to topic: a
// server-to-client command (a transaction check-back) goes only to a
// stream whose accounts still hold PUB.
func (g *guard) mayPublish(ctx context.Context, ps []auth.Principal, topic string) error {
	if len(ps) != len(g.plugins) {
		return fmt.Errorf("stream not authenticated: %w", auth.ErrDenied)
	}
	for i, p := range g.plugins {
		if err := p.az.Authorize(ctx, ps[i], auth.Resource{Name: topic}, auth.Pub); err != nil {
			return err
		}
	}
	return nil
}

// principalsKey carries the principals of an authenticated call in its
// context.
type principalsKey struct{}

// callPrincipals are the principals the interceptors authenticated the
// call as; nil without an auth plugin.
func callPrincipals(ctx context.Context) []auth.Principal {
	ps, _ := ctx.Value(principalsKey{}).([]auth.Principal)
	return ps
}

// accountOf names the accounts of a call: the access keys of its
// principals ("" for a white-listed address without one). Client ids
// are bound to it (service.go).
func accountOf(ctx context.Context) string {
	ps := callPrincipals(ctx)
	keys := make([]string, len(ps))
	for i, p := range ps {
		keys[i] = p.AccessKey
	}
	return strings.Join(keys, ",")
}

// statusResponse makes the response of method (a full gRPC method name)
// carrying st, found through the generated descriptors: every response of
// the messaging service (and TelemetryCommand) has a status field.
func statusResponse(method string, st *grpcapi.Status) (proto.Message, bool) {
	svc, name, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if !ok {
		return nil, false
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, false
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, false
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil, false
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return nil, false
	}
	f := md.Output().Fields().ByName("status")
	if f == nil || f.Message() == nil || f.Message().FullName() != st.ProtoReflect().Descriptor().FullName() {
		return nil, false
	}
	out := mt.New()
	out.Set(f, protoreflect.ValueOfMessage(st.ProtoReflect()))
	return out.Interface(), true
}

// unaryInterceptor checks each unary call before its handler runs; a
// refusal is the method's response with the refusal's status.
func (g *guard) unaryInterceptor(log func(method string, r *refusal)) grpclib.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpclib.UnaryServerInfo, handler grpclib.UnaryHandler) (any, error) {
		ps, r := g.check(ctx, req)
		if r == nil {
			return handler(context.WithValue(ctx, principalsKey{}, ps), req)
		}
		log(info.FullMethod, r)
		if resp, ok := statusResponse(info.FullMethod, r.status()); ok {
			return resp, nil
		}
		return nil, r.grpcError()
	}
}

// streamInterceptor authenticates a stream when it opens and authorizes
// every message the client sends on it. A server-streaming call
// (ReceiveMessage, PullMessage) is refused, once its request arrived, with one response carrying the
// status, as its other errors are. A Telemetry stream that does not
// authenticate is answered here, once its first command arrived, with a
// TelemetryCommand carrying the status, and ends; a command refused later
// is answered the same way by the handler, the stream's only sender.
func (g *guard) streamInterceptor(log func(method string, r *refusal)) grpclib.StreamServerInterceptor {
	return func(srv any, ss grpclib.ServerStream, info *grpclib.StreamServerInfo, handler grpclib.StreamHandler) error {
		ctx := ss.Context()
		ps, r := g.authenticate(ctx)
		if r != nil && info.FullMethod == telemetryMethod {
			log(info.FullMethod, r)
			if err := ss.RecvMsg(new(grpcapi.TelemetryCommand)); err != nil {
				return nil //nolint:nilerr // the client went away before asking anything: nothing to answer
			}
			_ = ss.SendMsg(&grpcapi.TelemetryCommand{Status: r.status()}) //nolint:errcheck // a client gone has no one to tell
			return nil
		}
		if r != nil && info.IsClientStream {
			log(info.FullMethod, r)
			return r.grpcError()
		}
		// A server-streaming call's refusal waits for its request, so
		// that the client has sent it before the stream ends (else its
		// send may fail with a bare EOF instead of the status).
		w := &guardedStream{ServerStream: ss, ctx: context.WithValue(ctx, principalsKey{}, ps), g: g, ps: ps, pre: r, method: info.FullMethod, sendRefusal: !info.IsClientStream}
		err := handler(srv, w)
		if r := w.refused.Load(); r != nil {
			log(info.FullMethod, r)
			if w.sent.Load() || (info.FullMethod == telemetryMethod && r.inStream() && err == nil) {
				return nil // the refusal went out as the call's answer
			}
			return r.grpcError()
		}
		return err
	}
}

// guardedStream authorizes each message the client sends.
type guardedStream struct {
	grpclib.ServerStream
	ctx         context.Context // carries the principals
	g           *guard
	ps          []auth.Principal
	pre         *refusal // an authentication refusal, answered on the first message
	method      string
	sendRefusal bool // a server-streaming call: answer the refusal in-band
	// refused and sent are set by the goroutine that receives (Telemetry
	// receives on its own goroutine) and read once the handler returned.
	refused atomic.Pointer[refusal]
	sent    atomic.Bool
}

// Context is the stream's context with its principals.
func (w *guardedStream) Context() context.Context { return w.ctx }

func (w *guardedStream) RecvMsg(m any) error {
	if err := w.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	r := w.pre
	if r == nil {
		r = w.g.authorize(w.Context(), w.ps, m)
	}
	if r == nil {
		return nil
	}
	if w.sendRefusal {
		// The generated handler receives the one request before it
		// sends anything, so this is the only writer.
		if resp, ok := statusResponse(w.method, r.status()); ok && w.ServerStream.SendMsg(resp) == nil {
			w.sent.Store(true)
		}
	}
	w.refused.Store(r)
	return &refusalError{r: r}
}
