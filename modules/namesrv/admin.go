package namesrv

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quivermq/quiver/core/remoting"
)

// registerAdmin adds the name server's administrative codes, as Java's
// DefaultRequestProcessor handles them: the KV config, write permission of
// a broker's queues, the runtime settings and the topic lists.
func (s *Server) registerAdmin() {
	s.router.Register(remoting.PutKVConfig, s.putKVConfig)
	s.router.Register(remoting.GetKVConfig, s.getKVConfig)
	s.router.Register(remoting.DeleteKVConfig, s.deleteKVConfig)
	s.router.Register(remoting.GetKVListByNamespace, s.getKVListByNamespace)
	s.router.Register(remoting.WipeWritePermOfBroker, s.wipeWritePermOfBroker)
	s.router.Register(remoting.AddWritePermOfBroker, s.addWritePermOfBroker)
	s.router.Register(remoting.GetNamesrvConfig, s.getNamesrvConfig)
	s.router.Register(remoting.UpdateNamesrvConfig, s.updateNamesrvConfig)
	s.router.Register(remoting.GetSystemTopicListFromNS, s.getSystemTopicList)
	s.router.Register(remoting.GetUnitTopicList, s.topicsBySysFlag(isUnitTopic))
	s.router.Register(remoting.GetHasUnitSubTopicList, s.topicsBySysFlag(hasUnitSub))
	s.router.Register(remoting.GetHasUnitSubUnunitTopicList, s.topicsBySysFlag(func(f int32) bool {
		return !isUnitTopic(f) && hasUnitSub(f)
	}))
}

// KV returns the KV config store (tests, embedding).
func (s *Server) KV() *KVStore { return s.kv }

// orderTopicConf is the orderTopicConf of topic's route: its
// ORDER_TOPIC_CONFIG entry when orderMessageEnable is on, as Java's
// getRouteInfoByTopic.
func (s *Server) orderTopicConf(topic string) string {
	if !s.settings.orderMessageEnable.Load() {
		return ""
	}
	v, _ := s.kv.Get(OrderTopicConfigNamespace, topic)
	if checkOrderTopicConf(v) != nil {
		return "" // a bad entry from a hand-edited file (warned at start)
	}
	return v
}

// maxOrderQueues bounds the queue count of one broker in an
// ORDER_TOPIC_CONFIG entry, as brokers bound a topic's queues.
const maxOrderQueues = 1024

// checkOrderTopicConf checks an ORDER_TOPIC_CONFIG value:
// "brokerName:queues" parts joined by ';' (what mqadmin updateOrderConf
// writes), 1..1024 queues each. Java stores any text, but clients split
// it blindly: the official Go client panics on a part without ':' (a
// trailing ';' is one) and allocates whatever count it reads, so the name
// server refuses such values instead of handing them to every client.
func checkOrderTopicConf(v string) error {
	if v == "" {
		return errors.New("empty")
	}
	for _, part := range strings.Split(v, ";") {
		name, n, found := strings.Cut(part, ":")
		if !found || name == "" || strings.Contains(n, ":") {
			return fmt.Errorf("part %q is not brokerName:queues", part)
		}
		q, err := strconv.Atoi(n)
		if err != nil || q < 1 || q > maxOrderQueues {
			return fmt.Errorf("part %q: queues must be 1..%d", part, maxOrderQueues)
		}
	}
	return nil
}

// warnBadOrderConf logs the ORDER_TOPIC_CONFIG entries routes will leave
// out (a file written by hand or by a Java name server).
func (s *Server) warnBadOrderConf() {
	kv, _ := s.kv.List(OrderTopicConfigNamespace)
	for topic, v := range kv {
		if err := checkOrderTopicConf(v); err != nil {
			s.log.Warn("ORDER_TOPIC_CONFIG entry ignored", "topic", topic, "value", v, "err", err)
		}
	}
}

