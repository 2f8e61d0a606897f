package grpc

// Routes over several brokers.
//
// A 5.x client asks one endpoint for a topic's route and then talks to
// the endpoint of each broker hosting the topic's queues (sends, receives
// and acks go to the broker that holds the queue). As RocketMQ 5's proxy
// in "local" mode (one proxy inside each broker, the same gRPC port on
// every broker), the endpoint reads the topic's route from the name
// servers (GET_ROUTEINFO_BY_TOPIC, as 4.x clients do) and answers each
// broker's gRPC endpoint as the host of its master's remoting address
// with this endpoint's port (grpc.advertise's port, else grpc.listen's):
// every broker of a cluster serves gRPC on the same port. This broker's
// own queues carry this endpoint's address as before. A broker group
// without a master is left out (its queues cannot be written, and pop
// reads need the master). Without name servers, or while the name
// servers do not know the topic yet (registration lags a creation by up
// to the register interval), the answer is this broker's queues alone.

import (
	"context"
	"net"
	"sort"
	"time"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// routeLookupTimeout bounds the name-server lookup of a route.
const routeLookupTimeout = time.Second

// routeBroker is one broker hosting a topic's queues.
type routeBroker struct {
	name        string
	ep          *grpcapi.Endpoints
	read, write int32
	perm        int32
}

func (r routeBroker) broker() *grpcapi.Broker {
	return &grpcapi.Broker{Name: r.name, Id: 0, Endpoints: r.ep}
}

// peerEndpoints is the gRPC endpoint of the broker whose remoting address
// is addr: its host, this endpoint's port.
func (s *Server) peerEndpoints(addr string) (*grpcapi.Endpoints, bool) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return nil, false
	}
	own := s.endpoints()
	port := int32(0)
	if as := own.GetAddresses(); len(as) > 0 {
		port = as[0].GetPort()
	}
	ep := &grpcapi.Endpoints{Scheme: grpcapi.AddressScheme_DOMAIN_NAME, Addresses: []*grpcapi.Address{{Host: host, Port: port}}}
	if ip := net.ParseIP(host); ip != nil {
		ep.Scheme = grpcapi.AddressScheme_IPv4
		if ip.To4() == nil {
			ep.Scheme = grpcapi.AddressScheme_IPv6
		}
	}
	return ep, true
}

// routeBrokers lists the brokers hosting topic's queues, sorted by name
// (see the file comment); a status when the topic is nowhere.
func (s *Server) routeBrokers(ctx context.Context, topic *grpcapi.Resource) ([]routeBroker, *grpcapi.Status) {
	name := topic.GetName()
	if name == "" {
		return nil, status(grpcapi.Code_ILLEGAL_TOPIC, "topic name is empty")
	}
	if err := protocol.ValidateTopic(name); err != nil {
		return nil, status(grpcapi.Code_ILLEGAL_TOPIC, err.Error())
	}
	self := s.b.Config().Name
	var out []routeBroker

	// A name server that does not answer must not make the client's
	// route call time out: this broker's queues are answered instead.
	nctx, cancel := context.WithTimeout(ctx, routeLookupTimeout)
	defer cancel()
	resp, err := s.b.InvokeNamesrv(nctx, func() *remoting.Command {
		return remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": name}, nil)
	})
	if err == nil && resp.Code == remoting.Success && len(resp.Body) > 0 {
		rd, perr := protocol.DecodeTopicRouteData(resp.Body)
		if perr != nil {
			s.log.Warn("grpc: route from the name servers", "topic", name, "err", perr)
		} else {
			masters := map[string]string{}
			for _, bd := range rd.BrokerDatas {
				if a, ok := bd.BrokerAddrs[protocol.MasterID]; ok {
					masters[bd.BrokerName] = a
				}
			}
			for _, qd := range rd.QueueDatas {
				rb := routeBroker{name: qd.BrokerName, read: qd.ReadQueueNums, write: qd.WriteQueueNums, perm: qd.Perm}
				if qd.BrokerName == self {
					continue // this broker's own table is fresher (below)
				}
				ep, ok := s.peerEndpoints(masters[qd.BrokerName])
				if !ok {
					continue // no master
				}
				rb.ep = ep
				out = append(out, rb)
			}
		}
	} else if err != nil && len(s.b.Config().Namesrv) > 0 {
		s.log.Debug("grpc: route from the name servers", "topic", name, "err", err)
	}
	if tc, found := s.b.TopicConfig(name); found {

		out = append(out, routeBroker{name: self, ep: s.endpoints(), read: tc.ReadQueueNums, write: tc.WriteQueueNums, perm: tc.Perm})
	}
	if len(out) == 0 {
		return nil, status(grpcapi.Code_TOPIC_NOT_FOUND, "topic "+name+" not found")
	}

	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

func routePermission(perm int32, readable, writable bool) grpcapi.Permission {
	return permission(&protocol.TopicConfig{Perm: perm}, readable, writable)
}

// QueryRoute answers the topic's queues on every broker hosting it, each
// with its broker's gRPC endpoint (see the file comment).
func (s *Server) QueryRoute(ctx context.Context, req *grpcapi.QueryRouteRequest) (*grpcapi.QueryRouteResponse, error) {
	brokers, st := s.routeBrokers(ctx, req.GetTopic())
	if st != nil {
		return &grpcapi.QueryRouteResponse{Status: st}, nil
	}
	types := topicAcceptTypes(s.b.TopicConfig(req.GetTopic().GetName())) // msgtype.go
	var qs []*grpcapi.MessageQueue
	for _, rb := range brokers {
		br := rb.broker()
		for i := range max(rb.read, rb.write) {
			qs = append(qs, &grpcapi.MessageQueue{
				Topic: &grpcapi.Resource{Name: req.GetTopic().GetName(), ResourceNamespace: req.GetTopic().GetResourceNamespace()},
				Id:    i, Permission: routePermission(rb.perm, i < rb.read, i < rb.write),
				Broker: br, AcceptMessageTypes: types,
			})
		}
	}
	return &grpcapi.QueryRouteResponse{Status: ok(), MessageQueues: qs}, nil
}

// QueryAssignment answers one queue (id -1) per broker with readable
// queues of the topic, as RocketMQ's proxy does for pop consumption (the
// broker picks the queue).
func (s *Server) QueryAssignment(ctx context.Context, req *grpcapi.QueryAssignmentRequest) (*grpcapi.QueryAssignmentResponse, error) {
	brokers, st := s.routeBrokers(ctx, req.GetTopic())
	if st != nil {
		return &grpcapi.QueryAssignmentResponse{Status: st}, nil
	}
	if req.GetGroup().GetName() == "" {
		return &grpcapi.QueryAssignmentResponse{Status: status(grpcapi.Code_ILLEGAL_CONSUMER_GROUP, "consumer group is empty")}, nil
	}
	types := topicAcceptTypes(s.b.TopicConfig(req.GetTopic().GetName()))
	var as []*grpcapi.Assignment
	for _, rb := range brokers {
		perm := routePermission(rb.perm, rb.read > 0, rb.write > 0)
		if perm != grpcapi.Permission_READ && perm != grpcapi.Permission_READ_WRITE {
			continue
		}
		as = append(as, &grpcapi.Assignment{MessageQueue: &grpcapi.MessageQueue{
			Topic: &grpcapi.Resource{Name: req.GetTopic().GetName(), ResourceNamespace: req.GetTopic().GetResourceNamespace()},
			Id:    -1, Permission: perm, Broker: rb.broker(), AcceptMessageTypes: types,
		}})
	}
	return &grpcapi.QueryAssignmentResponse{Status: ok(), Assignments: as}, nil
}
