package acl

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

func TestNarrowHeartbeatProducers(t *testing.T) {
	a, _, logs := newACL(t, testYAML)
	ctx := context.Background()
	body := `{"clientID":"c","producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"},{"groupName":"groupB"},{"GroupName":"groupA"},{"groupName":"groupX"}],` +
		`"consumerDataSet":[{"groupName":"groupB","subscriptionDataSet":[{"topic":"topicB","subVersion":1796214814246119280}]}]}`
	req := signed(remoting.HeartBeat, nil, []byte(body), "RocketMQ")
	p, err := a.Check(ctx, req)
	require.NoError(t, err, "producer groups are not checked")

	out, ok := a.NarrowRequest(ctx, p, req)
	require.True(t, ok)
	var got struct {
		ProducerDataSet []map[string]string `json:"producerDataSet"`
		ConsumerDataSet []struct {
			GroupName           string `json:"groupName"`
			SubscriptionDataSet []struct {
				Topic      string
				SubVersion json.Number
			}
		}
	}
	require.NoError(t, json.Unmarshal(out, &got))
	// groupA is DENY, groupX falls to defaultGroupPerm SUB: kept.
	assert.Equal(t, []map[string]string{{"groupName": "CLIENT_INNER_PRODUCER"}, {"groupName": "groupB"}, {"groupName": "groupX"}}, got.ProducerDataSet)
	require.Len(t, got.ConsumerDataSet, 1)
	assert.Equal(t, "groupB", got.ConsumerDataSet[0].GroupName)
	assert.Equal(t, json.Number("1796214814246119280"), got.ConsumerDataSet[0].SubscriptionDataSet[0].SubVersion, "numbers kept exactly")
	assert.Contains(t, logs.String(), "groups=[groupA]")
	assert.Contains(t, string(req.Body), "groupA", "the borrowed body is not written")

	// Nothing to drop, a trusted principal, another code: left alone.
	_, ok = a.NarrowRequest(ctx, p, signed(remoting.HeartBeat, nil, []byte(`{"producerDataSet":[{"groupName":"groupB"}]}`), "RocketMQ"))
	assert.False(t, ok)
	_, ok = a.NarrowRequest(ctx, auth.Principal{Trusted: true}, req)
	assert.False(t, ok)
	_, ok = a.NarrowRequest(ctx, p, auth.Request{Code: remoting.SendMessage, Body: []byte(body)})
	assert.False(t, ok)
}
