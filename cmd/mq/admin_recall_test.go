package main

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAdminMessageRecall: `message send` of a timer message prints its
// recall handle (a plain message has none), `message recall` takes it
// back and prints the msgId, again succeeds, and refuses another topic's
// handle and a garbled one with the broker's or the client's reason.
func TestAdminMessageRecall(t *testing.T) {
	srv := startAdminDev(t)
	ns := srv.Namesrv
	mqOK(t, ns, "topic", "create", "--topic", "RecallT", "--read-queues", "1", "--write-queues", "1")
	mqOK(t, ns, "topic", "create", "--topic", "RecallU", "--read-queues", "1", "--write-queues", "1")
	var sent, plain sendResult
	at := strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)
	mqJSON(t, ns, &sent, "message", "send", "--topic", "RecallT", "--body", "later", "--property", "TIMER_DELIVER_MS="+at)
	require.NotEmpty(t, sent.RecallHandle)
	mqJSON(t, ns, &plain, "message", "send", "--topic", "RecallT", "--body", "now")
	assert.Empty(t, plain.RecallHandle)
	rows := parseTable(t, mqOK(t, ns, "message", "send", "--topic", "RecallT", "--body", "table", "--property", "TIMER_DELIVER_MS="+at))
	require.Len(t, rows, 1)
	assert.NotEmpty(t, rows[0]["RECALL HANDLE"])

	var got struct {
		Topic string `json:"topic"`
		MsgID string `json:"msgId"`
	}
	mqJSON(t, ns, &got, "message", "recall", "--topic", "RecallT", "--handle", sent.RecallHandle)
	assert.Equal(t, sent.MsgID, got.MsgID)
	mqJSON(t, ns, &got, "message", "recall", "--topic", "RecallT", "--handle", sent.RecallHandle)
	assert.Equal(t, sent.MsgID, got.MsgID, "recalling again succeeds")

	out, err := mqRun(t, ns, "message", "recall", "--topic", "RecallU", "--handle", sent.RecallHandle)
	require.Error(t, err)
	assert.Contains(t, out+err.Error(), "recall failed, topic not match")
	out, err = mqRun(t, ns, "message", "recall", "--topic", "RecallT", "--handle", "garbled")
	require.Error(t, err)
	assert.Contains(t, out+err.Error(), "recall handle is invalid")
}
