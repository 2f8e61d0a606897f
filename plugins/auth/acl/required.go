package acl

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

const (
	retryPrefix = "%RETRY%"
	traceTopic  = "RMQ_SYS_TRACE_TOPIC"
)

// Need is one permission a request needs: an action on a resource, or
// auth.Admin with a zero Resource for admin-only codes.
type Need struct {
	Resource auth.Resource
	Action   auth.Action
}

func (n Need) String() string {
	if n.Action == auth.Admin {
		return "ADMIN"
	}
	return fmt.Sprintf("%s on %s", actionString(n.Action), resourceString(n.Resource))
}

func actionString(a auth.Action) string {
	switch a {
	case auth.Pub:
		return "PUB"
	case auth.Sub:
		return "SUB"
	case auth.Admin:
		return "ADMIN"
	}
	return permString(byte(a))
}

func resourceString(r auth.Resource) string {
	if r.IsGroup || strings.HasPrefix(r.Name, retryPrefix) {
		return "group " + strings.TrimPrefix(r.Name, retryPrefix)
	}
	return "topic " + r.Name
}

// requirement says what one request code needs.
type requirement struct {
	name  string
	admin bool
	// needs lists the resources; nil means the signature alone is enough.
	needs func(ext map[string]string, body []byte) ([]Need, error)
}

// requirements is THE table: what each request code needs beyond a valid
// signature. Codes that are not listed need only the signature (Java's
// default), including GET_ROUTEINFO_BY_TOPIC and the other name-server
// queries, REGISTER_BROKER, GET_MAX_OFFSET and END_TRANSACTION.
//
// It follows Java 4.9.8's PlainAccessResource.parse and
// Permission.ADMIN_CODE (spec §8.2), with these differences:
//
//   - SEND_MESSAGE / SEND_MESSAGE_V2 to a %RETRY%<g> topic need SUB on
//     group g, the group the retry topic belongs to, instead of PUB on the
//     topic. Java reads the group from an ext field ("group" for
//     SEND_MESSAGE, which the header never carries, so Java checks the
//     group "null"; "a" = producerGroup for V2, which is
//     CLIENT_INNER_PRODUCER when the Go client sends a message back).
//     Quiver derives it from the topic, so nobody can write into a retry
//     topic of a group they may not consume.
//   - SEND_BATCH_MESSAGE (320) needs PUB on topic b like SEND_MESSAGE_V2
//     (Java 4.9.8 checks only the signature; 5.x checks it like V2).
//   - QUERY_CONSUMER_OFFSET (14) needs SUB on the group and the topic,
//     like UPDATE_CONSUMER_OFFSET (Java checks only the signature).
//   - DELETE_TOPIC_IN_NAMESRV (216) and INVOKE_BROKER_TO_RESET_OFFSET
//     (222) are admin-only too (Java's name server has no ACL, and 222 is
//     not in ADMIN_CODE).
//   - A resource field a listed code needs but the request lacks refuses
//     the request (Java checks a resource named "null"), except the
//     consumerGroup of UNREGISTER_CLIENT, which a producer leaves out.
var requirements = map[int32]requirement{
	remoting.SendMessage:            {name: "SEND_MESSAGE", needs: sendNeeds("topic")},
	remoting.SendMessageV2:          {name: "SEND_MESSAGE_V2", needs: sendNeeds("b")},
	remoting.SendBatchMessage:       {name: "SEND_BATCH_MESSAGE", needs: sendNeeds("b")},
	remoting.ConsumerSendMsgBack:    {name: "CONSUMER_SEND_MSG_BACK", needs: fields(group("group"))},
	remoting.PullMessage:            {name: "PULL_MESSAGE", needs: fields(topic("topic"), group("consumerGroup"))},
	remoting.QueryMessage:           {name: "QUERY_MESSAGE", needs: fields(topic("topic"))},
	remoting.HeartBeat:              {name: "HEART_BEAT", needs: heartbeatNeeds},
	remoting.UnregisterClient:       {name: "UNREGISTER_CLIENT", needs: fields(optGroup("consumerGroup"))},
	remoting.GetConsumerListByGroup: {name: "GET_CONSUMER_LIST_BY_GROUP", needs: fields(group("consumerGroup"))},
	remoting.UpdateConsumerOffset:   {name: "UPDATE_CONSUMER_OFFSET", needs: fields(group("consumerGroup"), topic("topic"))},
	remoting.QueryConsumerOffset:    {name: "QUERY_CONSUMER_OFFSET", needs: fields(group("consumerGroup"), topic("topic"))},
	remoting.EndTransaction:         {name: "END_TRANSACTION"},

	remoting.UpdateAndCreateTopic:             {name: "UPDATE_AND_CREATE_TOPIC", admin: true},
	remoting.UpdateBrokerConfig:               {name: "UPDATE_BROKER_CONFIG", admin: true},
	remoting.DeleteTopicInBroker:              {name: "DELETE_TOPIC_IN_BROKER", admin: true},
	remoting.UpdateAndCreateSubscriptionGroup: {name: "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP", admin: true},
	remoting.DeleteSubscriptionGroup:          {name: "DELETE_SUBSCRIPTIONGROUP", admin: true},
	remoting.DeleteTopicInNamesrv:             {name: "DELETE_TOPIC_IN_NAMESRV", admin: true},
	remoting.InvokeBrokerToResetOffset:        {name: "INVOKE_BROKER_TO_RESET_OFFSET", admin: true},
}

