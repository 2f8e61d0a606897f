package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/modules/retry"
)

// mqRunIn is mqRun with stdin and separate stdout/stderr.
func mqRunIn(t *testing.T, ns string, in io.Reader, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	if in != nil {
		cmd.SetIn(in)
	}
	cmd.SetArgs(append([]string{"admin", "--namesrv", ns, "--timeout", "5s"}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = cmd.ExecuteContext(ctx)
	return out.String(), errb.String(), err
}

// mqFail runs a command that must fail with exit code want; it returns
// the error text and checks nothing reached stdout.
func mqFail(t *testing.T, ns string, want int, args ...string) string {
	t.Helper()
	out, _, err := mqRunIn(t, ns, nil, args...)
	require.Error(t, err, "mq admin %s\n%s", strings.Join(args, " "), out)
	assert.Equal(t, want, exitCodeOf(err), "exit code of mq admin %s: %v", strings.Join(args, " "), err)
	assert.Empty(t, out, "a failing command prints nothing on stdout (mq admin %s)", strings.Join(args, " "))
	return err.Error()
}

func startAdminDev(t *testing.T) *testserver.Proc {
	return testserver.StartDev(t, testserver.Options{})
}

// topicQueues reads a topic's per-broker config through topic create's
// sibling, the broker's own GET_ALL_TOPIC_CONFIG (via `updateTopic`'s
// reader).
func topicQueues(t *testing.T, ns, topic string) (read, write, perm int) {
	t.Helper()
	a := &adm{admin: newAdmin(ns, 5*time.Second), opts: &adminOpts{output: "json"}, w: io.Discard}
	defer a.Close()
	ctx := context.Background()
	ms, err := a.masters(ctx)
	require.NoError(t, err)
	cur, err := a.topicConfigs(ctx, ms, topic)
	require.NoError(t, err)
	require.Len(t, cur, 1)
	for _, tc := range cur {
		return int(tc.ReadQueueNums), int(tc.WriteQueueNums), int(tc.Perm)
	}
	return
}

func TestAdminSemantics(t *testing.T) {
	dev := startAdminDev(t)
	ns := dev.Namesrv

	t.Run("update changes only the flags given", func(t *testing.T) {
		mqOK(t, ns, "topic", "create", "--topic", "Orders", "--read-queues", "4", "--write-queues", "4")
		var rows []topicRow
		mqJSON(t, ns, &rows, "topic", "update", "--topic", "Orders", "--write-queues", "2")
		require.Len(t, rows, 1)
		assert.Equal(t, 4, rows[0].ReadQueueNums, "read queues kept")
		assert.Equal(t, 2, rows[0].WriteQueueNums)
		assert.False(t, rows[0].Created)
		r, w, p := topicQueues(t, ns, "Orders")
		assert.Equal(t, [3]int{4, 2, 6}, [3]int{r, w, p})
		mqOK(t, ns, "topic", "update", "--topic", "Orders", "--perm", "4")
		r, w, p = topicQueues(t, ns, "Orders")
		assert.Equal(t, [3]int{4, 2, 4}, [3]int{r, w, p})
	})

	t.Run("create refuses an existing topic", func(t *testing.T) {
		msg := mqFail(t, ns, 1, "topic", "create", "--topic", "Orders", "--read-queues", "1", "--write-queues", "1")
		assert.Contains(t, msg, "already exists")
		r, w, _ := topicQueues(t, ns, "Orders")
		assert.Equal(t, [2]int{4, 2}, [2]int{r, w}, "nothing shrunk")
		assert.Contains(t, mqFail(t, ns, 1, "topic", "update", "--topic", "NoSuchTopic", "--perm", "6"), "does not exist")
	})

	t.Run("unknown group fails", func(t *testing.T) {
		assert.Contains(t, mqFail(t, ns, 1, "group", "status", "--group", "TotallyUnknown"), "TotallyUnknown does not exist")
		assert.Contains(t, mqFail(t, ns, 1, "offset", "reset", "--group", "NoSuchGroup", "--topic", "Orders", "--timestamp", "-1h", "--yes"), "NoSuchGroup does not exist")
		var gl []struct{ Group string }
		mqJSON(t, ns, &gl, "group", "list", "--system")
		for _, g := range gl {
			assert.NotEqual(t, "NoSuchGroup", g.Group, "no phantom group")
		}
		assert.Contains(t, mqFail(t, ns, 1, "consumerProgress", "-g", "NoSuchGroup"), "does not exist")
		assert.Contains(t, mqFail(t, ns, 1, "dlq", "list", "--group", "NoSuchGroup"), "does not exist")
	})

	t.Run("deletes report not found", func(t *testing.T) {
		assert.Contains(t, mqFail(t, ns, 1, "topic", "delete", "--topic", "NoSuchTopic", "--yes"), "not found")
		assert.Contains(t, mqFail(t, ns, 1, "group", "delete", "--group", "NoSuchGroup", "--yes"), "not found")
		assert.Contains(t, mqFail(t, ns, 1, "kv", "delete", "--namespace", "NS", "--key", "nokey"), "not found")
	})

	t.Run("destructive commands need --yes; --confirm asks", func(t *testing.T) {
		mqOK(t, ns, "group", "create", "--group", "ConfirmGroup")
		// No --yes: a usage error naming it, nothing deleted, nothing
		// asked even with something on stdin.
		out, prompt, err := mqRunIn(t, ns, strings.NewReader("y\n"), "group", "delete", "--group", "ConfirmGroup")
		require.Error(t, err)
		assert.Equal(t, 2, exitCodeOf(err))
		assert.Contains(t, err.Error(), "--yes")
		assert.Empty(t, out)
		assert.Empty(t, prompt, "nothing asks without --confirm")
		// --confirm without a terminal: a usage error.
		_, _, err = mqRunIn(t, ns, nil, "group", "delete", "--group", "ConfirmGroup", "--confirm")
		assert.Equal(t, 2, exitCodeOf(err))
		assert.Contains(t, err.Error(), "terminal")
		// --confirm: a "no" answer keeps it, a "y" deletes it.
		_, prompt, err = mqRunIn(t, ns, strings.NewReader("n\n"), "group", "delete", "--group", "ConfirmGroup", "--confirm")
		require.Error(t, err)
		assert.Contains(t, prompt, "delete consumer group ConfirmGroup? [y/N]")
		mqOK(t, ns, "group", "status", "--group", "ConfirmGroup")
		_, _, err = mqRunIn(t, ns, strings.NewReader("y\n"), "group", "delete", "--group", "ConfirmGroup", "--confirm")
		require.NoError(t, err)
		assert.Contains(t, mqFail(t, ns, 1, "group", "status", "--group", "ConfirmGroup"), "does not exist")
		assert.Equal(t, 2, exitCodeOf(errOf(mqRunIn(t, ns, nil, "topic", "delete", "--topic", "Orders"))))
		r, _, _ := topicQueues(t, ns, "Orders")
		assert.Equal(t, 4, r, "topic kept")
	})

	t.Run("usage errors exit 2", func(t *testing.T) {
		for _, args := range [][]string{
			{"topic", "create"},                           // required flag
			{"topic", "create", "--topic", "T", "--nope"}, // unknown flag
			{"topic", "list", "extra"},                    // argument
			{"topic", "list", "--output", "yaml"},         // bad value
			{"dlq", "resend", "--group", "G"},             // neither --msg-id nor --all
			{"offset", "reset", "--group", "G", "--topic", "Orders", "--timestamp", "yesterday", "--yes"},
			{"updateTopic", "-t", "T", "-o", "maybe"}, // boolArg
		} {
			assert.Equal(t, 2, exitCodeOf(errOf(mqRunIn(t, ns, nil, args...))), "%v", args)
		}
	})

	t.Run("connection errors name the address and the flag", func(t *testing.T) {
		msg := mqFail(t, "127.0.0.1:1", 1, "topic", "list")
		assert.Contains(t, msg, "127.0.0.1:1")
		assert.Contains(t, msg, "--namesrv")
		assert.Contains(t, msg, "QUIVER_NAMESRV")
	})

	t.Run("dead letters are resent once unless --again", func(t *testing.T) {
		const topic, group = "DLQTopic", "DLQGroup"
		mqOK(t, ns, "topic", "create", "--topic", topic, "--read-queues", "1", "--write-queues", "1")
		mqOK(t, ns, "group", "create", "--group", group)
		var sent map[string]any
		mqJSON(t, ns, &sent, "message", "send", "--topic", topic, "--body", "dead")
		killToDLQ(t, dev.Broker, group, sent["offsetMsgId"].(string))
		msgID := sent["msgId"].(string)
		var dl []deadLetter
		require.Eventually(t, func() bool {
			out, _, err := mqRunIn(t, ns, nil, "dlq", "list", "--group", group, "--output", "json")
			return err == nil && json.Unmarshal([]byte(out), &dl) == nil && len(dl) == 1
		}, 10*time.Second, 20*time.Millisecond)
		assert.Equal(t, msgID, dl[0].MsgID)

		var rep resendReport
		mqJSON(t, ns, &rep, "dlq", "resend", "--group", group, "--msg-id", msgID)
		require.Len(t, rep.Resent, 1)
		// The copy in the retry topic carries the mark. The retry topic
		// was created by the resend; its route reaches the name server
		// with the broker's next registration.
		var copies []messageView
		require.Eventually(t, func() bool {
			out, _, err := mqRunIn(t, ns, nil, "message", "consume", "--topic", "%RETRY%"+group, "--output", "json")
			return err == nil && json.Unmarshal([]byte(out), &copies) == nil
		}, 10*time.Second, 50*time.Millisecond, "the retry topic is routed")
		require.Len(t, copies, 1)
		assert.Equal(t, dl[0].OffsetMsgID, copies[0].Properties[retry.PropertyResentFromDLQ])

		msg := mqFail(t, ns, 1, "dlq", "resend", "--group", group, "--msg-id", msgID)
		assert.Contains(t, msg, "--again")
		var all resendReport
		mqJSON(t, ns, &all, "dlq", "resend", "--group", group, "--all", "--yes")
		assert.Empty(t, all.Resent)
		assert.Len(t, all.Skipped, 1)
		mqJSON(t, ns, &rep, "dlq", "resend", "--group", group, "--msg-id", msgID, "--again")
		assert.Len(t, rep.Resent, 1)
		assert.Equal(t, 2, exitCodeOf(errOf(mqRunIn(t, ns, nil, "dlq", "resend", "--group", group, "--all"))), "--all needs --yes")
		// Table output: no table before an error.
		out := mqOK(t, ns, "dlq", "resend", "--group", group, "--all", "--yes", "--again")
		assert.Contains(t, out, "1 dead letter(s) resent")
	})
}

func errOf(_, _ string, err error) error { return err }

// killToDLQ sends the stored message back as a consumer that gives up
// (CONSUMER_SEND_MSG_BACK, delayLevel -1): it lands in %DLQ%<group>.
func killToDLQ(t *testing.T, broker, group, offsetMsgID string) {
	t.Helper()
	_, off, err := message.ParseOffsetMsgID(offsetMsgID)
	require.NoError(t, err)
	c := benchClient()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, broker, remoting.NewRequest(remoting.ConsumerSendMsgBack, map[string]string{
		"group": group, "offset": strconv.FormatInt(off, 10), "delayLevel": "-1", "originMsgId": offsetMsgID, "maxReconsumeTimes": "1"}, nil))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
}

// TestAdminRunbook runs an mqadmin runbook through the aliases, with
// mqadmin's short flags: create a topic, change its permission, send,
// consume, look at the group's progress, rewind it, take the broker out
// of writing and delete the topic.
func TestAdminRunbook(t *testing.T) {
	dev := startAdminDev(t)
	ns := dev.Namesrv
	run := func(args ...string) string {
		t.Helper()
		return mqOK(t, ns, append([]string{"-n", ns}, args...)...)
	}
	const topic, group = "RunbookTopic", "RunbookGroup"
	rows := parseTable(t, run("updateTopic", "-t", topic, "-c", "DefaultCluster", "-r", "8", "-w", "8"))
	require.Len(t, rows, 1)
	assert.Equal(t, "created", rows[0]["ACTION"])
	rows = parseTable(t, run("updateTopic", "-t", topic, "-c", "DefaultCluster", "-p", "6", "-o", "false"))
	assert.Equal(t, "updated", rows[0]["ACTION"])
	assert.Equal(t, "8", rows[0]["READ QUEUES"])
	run("updateSubGroup", "-g", group, "-c", "DefaultCluster", "-r", "3")
	require.Eventually(t, func() bool {
		out, err := mqRun(t, ns, "topicRoute", "-t", topic)
		return err == nil && strings.Contains(out, dev.Broker)
	}, 10*time.Second, 20*time.Millisecond)
	for i := 0; i < 3; i++ {
		run("sendMessage", "-t", topic, "-p", fmt.Sprintf("runbook-%d", i), "-k", "rk", "-c", "TagA", "-b", "broker-a", "-i", "0")
	}
	ms := parseTable(t, run("consumeMessage", "-t", topic, "-b", "broker-a", "-i", "0", "-o", "0", "-c", "10"))
	require.Len(t, ms, 3)
	assert.Equal(t, `"runbook-0"`, ms[0]["BODY"])
	fakeConsumer(t, dev.Broker, group, topic, 3)
	// mqadmin's columns: #Topic #Broker Name #QID #Broker Offset
	// #Consumer Offset #Diff #Inflight #LastTime.
	prog := run("consumerProgress", "-g", group)
	assert.Regexp(t, `(?m)^`+topic+`\s+broker-a\s+0\s+3\s+3\s+0\s+0\s+`, prog)
	assert.Contains(t, prog, "Consume Diff Total: 0")
	out := run("resetOffsetByTime", "-g", group, "-t", topic, "-s", time.Now().Add(-time.Hour).Format("2006-01-02#15:04:05:000"), "--yes")
	assert.Contains(t, out, "start reset consumer offset by specified, group["+group+"], topic["+topic+"], force[true]")
	assert.Regexp(t, `(?m)^broker-a\s+0\s+0\s*$`, out)
	var st groupStatus
	mqJSON(t, ns, &st, "group", "status", "--group", group)
	assert.EqualValues(t, 3, st.Lag)
	var wiped []map[string]any
	mqJSON(t, ns, &wiped, "wipeWritePerm", "-b", "broker-a")
	require.Len(t, wiped, 1)
	assert.Greater(t, wiped[0]["topics"], 0.0)
	var route routeView
	mqJSON(t, ns, &route, "topicRoute", "-t", topic)
	require.Len(t, route.QueueDatas, 1)
	assert.EqualValues(t, 4, route.QueueDatas[0].Perm, "read only after wipeWritePerm")
	run("addWritePerm", "-b", "broker-a")
	rows = parseTable(t, run("deleteTopic", "-t", topic, "-c", "DefaultCluster", "--yes"))
	assert.Equal(t, "true", rows[0]["DELETED"])
	assert.Contains(t, mqFail(t, ns, 1, "topicStatus", "-t", topic), "does not exist")
}
