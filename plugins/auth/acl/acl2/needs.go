package acl2

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/json"
	"strings"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/plugins/auth/acl"
)

const retryPrefix = "%RETRY%"

// need is one authorization a request needs: any of acts on res.
type need struct {
	res  Resource
	acts []Action
}

func (p *Plugin) clusterRes() Resource {
	return Resource{Type: Cluster, Name: p.cluster, Pattern: Literal}
}

func resourceOf(r auth.Resource) Resource {
	if g, ok := strings.CutPrefix(r.Name, retryPrefix); ok {
		return Resource{Type: Group, Name: g, Pattern: Literal}
	}
	if r.IsGroup {
		return Resource{Type: Group, Name: r.Name, Pattern: Literal}
	}
	return Resource{Type: Topic, Name: r.Name, Pattern: Literal}
}

func actionsOf(a auth.Action) []Action {
	switch a {
	case auth.Pub:
		return []Action{Pub}
	case auth.Sub:
		return []Action{Sub}
	case auth.Any:
		return []Action{Pub, Sub}
	}
	return []Action{Update}
}

// authAction is the action an ACL 2.0 code (AUTH_*, by its name in the
// request-code table) needs on the cluster: Get for reads, Update for
// changes (Java's @RocketMQAction of their headers).
func authAction(code int32) (Action, bool) {
	name, ok := strings.CutPrefix(remoting.RequestCodeName(code), "AUTH_")
	switch {
	case !ok:
		return "", false
	case strings.HasPrefix(name, "GET_"), strings.HasPrefix(name, "LIST_"):
		return Get, true
	}
	return Update, true
}

// needs maps req to what it needs through its row of the request-code
// table (core/remoting), as ACL 1.0 reads it.
func (p *Plugin) needs(ctx context.Context, req auth.Request) ([]need, error) {
	if a, ok := authAction(req.Code); ok {
		return []need{{res: p.clusterRes(), acts: []Action{a}}}, nil
	}
	rule, ns, err := acl.Required(ctx, req)
	if err != nil {
		return nil, denied("%s", strings.TrimPrefix(err.Error(), "acl: "))
	}
	switch rule.Kind {
	case acl.Public:
		return nil, nil
	case acl.Resources:
		out := make([]need, 0, len(ns))
		for _, n := range ns {
			out = append(out, need{res: resourceOf(n.Resource), acts: actionsOf(n.Action)})
		}
		return out, nil
	case acl.Listed:
		return []need{{res: Resource{Type: Topic, Pattern: Literal}, acts: []Action{List}}}, nil
	case acl.Refused:
		return nil, denied("request code %d (%s) is served by clients, not servers: refused", req.Code, rule.Name())
	case acl.ClusterOnly:
		return []need{{res: p.clusterRes(), acts: []Action{Update}}}, nil
	}
	return []need{p.adminNeed(req)}, nil
}

// adminNeed is what an admin code needs: Create, Update or Delete on the
// topic or group it changes (Java's @RocketMQAction), List on topics or
// groups for the whole tables, Get on the cluster for other reads, Update
// on the cluster for other writes.
func (p *Plugin) adminNeed(req auth.Request) need {
	ext := req.ExtFields
	topic := func(a Action) need {
		if t := ext["topic"]; t != "" {
			return need{res: Resource{Type: Topic, Name: t, Pattern: Literal}, acts: []Action{a}}
		}
		return need{res: p.clusterRes(), acts: []Action{Update}}
	}
	group := func(name string, a Action) need {
		if name != "" {
			return need{res: resourceOf(auth.Resource{Name: name, IsGroup: true}), acts: []Action{a}}
		}
		return need{res: p.clusterRes(), acts: []Action{Update}}
	}
	switch req.Code {
	case remoting.UpdateAndCreateTopic:
		return topic(Create)
	case remoting.DeleteTopicInBroker:
		return topic(Delete)
	case remoting.UpdateAndCreateSubscriptionGroup:
		var body struct {
			GroupName string `json:"groupName"`
		}
		_ = json.Unmarshal(req.Body, &body)
		return group(body.GroupName, Create)
	case remoting.DeleteSubscriptionGroup:
		return group(ext["groupName"], Delete)
	case remoting.InvokeBrokerToResetOffset:
		return group(ext["group"], Update)
	case remoting.CloneGroupOffset:
		return group(ext["destGroup"], Update)
	case remoting.GetAllTopicConfig, remoting.GetTopicConfigList, remoting.GetTopicNameList:
		return need{res: Resource{Type: Topic, Pattern: Literal}, acts: []Action{List}}
	case remoting.GetAllSubscriptionGroupConfig:
		return need{res: Resource{Type: Group, Pattern: Literal}, acts: []Action{List}}
	}
	name := remoting.RequestCodeName(req.Code)
	for _, read := range []string{"GET_", "QUERY_", "VIEW_", "WHO_"} {
		if strings.HasPrefix(name, read) {
			return need{res: p.clusterRes(), acts: []Action{Get}}
		}
	}
	return need{res: p.clusterRes(), acts: []Action{Update}}
}

func hmacEqual(mac, key, content []byte) bool {
	h := hmac.New(sha1.New, key)
	h.Write(content)
	return hmac.Equal(mac, h.Sum(nil))
}