// Required returns what req needs beyond a valid signature, in the order
// of the table, without duplicates. A malformed request (a missing
// resource field, a HEART_BEAT body that is not JSON) is an error wrapping
// auth.ErrDenied.
func Required(req auth.Request) ([]Need, error) {
	r, ok := requirements[req.Code]
	if !ok {
		return nil, nil
	}
	var out []Need
	if r.admin {
		out = append(out, Need{Action: auth.Admin})
	}
	if r.needs == nil {
		return out, nil
	}
	needs, err := r.needs(req.ExtFields, req.Body)
	if err != nil {
		return nil, &Error{kind: auth.ErrDenied, msg: fmt.Sprintf("%s (%d): %v", r.name, req.Code, err)}
	}
	return dedupe(append(out, needs...)), nil
}

func dedupe(ns []Need) []Need {
	seen := make(map[Need]bool, len(ns))
	out := ns[:0]
	for _, n := range ns {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// topicNeed classifies like Java: a %RETRY% name is a group resource.
func topicNeed(name string, act auth.Action) Need {
	return Need{Resource: auth.Resource{Name: name, IsGroup: strings.HasPrefix(name, retryPrefix)}, Action: act}
}

func groupNeed(g string) Need {
	return Need{Resource: auth.Resource{Name: retryPrefix + g, IsGroup: true}, Action: auth.Sub}
}

type fieldNeed func(ext map[string]string) (Need, error)

func required(ext map[string]string, key string) (string, error) {
	v := ext[key]
	if v == "" {
		return "", fmt.Errorf("the %s field is missing", key)
	}
	return v, nil
}

func topic(key string) fieldNeed {
	return func(ext map[string]string) (Need, error) {
		v, err := required(ext, key)
		return topicNeed(v, auth.Sub), err
	}
}

func group(key string) fieldNeed {
	return func(ext map[string]string) (Need, error) {
		v, err := required(ext, key)
		return groupNeed(v), err
	}
}

// optGroup is group for a field that may be absent: UNREGISTER_CLIENT of a
// producer carries no consumerGroup and then needs only the signature.
func optGroup(key string) fieldNeed {
	return func(ext map[string]string) (Need, error) {
		if ext[key] == "" {
			return Need{}, nil
		}
		return groupNeed(ext[key]), nil
	}
}

func fields(fs ...fieldNeed) func(map[string]string, []byte) ([]Need, error) {
	return func(ext map[string]string, _ []byte) ([]Need, error) {
		out := make([]Need, 0, len(fs))
		for _, f := range fs {
			n, err := f(ext)
			if err != nil {
				return nil, err
			}
			if n != (Need{}) {
				out = append(out, n)
			}
		}
		return out, nil
	}
}

// sendNeeds: PUB on the topic; SUB on group g for a %RETRY%g topic.
func sendNeeds(key string) func(map[string]string, []byte) ([]Need, error) {
	return func(ext map[string]string, _ []byte) ([]Need, error) {
		t, err := required(ext, key)
		if err != nil {
			return nil, err
		}
		if g, ok := strings.CutPrefix(t, retryPrefix); ok {
			return []Need{groupNeed(g)}, nil
		}
		return []Need{topicNeed(t, auth.Pub)}, nil
	}
}

// heartbeatBody is the part of HeartbeatData the ACL reads. Decoding only
// these fields keeps the check independent of the rest of the body (the
// processor validates that).
type heartbeatBody struct {
	ConsumerDataSet []*struct {
		GroupName           string `json:"groupName"`
		SubscriptionDataSet []*struct {
			Topic string `json:"topic"`
		} `json:"subscriptionDataSet"`
	} `json:"consumerDataSet"`
}

// heartbeatNeeds: for each consumer group, SUB on the group and on every
// subscribed topic.
func heartbeatNeeds(_ map[string]string, body []byte) ([]Need, error) {
	var hb heartbeatBody
	if err := json.Unmarshal(body, &hb); err != nil {
		return nil, fmt.Errorf("the body is not heartbeat JSON")
	}
	var out []Need
	for _, c := range hb.ConsumerDataSet {
		if c == nil || c.GroupName == "" {
			return nil, fmt.Errorf("a consumer has no groupName")
		}
		out = append(out, groupNeed(c.GroupName))
		for _, s := range c.SubscriptionDataSet {
			if s == nil || s.Topic == "" {
				return nil, fmt.Errorf("a subscription of group %s has no topic", c.GroupName)
			}
			out = append(out, topicNeed(s.Topic, auth.Sub))
		}
	}
	return out, nil
}

// CodeName names a request code of the table ("" for others).
func CodeName(code int32) string { return requirements[code].name }