// brokerTimeout is the current namesrv.broker_timeout (runtime-changeable).
func (s *Server) brokerTimeout() time.Duration {
	return time.Duration(s.settings.brokerTimeout.Load())
}

// putKVConfig is PUT_KV_CONFIG: header namespace, key, value (all
// required, empty allowed, as Java's @CFNotNull).
func (s *Server) putKVConfig(_ context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	ns, key, value := e.String("namespace"), e.String("key"), e.String("value")
	if e.Err != nil {
		return sysErr(req, "%v", e.Err)
	}
	if ns == OrderTopicConfigNamespace {
		if err := checkOrderTopicConf(value); err != nil {
			return sysErr(req, "namesrv: %s value %q for topic %s: %v", ns, value, key, err)
		}
	}
	if err := s.kv.Put(ns, key, value); err != nil {
		s.log.Error("kv config put", "namespace", ns, "key", key, "remote", p.RemoteAddr(), "err", err)
		return sysErr(req, "%v", err)
	}
	s.log.Info("kv config put", "namespace", ns, "key", key, "value", value, "remote", p.RemoteAddr())
	return ok(req)
}

// getKVConfig is GET_KV_CONFIG: the value in response header field value,
// or QUERY_NOT_FOUND with Java's remark.
func (s *Server) getKVConfig(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	ns, key := e.String("namespace"), e.String("key")
	if e.Err != nil {
		return sysErr(req, "%v", e.Err)
	}
	v, found := s.kv.Get(ns, key)
	if !found {
		return remoting.NewResponse(req, remoting.QueryNotFound, "No config item, Namespace: "+ns+" Key: "+key)
	}
	resp := ok(req)
	resp.SetExt("value", v)
	return resp
}

// deleteKVConfig is DELETE_KV_CONFIG; deleting an absent key succeeds.
func (s *Server) deleteKVConfig(_ context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	ns, key := e.String("namespace"), e.String("key")
	if e.Err != nil {
		return sysErr(req, "%v", e.Err)
	}
	if err := s.kv.Delete(ns, key); err != nil {
		s.log.Error("kv config delete", "namespace", ns, "key", key, "remote", p.RemoteAddr(), "err", err)
		return sysErr(req, "%v", err)
	}
	s.log.Info("kv config delete", "namespace", ns, "key", key, "remote", p.RemoteAddr())
	return ok(req)
}

// getKVListByNamespace is GET_KVLIST_BY_NAMESPACE: body {"table":{...}},
// or QUERY_NOT_FOUND for a namespace never written.
func (s *Server) getKVListByNamespace(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	ns := e.String("namespace")
	if e.Err != nil {
		return sysErr(req, "%v", e.Err)
	}
	body := s.kv.ListJSON(ns)
	if body == nil {
		return remoting.NewResponse(req, remoting.QueryNotFound, "No config item, Namespace: "+ns)
	}
	resp := ok(req)
	resp.Body = body
	return resp
}

// wipeWritePermOfBroker is WIPE_WRITE_PERM_OF_BROKER (graceful
// decommission): the write bit goes from every queue data of brokerName;
// the response header wipeTopicCount counts the topics touched.
//
// As in Java, the change lives in the route table only: the broker's next
// registration with an unchanged data version (its periodic one) keeps
// it, while a registration with a new data version (the broker's topics
// changed), or a fresh one after the broker's connection dropped or it
// expired, rewrites the queue data from the broker's own topic config and
// so brings the write bit back. ADD_WRITE_PERM_OF_BROKER undoes it.
func (s *Server) wipeWritePermOfBroker(_ context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	name := e.String("brokerName")
	if e.Err != nil {
		return sysErr(req, "%v", e.Err)
	}
	n := s.routes.WipeWritePerm(name)
	s.log.Info("wipe write perm of broker", "broker", name, "topics", n, "remote", p.RemoteAddr())
	resp := ok(req)
	resp.SetExt("wipeTopicCount", strconv.Itoa(n))
	return resp
}

