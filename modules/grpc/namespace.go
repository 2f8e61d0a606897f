package grpc

// Namespaces (Resource.resource_namespace and the x-mq-namespace metadata).
//
// A 4.x client with a namespace puts it in the wire names itself
// (ClientConfig.withNamespace → NamespaceUtil.wrapNamespace): topic T and
// group G of namespace ns1 are "ns1%T" and "ns1%G" on the broker, the
// group's retry topic "%RETRY%ns1%G". The endpoint maps a 5.x client's
// namespace the same way, so 4.x and 5.x clients of one namespace share
// topics, groups, offsets and retries: every Resource of a request gets
// its namespace wrapped into its name before anything (authorization
// included) reads it, and every Resource of the answers whose name carries
// one of the call's namespaces is answered without it, with
// resource_namespace set (RocketMQ's GrpcConverter.buildResource).
//
// A Resource's namespace is its resource_namespace, or, when that is
// empty, the call's x-mq-namespace metadata: the official clients differ
// (the Node.js client sets resource_namespace only on the topics a
// producer sends to and the metadata on every call). System topics
// (rmq_sys_*, SCHEDULE_TOPIC_XXXX, …) and system groups (CID_RMQ_SYS_*)
// are never wrapped, and a name already carrying the namespace is kept,
// as NamespaceUtil does. Apache RocketMQ's own proxy reads the metadata
// into its context but maps no names (checked at 8fc57f1).

import (
	"context"
	"strings"
	"sync"

	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/protocol"
)

// mdNamespace is the metadata key of the client's namespace.
const mdNamespace = "x-mq-namespace"

const nsSeparator = "%"

func isSystemResource(name string) bool {
	return protocol.IsSystemTopic(name) || strings.HasPrefix(name, protocol.SystemTopicPrefix) ||
		name == "TBW102" || strings.HasPrefix(name, "CID_RMQ_SYS_")
}

// withoutRetryAndDLQ strips a %RETRY% or %DLQ% prefix.
func withoutRetryAndDLQ(name string) string {
	if s, ok := strings.CutPrefix(name, protocol.RetryGroupPrefix); ok {
		return s
	}
	if s, ok := strings.CutPrefix(name, protocol.DLQGroupPrefix); ok {
		return s
	}
	return name
}

// hasNamespace reports whether name already carries ns (after a retry or
// DLQ prefix).
func hasNamespace(name, ns string) bool {
	if ns == "" || name == "" || isSystemResource(name) {
		return false
	}
	return strings.HasPrefix(withoutRetryAndDLQ(name), ns+nsSeparator)
}

// WrapNamespace is Java's NamespaceUtil.wrapNamespace: ns%name, with a
// retry or DLQ prefix kept in front (%RETRY%ns%G).
func WrapNamespace(ns, name string) string {
	if ns == "" || name == "" || isSystemResource(name) || hasNamespace(name, ns) {
		return name
	}
	prefix := ""
	switch {
	case strings.HasPrefix(name, protocol.RetryGroupPrefix):
		prefix = protocol.RetryGroupPrefix
	case strings.HasPrefix(name, protocol.DLQGroupPrefix):
		prefix = protocol.DLQGroupPrefix
	}
	return prefix + ns + nsSeparator + withoutRetryAndDLQ(name)
}

// WithoutNamespace is Java's NamespaceUtil.withoutNamespace(name, ns):
// name without ns, or name unchanged when it does not carry ns.
func WithoutNamespace(name, ns string) string {
	if !hasNamespace(name, ns) {
		return name
	}
	prefix := ""
	switch {
	case strings.HasPrefix(name, protocol.RetryGroupPrefix):
		prefix = protocol.RetryGroupPrefix
	case strings.HasPrefix(name, protocol.DLQGroupPrefix):
		prefix = protocol.DLQGroupPrefix
	}
	return prefix + strings.TrimPrefix(withoutRetryAndDLQ(name), ns+nsSeparator)
}

func callNamespace(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(mdNamespace); len(v) > 0 {
		return v[0]
	}
	return ""
}

var resourceName = (&grpcapi.Resource{}).ProtoReflect().Descriptor().FullName()

// eachResource calls f on every Resource in m, however deep.
func eachResource(m protoreflect.Message, f func(*grpcapi.Resource)) {
	if m.Descriptor().FullName() == resourceName {
		if r, ok := m.Interface().(*grpcapi.Resource); ok {
			f(r)
		}
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := range l.Len() {
				eachResource(l.Get(i).Message(), f)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				eachResource(mv.Message(), f)
				return true
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			eachResource(v.Message(), f)
		}
		return true
	})
}

// namespaces is the set of namespaces a call used (few: usually one).
type namespaces []string

func (n *namespaces) add(ns string) {
	for _, have := range *n {
		if have == ns {
			return
		}
	}
	*n = append(*n, ns)
}

// wrapRequest puts each Resource's namespace (or def) into its name and
// returns the namespaces used.
func wrapRequest(m any, def string, used *namespaces) {
	pm, ok := m.(proto.Message)
	if !ok {
		return
	}
	eachResource(pm.ProtoReflect(), func(r *grpcapi.Resource) {
		ns := r.GetResourceNamespace()
		if ns == "" {
			ns = def
		}
		if ns == "" {
			return
		}
		used.add(ns)
		r.Name = WrapNamespace(ns, r.Name)
		r.ResourceNamespace = ""
	})
}

// unwrapResponse answers each Resource carrying one of the call's
// namespaces without it, with resource_namespace set.
func unwrapResponse(m any, used namespaces) {
	pm, ok := m.(proto.Message)
	if !ok || len(used) == 0 {
		return
	}
	eachResource(pm.ProtoReflect(), func(r *grpcapi.Resource) {
		for _, ns := range used {
			if hasNamespace(r.Name, ns) {
				r.Name = WithoutNamespace(r.Name, ns)
				r.ResourceNamespace = ns
				return
			}
		}
	})
}

// namespaceUnary maps the names of a unary call (see the file comment);
// it runs before the auth interceptor.
func namespaceUnary(ctx context.Context, req any, _ *grpclib.UnaryServerInfo, handler grpclib.UnaryHandler) (any, error) {
	var used namespaces
	wrapRequest(req, callNamespace(ctx), &used)
	resp, err := handler(ctx, req)
	if err == nil {
		unwrapResponse(resp, used)
	}
	return resp, err
}

// namespaceStream maps the names of every message a stream receives and
// sends.
func namespaceStream(srv any, ss grpclib.ServerStream, _ *grpclib.StreamServerInfo, handler grpclib.StreamHandler) error {
	return handler(srv, &nsStream{ServerStream: ss, def: callNamespace(ss.Context())})
}

type nsStream struct {
	grpclib.ServerStream
	def  string
	mu   sync.Mutex // Telemetry receives and sends on two goroutines
	used namespaces
}

func (s *nsStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	s.mu.Lock()
	wrapRequest(m, s.def, &s.used)
	s.mu.Unlock()
	return nil
}

func (s *nsStream) SendMsg(m any) error {
	s.mu.Lock()
	used := s.used
	if len(used) == 0 && s.def != "" {
		used = namespaces{s.def}
	}
	s.mu.Unlock()
	unwrapResponse(m, used)
	return s.ServerStream.SendMsg(m)
}
