package acl

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

// What the processors decode (modules/broker: lockBatchBody, the
// heartbeat), with encoding/json as they do.
type lockBodyAsProcessed struct {
	ConsumerGroup string `json:"consumerGroup"`
	ClientID      string `json:"clientId"`
	MQSet         []struct {
		Topic string `json:"topic"`
	} `json:"mqSet"`
}

type heartbeatAsProcessed struct {
	ProducerDataSet []struct {
		GroupName string `json:"groupName"`
	} `json:"producerDataSet"`
	ConsumerDataSet []struct {
		GroupName           string `json:"groupName"`
		SubscriptionDataSet []struct {
			Topic string `json:"topic"`
		} `json:"subscriptionDataSet"`
	} `json:"consumerDataSet"`
}

// FuzzBodyAgreement: whenever the ACL accepts a body, every group and
// topic the processor will act on is among what the ACL checked, so no
// body makes the check and the processor read different names.
func FuzzBodyAgreement(f *testing.F) {
	for _, s := range []string{
		`{"consumerGroup":"G","clientId":"c","mqSet":[{"topic":"T","queueId":0}]}`,
		`{"consumerGroup":"Mine","ConsumerGroup":"Victim","clientId":"c","mqSet":[]}`,
		`{"consumerGroup":"Mine","consumerGroup":"Victim","clientId":"c","mqSet":[]}`,
		`{"CONSUMERGROUP":"Victim","clientId":"c"}`,
		`{"conſumerGroup":"Victim","consumerGroup":"Mine"}`,
		`{"consumerGroup":"G","mqSet":[{"topic":"T","Topic":"U"}]}`,
		`{"consumerGroup":"G","mqSet":[{"topic":"T"},{"TOPIC":"U"}]}`,
		`{"consumerDataSet":[{"groupName":"G","subscriptionDataSet":[{"topic":"T"}]}]}`,
		`{"consumerDataSet":[{"groupName":"G"},{"GroupName":"V","groupname":"W"}]}`,
		`{"consumerDataSet":[{"groupName":"G"}],"ConsumerDataSet":[{"groupName":"V"}]}`,
		`{"consumerDataSet":null}`,
		`{"producerDataSet":[{"groupName":"PG"},{"GROUPNAME":"X"}]}`,
		`{"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"},{"groupName":"Victim"}]}`,
		`{"consumerGroup":"G","mqSet":null}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		checkLockAgreement(t, remoting.LockBatchMQ, body)
		checkLockAgreement(t, remoting.UnlockBatchMQ, body)
		checkHeartbeatAgreement(t, body)
	})
}

var (
	fuzzACLOnce sync.Once
	fuzzACLVal  *ACL
)

// fuzzACL is one ACL on testYAML for the fuzz target's iterations.
func fuzzACL(t *testing.T) *ACL {
	fuzzACLOnce.Do(func() {
		r, err := parseRules([]byte(testYAML))
		if err != nil {
			t.Fatal(err)
		}
		a := &ACL{log: slog.New(slog.DiscardHandler)}
		a.rules.Store(r)
		fuzzACLVal = a
	})
	return fuzzACLVal
}

func checked(t *testing.T, code int32, body string) (map[Need]bool, bool) {
	_, needs, err := Required(context.Background(), auth.Request{Code: code, ExtFields: map[string]string{}, Body: []byte(body)})
	if err != nil {
		return nil, false
	}
	m := map[Need]bool{}
	for _, n := range needs {
		m[n] = true
	}
	return m, true
}

func checkLockAgreement(t *testing.T, code int32, body string) {
	needs, ok := checked(t, code, body)
	if !ok {
		return
	}
	var b lockBodyAsProcessed
	if json.Unmarshal([]byte(body), &b) != nil || b.ConsumerGroup == "" || b.ClientID == "" {
		return // the processor refuses it
	}
	if !needs[groupNeed(b.ConsumerGroup, auth.Sub)] {
		t.Fatalf("%s: the processor locks for group %q, the ACL checked %v", CodeName(code), b.ConsumerGroup, needs)
	}
	for _, mq := range b.MQSet {
		if !needs[topicNeed(mq.Topic, auth.Sub)] {
			t.Fatalf("%s: the processor locks topic %q, the ACL checked %v", CodeName(code), mq.Topic, needs)
		}
	}
}

func checkHeartbeatAgreement(t *testing.T, body string) {
	needs, ok := checked(t, remoting.HeartBeat, body)
	if !ok {
		return
	}
	var hb heartbeatAsProcessed
	if json.Unmarshal([]byte(body), &hb) != nil {
		return
	}
	// Producer groups are not checked (RocketMQ 4.9); the ones an account
	// holds nothing on are dropped from the body the processor gets: it
	// must join none of them.
	a := fuzzACL(t)
	p := auth.Principal{AccessKey: "RocketMQ"}
	narrowed, ok := a.NarrowRequest(context.Background(), p, auth.Request{Code: remoting.HeartBeat, Body: []byte(body)})
	if !ok {
		narrowed = []byte(body)
	}
	var got heartbeatAsProcessed
	if err := json.Unmarshal(narrowed, &got); err != nil {
		t.Fatalf("HEART_BEAT: the narrowed body %q does not decode: %v", narrowed, err)
	}
	for _, pd := range got.ProducerDataSet {
		if pd.GroupName != innerProducer && pd.GroupName != "" && a.Authorize(context.Background(), p, auth.Resource{Name: pd.GroupName, IsGroup: true}, auth.Any) != nil {
			t.Fatalf("HEART_BEAT: the processor joins producer group %q the account holds nothing on (body %s)", pd.GroupName, narrowed)
		}
	}
	for _, c := range hb.ConsumerDataSet {
		if !needs[groupNeed(c.GroupName, auth.Sub)] {
			t.Fatalf("HEART_BEAT: the processor joins group %q, the ACL checked %v", c.GroupName, needs)
		}
		for _, s := range c.SubscriptionDataSet {
			if !needs[topicNeed(s.Topic, auth.Sub)] {
				t.Fatalf("HEART_BEAT: the processor subscribes %q, the ACL checked %v", s.Topic, needs)
			}
		}
	}
}
