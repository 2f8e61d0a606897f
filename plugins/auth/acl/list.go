package acl

import (
	"context"
	"encoding/json"

	"github.com/quivermq/quiver/core/auth"
)

var _ auth.AnswerFilter = (*ACL)(nil)

// topicList is the answer of the Listed codes (Java's TopicList), keys in
// fastjson's order.
type topicList struct {
	BrokerAddr string   `json:"brokerAddr,omitempty"`
	TopicList  []string `json:"topicList"`
}

// FilterAnswer implements auth.AnswerFilter: the answer of a Listed code
// keeps the topics the account holds a permission on (PUB or SUB; a
// %RETRY%<g> topic by group g's), for an account that is neither admin
// nor a cluster member nor white-listed.
func (a *ACL) FilterAnswer(_ context.Context, req auth.Request, body []byte) ([]byte, error) {
	if rule, ok := RuleFor(req.Code); !ok || rule.Kind != Listed {
		return body, nil
	}
	r := a.rules.Load()
	p, err := a.authenticate(r, req, false, false)
	if err != nil {
		return nil, err
	}
	if p.Trusted || p.Admin || p.Cluster {
		return body, nil
	}
	var l topicList
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, denied("%s (%d): the answer is not a topic list", CodeName(req.Code), req.Code)
	}
	kept := make([]string, 0, len(l.TopicList))
	for _, t := range l.TopicList {
		n := topicNeed(t, auth.Any)
		n.Action = auth.Any
		if a.authorize(r, p, n, req.Code) == nil {
			kept = append(kept, t)
		}
	}
	l.TopicList = kept
	out, err := json.Marshal(l)
	if err != nil {
		return nil, denied("%s (%d): encode the list: %v", CodeName(req.Code), req.Code, err)
	}
	return out, nil
}
