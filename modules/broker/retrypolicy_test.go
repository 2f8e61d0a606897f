package broker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

func TestGroupRetryPolicy(t *testing.T) {
	def := defaultGroupConfig("G").RetryPolicy()
	assert.Equal(t, int32(17), def.MaxAttempts, "retryMaxTimes 16 + the first delivery")
	assert.False(t, def.Exponential)
	assert.Equal(t, time.Second, def.Delay(1))
	assert.Equal(t, 5*time.Second, def.Delay(2))
	assert.Equal(t, 2*time.Hour, def.Delay(18))
	assert.Equal(t, 2*time.Hour, def.Delay(40), "past the last level: the last delay")

	exp := GroupConfig{RetryMaxTimes: 3, GroupRetryPolicy: &GroupRetryPolicy{Type: RetryExponential,
		ExponentialRetryPolicy: &ExponentialRetryPolicy{Initial: 100, Max: 1000, Multiplier: 3}}}
	p := exp.RetryPolicy()
	assert.Equal(t, int32(4), p.MaxAttempts)
	assert.Equal(t, []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 900 * time.Millisecond, time.Second, time.Second},
		[]time.Duration{p.Delay(1), p.Delay(2), p.Delay(3), p.Delay(4), p.Delay(30)})

	javaExp := GroupConfig{GroupRetryPolicy: &GroupRetryPolicy{Type: RetryExponential}}
	assert.Equal(t, 5*time.Second, javaExp.RetryPolicy().Delay(1), "Java's exponential defaults: 5s")
	assert.Equal(t, 2*time.Hour, javaExp.RetryPolicy().Delay(20))

	custom := GroupConfig{RetryMaxTimes: -1, GroupRetryPolicy: &GroupRetryPolicy{Type: RetryCustomized,
		CustomizedRetryPolicy: &CustomizedRetryPolicy{Next: []int64{10, 20}}}}
	p = custom.RetryPolicy()
	assert.Equal(t, int32(1), p.MaxAttempts, "no retries")
	assert.Equal(t, []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 20 * time.Millisecond}, []time.Duration{p.Delay(1), p.Delay(2), p.Delay(3)})

	for _, bad := range []*GroupRetryPolicy{
		{Type: "LINEAR"},
		{Type: RetryExponential, ExponentialRetryPolicy: &ExponentialRetryPolicy{Initial: 10, Max: 5, Multiplier: 2}},
		{Type: RetryExponential, ExponentialRetryPolicy: &ExponentialRetryPolicy{Initial: 1, Max: 5, Multiplier: 0}},
		{Type: RetryCustomized, CustomizedRetryPolicy: &CustomizedRetryPolicy{Next: []int64{1, -1}}},
	} {
		assert.Error(t, validateRetryPolicy(bad), "%+v", bad)
	}
	assert.NoError(t, validateRetryPolicy(nil))
}

// TestCreateGroupKeepsJavaDefaults: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
// with a partial body keeps the defaults of the fields it leaves out (as
// fastjson fills Java's default-constructed config), takes RocketMQ 5's
// groupRetryPolicy, and refuses a policy clients could not follow.
func TestCreateGroupKeepsJavaDefaults(t *testing.T) {
	h := startBroker(t, t.TempDir(), nil)
	resp := h.invoke(remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"G1","retryMaxTimes":2,
		"groupRetryPolicy":{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000,"max":8000,"multiplier":2}}}`))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	gc, err := h.b.GroupConfig("G1")
	require.NoError(t, err)
	assert.True(t, gc.ConsumeEnable, "consumeEnable left out: Java's default true")
	assert.Equal(t, int32(1), gc.RetryQueueNums)
	assert.Equal(t, int32(3), gc.RetryPolicy().MaxAttempts)
	assert.Equal(t, 2*time.Second, gc.RetryPolicy().Delay(2))

	resp = h.invoke(remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"G2","groupRetryPolicy":{"type":"LINEAR"}}`))
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Contains(t, resp.Remark, "LINEAR")

	// A 4.x tool's view of a group without the 5.x fields is 4.9's shape.
	resp = h.invoke(remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"G3"}`))
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	resp = h.invoke(remoting.GetAllSubscriptionGroupConfig, nil, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	var all struct {
		SubscriptionGroupTable map[string]map[string]any `json:"subscriptionGroupTable"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &all))
	require.Contains(t, all.SubscriptionGroupTable, "G3")
	assert.NotContains(t, all.SubscriptionGroupTable["G3"], "groupRetryPolicy")
	assert.NotContains(t, all.SubscriptionGroupTable["G3"], "consumeMessageOrderly")
	assert.Contains(t, all.SubscriptionGroupTable["G1"], "groupRetryPolicy")
	// Java's SubscriptionGroupManager.init: every broker lists its built-in
	// groups, with the default configuration.
	for _, g := range protocol.BuiltinGroups {
		require.Contains(t, all.SubscriptionGroupTable, g)
		assert.Equal(t, true, all.SubscriptionGroupTable[g]["consumeBroadcastEnable"], g)
		assert.Equal(t, g, all.SubscriptionGroupTable[g]["groupName"])
	}
}