// addWritePermOfBroker is ADD_WRITE_PERM_OF_BROKER: every queue data of
// brokerName becomes read|write (Java sets exactly PERM_READ|PERM_WRITE);
// the response header addTopicCount counts the topics touched.
func (s *Server) addWritePermOfBroker(_ context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	e := remoting.ReadExt(req)
	name := e.String("brokerName")
	if e.Err != nil {
		return sysErr(req, "%v", e.Err)
	}
	n := s.routes.AddWritePerm(name)
	s.log.Info("add write perm of broker", "broker", name, "topics", n, "remote", p.RemoteAddr())
	resp := ok(req)
	resp.SetExt("addTopicCount", strconv.Itoa(n))
	return resp
}

// getNamesrvConfig is GET_NAMESRV_CONFIG: the runtime-changeable settings
// as properties text, "key=value\n" per key.
func (s *Server) getNamesrvConfig(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	resp := ok(req)
	resp.Body = []byte(s.settings.format())
	return resp
}

// updateNamesrvConfig is UPDATE_NAMESRV_CONFIG: a properties text body.
// Unlike Java, which sets whatever field names match and ignores the
// rest, a key that is unknown or cannot change at run time, or a bad
// value, refuses the whole update with the reasons (SYSTEM_ERROR). No body
// changes nothing, as in Java.
func (s *Server) updateNamesrvConfig(_ context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	if len(req.Body) == 0 {
		return ok(req)
	}
	props, err := parseProperties(string(req.Body))
	if err != nil {
		return sysErr(req, "%v", err)
	}
	if err := s.settings.update(props); err != nil {
		s.log.Warn("update name server config refused", "remote", p.RemoteAddr(), "err", err)
		return sysErr(req, "%v", err)
	}
	s.log.Info("name server config updated", "remote", p.RemoteAddr(), "settings", s.settings.format())
	return ok(req)
}

// systemTopicList is Java's TopicList as fastjson writes it: fields in
// name order, brokerAddr left out when null.
type systemTopicList struct {
	BrokerAddr string   `json:"brokerAddr,omitempty"`
	TopicList  []string `json:"topicList"`
}

// getSystemTopicList is GET_SYSTEM_TOPIC_LIST_FROM_NS: every cluster name
// and broker name (each is a topic on its brokers) and the address of one
// broker, to ask for the broker's own system topics.
func (s *Server) getSystemTopicList(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
	topics, addr := s.routes.SystemTopics()
	return javaJSONResponse(req, systemTopicList{BrokerAddr: addr, TopicList: topics})
}

// topicsBySysFlag answers the unit topic lists (GET_UNIT_TOPIC_LIST and
// friends): the topics whose topicSysFlag, taken from one queue data as
// Java does, satisfies pick. Quiver's brokers never set the unit flags, so
// against them the lists are empty ({"topicList":[]}).
func (s *Server) topicsBySysFlag(pick func(int32) bool) remoting.HandlerFunc {
	return func(_ context.Context, _ *remoting.Peer, req *remoting.Command) *remoting.Command {
		return javaJSONResponse(req, systemTopicList{TopicList: s.routes.TopicsBySysFlag(pick)})
	}
}

// Java TopicSysFlag bits.
const (
	topicSysFlagUnit    = 1 << 0
	topicSysFlagUnitSub = 1 << 1
)

func isUnitTopic(flag int32) bool { return flag&topicSysFlagUnit != 0 }
func hasUnitSub(flag int32) bool  { return flag&topicSysFlagUnitSub != 0 }

// javaJSONResponse answers SUCCESS with v encoded as fastjson would.
func javaJSONResponse(req *remoting.Command, v any) *remoting.Command {
	b, err := marshalJava(v)
	if err != nil {
		return sysErr(req, "namesrv: encode response: %v", err)
	}
	resp := ok(req)
	resp.Body = b
	return resp
}
