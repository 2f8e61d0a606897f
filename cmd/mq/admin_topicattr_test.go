package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAdminTopicAttributes: RocketMQ 5's quick start, `mqadmin updateTopic
// -t T -c DefaultCluster -a +message.type=FIFO`, types the topic on the
// broker; topic route and the create/update output show the type, -key
// deletes it, and a modification Java refuses fails (usage errors with
// exit 2 before anything is sent).
func TestAdminTopicAttributes(t *testing.T) {
	dev := startAdminDev(t)
	ns := dev.Namesrv
	var rows []topicRow
	mqJSON(t, ns, &rows, "updateTopic", "-t", "TypedT", "-c", "DefaultCluster", "-a", "+message.type=FIFO")
	require.Len(t, rows, 1)
	assert.Equal(t, map[string]string{"message.type": "FIFO"}, rows[0].Attributes)
	assert.True(t, rows[0].Created)

	var route struct {
		QueueDatas      []map[string]any             `json:"queueDatas"`
		TopicAttributes map[string]map[string]string `json:"topicAttributes"`
	}
	require.Eventually(t, func() bool {
		_, err := mqRun(t, ns, "topic", "route", "--topic", "TypedT")
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	mqJSON(t, ns, &route, "topic", "route", "--topic", "TypedT")
	require.NotEmpty(t, route.QueueDatas, "the name server's route is kept")
	assert.Equal(t, map[string]map[string]string{"broker-a": {"message.type": "FIFO"}}, route.TopicAttributes)
	table := parseTable(t, mqOK(t, ns, "topic", "route", "--topic", "TypedT"))
	require.Len(t, table, 1)
	assert.Equal(t, "FIFO", table[0]["MESSAGE TYPE"])

	// An update without -a keeps the type; +key changes it; -key deletes.
	table = parseTable(t, mqOK(t, ns, "updateTopic", "-t", "TypedT", "-r", "2", "-w", "2"))
	assert.Equal(t, "FIFO", table[0]["MESSAGE TYPE"])
	mqJSON(t, ns, &rows, "topic", "update", "--topic", "TypedT", "--attributes", "+message.type=DELAY")
	assert.Equal(t, map[string]string{"message.type": "DELAY"}, rows[0].Attributes)
	assert.Contains(t, mqFail(t, ns, 1, "topic", "update", "--topic", "TypedT", "--attributes", "+queue.type=BatchCQ"),
		"attempt to update an unchangeable attribute. key: queue.type")
	rows = nil // omitted attributes must not leave the last decode's
	mqJSON(t, ns, &rows, "topic", "update", "--topic", "TypedT", "--attributes", "-message.type")
	assert.Empty(t, rows[0].Attributes)

	assert.Contains(t, mqFail(t, ns, 2, "updateTopic", "-t", "TypedT", "-a", "message.type=FIFO"), "add/alter attribute format is wrong")
	assert.Contains(t, mqFail(t, ns, 1, "topic", "create", "--topic", "MixedT", "--attributes", "+message.type=MIXED"), "MIXED message type is not supported.")
}

// TestAdminGroupRetryPolicy: mqadmin updateSubGroup -p sets RocketMQ 5's
// groupRetryPolicy; an update without it keeps the policy.
func TestAdminGroupRetryPolicy(t *testing.T) {
	dev := startAdminDev(t)
	ns := dev.Namesrv
	policy := `{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":5000,"max":7200000,"multiplier":2}}`
	var rows []map[string]any
	mqJSON(t, ns, &rows, "updateSubGroup", "-g", "PolicyG", "-c", "DefaultCluster", "-p", policy)
	require.Len(t, rows, 1)
	got, _ := rows[0]["groupRetryPolicy"].(map[string]any)
	assert.Equal(t, "EXPONENTIAL", got["type"], "%v", rows[0])

	table := parseTable(t, mqOK(t, ns, "updateSubGroup", "-g", "PolicyG", "-r", "3"))
	require.Len(t, table, 1)
	assert.Equal(t, "EXPONENTIAL", table[0]["RETRY POLICY"], "an update without -p keeps the policy")
	assert.Equal(t, "3", table[0]["RETRY MAX"])

	mqJSON(t, ns, &rows, "group", "update", "--group", "PolicyG", "--retry-policy", `{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[1000,5000,10000]}}`)
	got, _ = rows[0]["groupRetryPolicy"].(map[string]any)
	assert.Equal(t, "CUSTOMIZED", got["type"])
	next, _ := got["customizedRetryPolicy"].(map[string]any)
	assert.Equal(t, []any{1000.0, 5000.0, 10000.0}, next["next"])

	assert.Contains(t, mqFail(t, ns, 2, "updateSubGroup", "-g", "PolicyG", "-p", "{not json"), "--retry-policy")
	msg := mqFail(t, ns, 1, "updateSubGroup", "-g", "PolicyG", "-p", `{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":-1,"max":10,"multiplier":2}}`)
	assert.True(t, strings.Contains(msg, "initial") || strings.Contains(msg, "retry"), msg)
}
