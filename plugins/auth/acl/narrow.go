package acl

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

// innerProducer is the producer group every Java client instance runs to
// send messages back; it never gets transaction check-backs.
const innerProducer = "CLIENT_INNER_PRODUCER"

var _ auth.RequestNarrower = (*ACL)(nil)

// NarrowRequest implements auth.RequestNarrower. RocketMQ 4.9 checks only
// a heartbeat's consumer groups and their topics, so a heartbeat passes
// whatever producer groups it names (its row in core/remoting's codeRows). A producer group's
// members receive the group's transaction check-backs, half messages
// included, so the producer groups p holds neither PUB nor SUB on are
// dropped from the body the broker processes: the client's consumers
// register as in 4.9, and it is not made a member of another account's
// producer group. CLIENT_INNER_PRODUCER is kept. Trusted principals and
// other codes are left alone.
func (a *ACL) NarrowRequest(ctx context.Context, p auth.Principal, req auth.Request) ([]byte, bool) {
	if req.Code != remoting.HeartBeat || p.Trusted || p.Cluster {
		return nil, false
	}
	doc, err := remoting.ParseStrictJSON(req.Body)
	if err != nil {
		return nil, false // Check refused it already
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, false
	}
	var key string
	for k := range obj {
		if strings.EqualFold(k, "producerDataSet") {
			key = k // ParseStrictJSON refuses a key spelt twice
		}
	}
	list, ok := obj[key].([]any)
	if key == "" || !ok {
		return nil, false
	}
	r := a.rules.Load()
	kept := make([]any, 0, len(list))
	var dropped []string
	for _, e := range list {
		g := producerGroup(e)
		if g == "" || g == innerProducer || a.authorize(r, p, groupNeed(g, auth.Any), remoting.HeartBeat) == nil {
			kept = append(kept, e)
			continue
		}
		dropped = append(dropped, g)
	}
	if len(dropped) == 0 {
		return nil, false
	}
	obj[key] = kept
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, false
	}
	a.log.InfoContext(ctx, "acl: heartbeat producer groups left out (no PUB or SUB on them: no transaction check-backs)",
		"accessKey", p.AccessKey, "groups", dropped, "remote", req.RemoteAddr)
	return body, true
}

func producerGroup(e any) string {
	m, ok := e.(map[string]any)
	if !ok {
		return ""
	}
	for k, v := range m {
		if strings.EqualFold(k, "groupName") {
			s, _ := v.(string)
			return s
		}
	}
	return ""
}
