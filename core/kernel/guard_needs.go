package kernel

import (
	"context"
	"fmt"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

// need is one authorization the guard asks a plugin's auth.Authorizer
// for: the action on the resource named by an extFields key (empty key:
// no resource, for auth.Admin).
type need struct {
	key     string
	altKey  string // SEND_MESSAGE_V2's short name for the same field
	isGroup bool
	act     auth.Action
}

// declaredNeeds is what a request code needs from a plugin that offers
// only the declared auth.Authenticator and auth.Authorizer (see
// "Authorization by the guard" in package core/auth). A code listed with
// no needs takes an authenticated sender only; a code that is not listed
// needs auth.Admin; the cluster codes need a cluster member.
var declaredNeeds = map[int32][]need{
	remoting.SendMessage:             {{key: "topic", altKey: "b", act: auth.Pub}},
	remoting.SendMessageV2:           {{key: "topic", altKey: "b", act: auth.Pub}},
	remoting.SendBatchMessage:        {{key: "topic", altKey: "b", act: auth.Pub}},
	remoting.SendReplyMessage:        {{key: "topic", altKey: "b", act: auth.Pub}},
	remoting.SendReplyMessageV2:      {{key: "topic", altKey: "b", act: auth.Pub}},
	remoting.RecallMessage:           {{key: "topic", act: auth.Pub}},
	remoting.PullMessage:             {{key: "topic", act: auth.Sub}, {key: "consumerGroup", isGroup: true, act: auth.Sub}},
	remoting.QueryConsumerOffset:     {{key: "topic", act: auth.Sub}, {key: "consumerGroup", isGroup: true, act: auth.Sub}},
	remoting.UpdateConsumerOffset:    {{key: "topic", act: auth.Sub}, {key: "consumerGroup", isGroup: true, act: auth.Sub}},
	remoting.QueryMessage:            {{key: "topic", act: auth.Sub}},
	remoting.SearchOffsetByTimestamp: {{key: "topic", act: auth.Sub}},
	remoting.GetMaxOffset:            {{key: "topic", act: auth.Sub}},
	remoting.GetMinOffset:            {{key: "topic", act: auth.Sub}},
	remoting.GetEarliestMsgStoreTime: {{key: "topic", act: auth.Sub}},
	remoting.GetTopicConfig:          {{key: "topic", act: auth.Any}},
	remoting.GetConsumerListByGroup:  {{key: "consumerGroup", isGroup: true, act: auth.Sub}},
	remoting.ConsumerSendMsgBack:     {{key: "group", isGroup: true, act: auth.Sub}},
	remoting.HeartBeat:               {},
	remoting.UnregisterClient:        {},
	remoting.LockBatchMQ:             {},
	remoting.UnlockBatchMQ:           {},
	remoting.GetRouteInfoByTopic:     {},
	remoting.GetBrokerClusterInfo:    {},
}

// clusterCodes need a cluster member (auth.Principal.Cluster or Trusted)
// from a plugin without auth.Checker.
var clusterCodes = map[int32]bool{
	remoting.RegisterBroker:   true,
	remoting.UnregisterBroker: true,
	remoting.QueryDataVersion: true,
}

// authorizeDeclared decides req for a plugin that offers only the declared
// interfaces: Authenticate, then Authorize on what the code needs. The
// error wraps auth.ErrUnauthenticated or auth.ErrDenied.
func authorizeDeclared(ctx context.Context, an auth.Authenticator, az auth.Authorizer, req auth.Request) error {
	p, err := an.Authenticate(ctx, req)
	if err != nil {
		return err
	}
	if clusterCodes[req.Code] {
		if p.Cluster || p.Trusted {
			return nil
		}
		return fmt.Errorf("%w: request code %d (%s) is for cluster members", auth.ErrDenied, req.Code, remoting.RequestCodeName(req.Code))
	}
	needs, listed := declaredNeeds[req.Code]
	if !listed {
		return az.Authorize(ctx, p, auth.Resource{}, auth.Admin)
	}
	for _, n := range needs {
		name := req.ExtFields[n.key]
		if name == "" && n.altKey != "" {
			name = req.ExtFields[n.altKey]
		}
		if name == "" {
			return fmt.Errorf("%w: request code %d (%s) names no %s", auth.ErrDenied, req.Code, remoting.RequestCodeName(req.Code), n.key)
		}
		if n.isGroup {
			name = "%RETRY%" + name
		}
		if err := az.Authorize(ctx, p, auth.Resource{Name: name, IsGroup: n.isGroup}, n.act); err != nil {
			return err
		}
	}
	return nil
}

// declaredInterceptor checks each request with a plugin's declared
// interfaces (authorizeDeclared); a request with this process's own
// credential passes as a cluster member's. A refusal answers
// NO_PERMISSION with the plugin's reason.
func (g *Guard) declaredInterceptor(an auth.Authenticator, az auth.Authorizer) remoting.Interceptor {
	return func(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
		if g.local != nil && g.local.valid(req) {
			return nil
		}
		var remote string
		if p != nil {
			remote = p.RemoteAddr()
		}
		err := authorizeDeclared(ctx, an, az, auth.Request{Code: req.Code, RemoteAddr: remote, ExtFields: req.ExtFields, Body: req.Body, Lookup: g.lookup.get()})
		if err == nil {
			return nil
		}
		return remoting.NewResponse(req, remoting.NoPermission, err.Error())
	}
}
