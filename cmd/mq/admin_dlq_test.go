package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/internal/testserver"
)

// TestDLQResendReportsBrokersWithoutTheLetter: a dead-letter topic on two
// brokers, the letter on one; dlq resend --msg-id resends it and names
// the broker that does not hold it (table and JSON).
func TestDLQResendReportsBrokersWithoutTheLetter(t *testing.T) {
	dev := startAdminDev(t)
	ns := dev.Namesrv
	// A second broker, in process, registered with the same name server.
	addrB := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	g := &globalFlags{sets: []string{
		"broker.namesrv=" + ns, "broker.name=broker-b", "broker.listen=" + addrB, "broker.advertise=" + addrB,
		"storage.dir=" + t.TempDir(), "storage.commitlog.segment_size=4MiB",
		"console.listen=", "metrics.listen=", "log.level=error",
	}}
	plan, err := planConfig(g, roleBroker)
	require.NoError(t, err)
	app := fxtest.New(t, plan.Options(), fx.NopLogger)
	app.RequireStart()
	defer app.RequireStop()

	const topic, group = "DLQTwoBrokers", "DLQTwoBrokersGroup"
	dlq := protocol.DLQTopic(group)
	require.Eventually(t, func() bool {
		out, _, err := mqRunIn(t, ns, nil, "cluster", "list")
		return err == nil && strings.Contains(out, "broker-b")
	}, 15*time.Second, 50*time.Millisecond, "broker-b registers")
	mqOK(t, ns, "topic", "create", "--topic", topic, "--read-queues", "1", "--write-queues", "1", "--broker", dev.Broker)
	mqOK(t, ns, "topic", "create", "--topic", dlq, "--read-queues", "1", "--write-queues", "1")
	mqOK(t, ns, "group", "create", "--group", group)
	var sent map[string]any
	mqJSON(t, ns, &sent, "message", "send", "--topic", topic, "--body", "dead")
	killToDLQ(t, dev.Broker, group, sent["offsetMsgId"].(string))
	msgID := sent["msgId"].(string)
	require.Eventually(t, func() bool {
		out, _, err := mqRunIn(t, ns, nil, "topic", "route", "--topic", dlq, "--output", "json")
		return err == nil && strings.Contains(out, "broker-a") && strings.Contains(out, "broker-b")
	}, 15*time.Second, 50*time.Millisecond, "the dead-letter topic is routed to both brokers")

	var rep resendReport
	mqJSON(t, ns, &rep, "dlq", "resend", "--group", group, "--msg-id", msgID)
	require.Len(t, rep.Resent, 1)
	assert.Equal(t, "broker-a", rep.Resent[0].Broker)
	assert.Equal(t, []string{"broker-b"}, rep.NotFound)

	out := mqOK(t, ns, "dlq", "resend", "--group", group, "--msg-id", msgID, "--again")
	assert.Contains(t, out, "dead letter "+msgID+" not found on broker(s) broker-b\n")
	assert.Contains(t, out, "1 dead letter(s) resent")

	// --all asks every broker for everything: nobody is "not found".
	out = mqOK(t, ns, "dlq", "resend", "--group", group, "--all", "--yes", "--output", "json")
	var all map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(out), &all))
	assert.NotContains(t, all, "notFound")
}
