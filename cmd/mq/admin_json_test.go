package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/internal/officialtrace"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/auth/acl"
)

// adminLeaves lists every runnable command under mq admin (Quiver's
// names and mqadmin's aliases) by its path below admin, help and
// completion left out.
func adminLeaves(t *testing.T) map[string]*cobra.Command {
	t.Helper()
	var admin *cobra.Command
	for _, c := range newRootCmd().Commands() {
		if c.Name() == "admin" {
			admin = c
		}
	}
	require.NotNil(t, admin)
	out := map[string]*cobra.Command{}
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, s := range c.Commands() {
			if s.Name() == "help" || s.Name() == "completion" {
				continue
			}
			p := append(append([]string{}, path...), s.Name())
			if s.Runnable() && !s.HasSubCommands() {
				out[strings.Join(p, " ")] = s
			}
			walk(s, p)
		}
	}
	walk(admin, nil)
	return out
}

// jsonStep runs one command of the tree walk.
type jsonStep struct {
	cmd  string   // path below mq admin
	args []string // its arguments
	acl  bool     // against the server with ACL on, signed as its admin
	// before runs first (makes what the command deletes).
	before [][]string
	// between restores the state the table run changed before the JSON
	// run (a create is undone, a delete redone).
	between [][]string
	// vary are columns whose values legitimately differ between the two
	// runs (clocks, counters, new ids).
	vary []string
	// perKey: the table has a row per key of each JSON element, so row
	// and element counts differ.
	perKey bool
	// java: the text is mqadmin's printf output (clusterList, topicList,
	// printMsg, ...), not an aligned table; only the JSON's form and a
	// non-empty text are checked (TestAdminMqadminRunbook checks the text).
	java bool
}

// TestAdminJSONEveryCommand walks the whole cobra tree of mq admin and
// runs every command and alias twice against live servers, as a table and
// with --output json: the JSON is one value (an object or a list, never
// null or prose), and every cell of the table is found in it; a list has
// as many elements as the table rows. A command missing from the table
// below fails the test, so a new command cannot skip the check.
func TestAdminJSONEveryCommand(t *testing.T) {
	rlog.SetLogLevel("error")
	const (
		T, S, G, P, D = "WalkTopic", "WalkSend", "WalkGroup", "WalkProducer", "WalkDLQGroup"
	)
	dev := testserver.StartDev(t, testserver.Options{Sets: []string{"console.listen=", "broker.trace_topic_enable=true"}})
	ns := dev.Namesrv

	// State: T with three consumed messages and an online consumer of G
	// (the official Go client, which answers GET_CONSUMER_RUNNING_INFO),
	// a producer of group P on S, a dead letter of D.
	mqOK(t, ns, "topic", "create", "--topic", T, "--read-queues", "2", "--write-queues", "2")
	mqOK(t, ns, "topic", "create", "--topic", S, "--read-queues", "1", "--write-queues", "1")
	mqOK(t, ns, "group", "create", "--group", G)
	mqOK(t, ns, "group", "create", "--group", D)
	require.Eventually(t, func() bool {
		_, e1 := mqRun(t, ns, "topic", "route", "--topic", T)
		_, e2 := mqRun(t, ns, "topic", "route", "--topic", S)
		return e1 == nil && e2 == nil
	}, 10*time.Second, 20*time.Millisecond)
	var sent []map[string]any
	for i := 0; i < 3; i++ {
		var r map[string]any
		mqJSON(t, ns, &r, "message", "send", "--topic", T, "--body", fmt.Sprintf("walk-%d", i), "--keys", fmt.Sprintf("wk-%d", i), "--tags", "TagA", "--queue", "0", "--broker", "broker-a")
		sent = append(sent, r)
	}
	var onS map[string]any
	mqJSON(t, ns, &onS, "message", "send", "--topic", S, "--body", "on-send", "--keys", "sk")
	var dead map[string]any
	mqJSON(t, ns, &dead, "message", "send", "--topic", S, "--body", "dead")
	var held map[string]any // a timer message, for message recall
	mqJSON(t, ns, &held, "message", "send", "--topic", S, "--body", "held", "--property", fmt.Sprintf("TIMER_DELIVER_MS=%d", time.Now().Add(time.Hour).UnixMilli()))
	killToDLQ(t, dev.Broker, D, dead["offsetMsgId"].(string))

	p, err := rocketmq.NewProducer(producer.WithNameServer([]string{ns}), producer.WithGroupName(P),
		producer.WithInstanceName(fmt.Sprintf("walkp-%d", time.Now().UnixNano())), producer.WithRetry(2),
		producer.WithTrace(officialtrace.Config(ns)))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Shutdown() })
	var traced string // the msgId of a send with a trace (message trace)
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := p.SendSync(ctx, primitive.NewMessage(S, []byte("from-go")))
		if err == nil && res.Status == primitive.SendOK {
			traced = res.MsgID
		}
		return err == nil && res.Status == primitive.SendOK
	}, 20*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool { // the Go client's trace dispatcher sends in the background
		_, err := mqRun(t, ns, "message", "trace", traced)
		return err == nil
	}, 20*time.Second, 50*time.Millisecond)
	c, err := rocketmq.NewPushConsumer(consumer.WithNameServer([]string{ns}), consumer.WithGroupName(G),
		consumer.WithInstance(fmt.Sprintf("walkc-%d", time.Now().UnixNano())), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	require.NoError(t, err)
	require.NoError(t, c.Subscribe(T, consumer.MessageSelector{}, func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		return consumer.ConsumeSuccess, nil
	}))
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Shutdown() })
	var last string
	require.Eventually(t, func() bool { // consumed and committed: the group's figures stay put
		out, err := mqRun(t, ns, "group", "status", "--group", G, "--output", "json")
		last = out
		var st groupStatus
		if err != nil || json.Unmarshal([]byte(out), &st) != nil || st.Lag != 0 || len(st.Clients) != 1 {
			return false
		}
		for _, q := range st.Queues {
			if q.Topic == T && q.QueueID == 0 && q.ConsumerOffset == 3 {
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "group status: %s", &last)

	// The ACL server, for the account and white-list commands.
	dir := t.TempDir()
	aclFile := filepath.Join(dir, "plain_acl.yml")
	require.NoError(t, os.WriteFile(aclFile, []byte("globalWhiteRemoteAddresses:\n  - 10.9.*.*\naccounts:\n  - accessKey: walkAdmin\n    secretKey: walkAdminSecret\n    admin: true\n  - accessKey: walkApp\n    secretKey: walkAppSecret\n    whiteRemoteAddress: 10.8.0.1\n    defaultTopicPerm: PUB|SUB\n"), 0o644))
	aclDev := testserver.StartDev(t, testserver.Options{Sets: []string{"console.listen=",
		"acl.enabled=true", "acl.file=" + aclFile, "acl.access_key=walkAdmin", "acl.secret_key=walkAdminSecret",
		// ACL 2.0 beside 1.0, as during a migration: walkAdmin is its Super user.
		"auth.acl2.enabled=true", "auth.acl2.file=" + filepath.Join(dir, "acl2.json"),
		"auth.acl2.init_username=walkAdmin", "auth.acl2.init_password=walkAdminSecret",
	}, Sign: func(ext map[string]string, body []byte) { acl.Sign(ext, body, "walkAdmin", "walkAdminSecret", "") }})
	signed := []string{"--access-key", "walkAdmin", "--secret-key", "walkAdminSecret"}

	b := dev.Broker
	times := []string{"LAST UPDATED", "LAST CONSUMED", "STORED"}
	steps := []jsonStep{
		{cmd: "cluster list", vary: []string{"IN TOTAL", "OUT TOTAL"}},
		{cmd: "clusterList", args: []string{"-c", "DefaultCluster"}, java: true},
		{cmd: "clusterList", args: []string{"-m"}, java: true},
		{cmd: "topic list"},
		{cmd: "topicList", java: true},
		{cmd: "topicList", args: []string{"-c"}, java: true},
		{cmd: "updateTopicPerm", args: []string{"-t", T, "-p", "6", "-c", "DefaultCluster"}},
		{cmd: "printMsg", args: []string{"-t", T, "-d", "true"}, java: true},
		{cmd: "printMsgByQueue", args: []string{"-t", T, "-a", "broker-a", "-i", "0", "-p", "true", "-f", "true"}, java: true},
		{cmd: "topic route", args: []string{"--topic", T}},
		{cmd: "topicRoute", args: []string{"-t", T}, java: true},
		{cmd: "topicRoute", args: []string{"-t", T, "-l"}, java: true},
		{cmd: "topic status", args: []string{"--topic", T}},
		{cmd: "topicStatus", args: []string{"-t", T}, java: true},
		{cmd: "topic clusters", args: []string{"--topic", T}},
		{cmd: "topicClusterList", args: []string{"-t", T}, java: true},
		{cmd: "topic create", args: []string{"--topic", "WalkNew", "--read-queues", "1", "--write-queues", "1"},
			between: [][]string{{"topic", "delete", "--topic", "WalkNew", "--yes"}}},
		{cmd: "topic update", args: []string{"--topic", T, "--perm", "6"}},
		{cmd: "updateTopic", args: []string{"-t", T, "-c", "DefaultCluster", "-r", "2", "-w", "2"}},
		{cmd: "topic delete", args: []string{"--topic", "WalkNew", "--yes"}, between: [][]string{{"topic", "create", "--topic", "WalkNew"}}},
		{cmd: "deleteTopic", args: []string{"-t", "WalkNew", "-c", "DefaultCluster", "--yes"}, before: [][]string{{"topic", "create", "--topic", "WalkNew"}}, between: [][]string{{"topic", "create", "--topic", "WalkNew"}}},
		{cmd: "updateOrderConf", args: []string{"-t", T, "-m", "put", "-v", "broker-a:2"}},
		{cmd: "kv put", args: []string{"--namespace", "WalkNS", "--key", "k", "--value", "v"}},
		{cmd: "kv get", args: []string{"--namespace", "WalkNS", "--key", "k"}},
		{cmd: "kv list", args: []string{"--namespace", "WalkNS"}},
		{cmd: "kv delete", args: []string{"--namespace", "WalkNS", "--key", "k"}, between: [][]string{{"kv", "put", "--namespace", "WalkNS", "--key", "k", "--value", "v"}}},
		{cmd: "updateKvConfig", args: []string{"-s", "WalkNS", "-k", "k2", "-v", "v2"}},
		{cmd: "deleteKvConfig", args: []string{"-s", "WalkNS", "-k", "k2"}, between: [][]string{{"kv", "put", "--namespace", "WalkNS", "--key", "k2", "--value", "v2"}}},
		{cmd: "namesrv config", perKey: true},
		{cmd: "getNamesrvConfig", perKey: true},
		{cmd: "namesrv set-config", args: []string{"--key", "orderMessageEnable", "--value", "true"}},
		{cmd: "updateNamesrvConfig", args: []string{"-k", "orderMessageEnable", "-v", "true"}},
		{cmd: "broker config", perKey: true},
		{cmd: "getBrokerConfig", args: []string{"-b", b}, java: true},
		{cmd: "broker set-config", args: []string{"--key", "waitTimeMillsInSendQueue", "--value", "750"}},
		{cmd: "updateBrokerConfig", args: []string{"-b", b, "-k", "waitTimeMillsInSendQueue", "-v", "800"}, java: true},
		{cmd: "broker status", perKey: true, vary: []string{"VALUE"}},
		{cmd: "brokerStatus", args: []string{"-b", b}, java: true},
		{cmd: "broker wipe-write-perm", args: []string{"--broker-name", "broker-a"}, between: [][]string{{"broker", "add-write-perm", "--broker-name", "broker-a"}}},
		{cmd: "broker add-write-perm", args: []string{"--broker-name", "broker-a"}, between: [][]string{{"broker", "wipe-write-perm", "--broker-name", "broker-a"}}},
		{cmd: "wipeWritePerm", args: []string{"-b", "broker-a"}, between: [][]string{{"addWritePerm", "-b", "broker-a"}}},
		{cmd: "addWritePerm", args: []string{"-b", "broker-a"}, between: [][]string{{"wipeWritePerm", "-b", "broker-a"}}},
		{cmd: "broker clean-expired-cq"},
		{cmd: "cleanExpiredCQ", args: []string{"-b", b}},
		{cmd: "broker clean-unused-topics"},
		{cmd: "cleanUnusedTopic", args: []string{"-c", "DefaultCluster"}},
		{cmd: "broker consume-stats"},
		{cmd: "brokerConsumeStats", args: []string{"-b", b}},
		{cmd: "group list"},
		{cmd: "group create", args: []string{"--group", "WalkNewGroup", "--retry-max", "4"}, between: [][]string{{"group", "delete", "--group", "WalkNewGroup", "--yes"}}},
		{cmd: "group update", args: []string{"--group", G, "--retry-max", "5"}},
		{cmd: "updateSubGroup", args: []string{"-g", G, "-c", "DefaultCluster", "-r", "5"}},
		{cmd: "group status", args: []string{"--group", G}, vary: times},
		{cmd: "consumerProgress", args: []string{"-g", G}, java: true},
		{cmd: "consumerProgress", java: true},
		{cmd: "group delete", args: []string{"--group", "WalkNewGroup", "--yes"}, between: [][]string{{"group", "create", "--group", "WalkNewGroup"}}},
		{cmd: "deleteSubGroup", args: []string{"-g", "WalkNewGroup", "-c", "DefaultCluster", "--yes"}, before: [][]string{{"group", "create", "--group", "WalkNewGroup"}}, between: [][]string{{"group", "create", "--group", "WalkNewGroup"}}},
		{cmd: "consumer connections", args: []string{"--group", G}},
		{cmd: "consumerConnection", args: []string{"-g", G}, java: true},
		{cmd: "consumer status", args: []string{"--group", G}},
		{cmd: "consumerStatus", args: []string{"-g", G}},
		{cmd: "consumer config", args: []string{"--group", G}, perKey: true},
		{cmd: "getConsumerConfig", args: []string{"-g", G}, perKey: true},
		{cmd: "producer connections", args: []string{"--group", P, "--topic", S}},
		{cmd: "producerConnection", args: []string{"-g", P, "-t", S}},
		{cmd: "offset clone", args: []string{"--src", G, "--dest", "WalkClone", "--topic", T}},
		{cmd: "cloneGroupOffset", args: []string{"-s", G, "-d", "WalkClone", "-t", T, "-o", "false"}},
		{cmd: "offset reset", args: []string{"--group", G, "--topic", T, "--timestamp", "end", "--yes"}},
		{cmd: "resetOffsetByTime", args: []string{"-g", G, "-t", T, "-s", "end", "--yes"}, java: true},
		{cmd: "message send", args: []string{"--topic", S, "--body", "walk", "--keys", "wk"}, vary: []string{"OFFSET", "MSG ID", "OFFSET MSG ID"}},
		{cmd: "sendMessage", args: []string{"-t", S, "-p", "walk", "-k", "wk"}, vary: []string{"OFFSET", "MSG ID", "OFFSET MSG ID"}},
		{cmd: "message trace", args: []string{traced}},
		{cmd: "queryMsgTraceById", args: []string{"-i", traced}, java: true},
		{cmd: "message recall", args: []string{"--topic", S, "--handle", held["recallHandle"].(string)}},
		{cmd: "message get", args: []string{"--id", sent[1]["offsetMsgId"].(string)}},
		{cmd: "queryMsgById", args: []string{"-i", sent[1]["msgId"].(string)}},
		{cmd: "queryMsgByUniqueKey", args: []string{"-i", onS["msgId"].(string), "-t", S}},
		{cmd: "message query", args: []string{"--topic", T, "--key", "wk-2", "--begin", "-1h"}},
		{cmd: "queryMsgByKey", args: []string{"-t", T, "-k", "wk-0"}},
		{cmd: "queryMsgByOffset", args: []string{"-t", T, "-b", "broker-a", "-i", "0", "-o", "1"}},
		{cmd: "message consume", args: []string{"--topic", T}},
		{cmd: "consumeMessage", args: []string{"-t", T, "-c", "2"}},
		{cmd: "dlq list", args: []string{"--group", D}},
		{cmd: "dlq resend", args: []string{"--group", D, "--msg-id", dead["msgId"].(string), "--again"}, vary: []string{"NEW OFFSET MSG ID"}},
		{cmd: "stats all", vary: []string{"IN TPS", "OUT TPS", "IN MSG 1M", "OUT MSG 1M", "IN MSG TODAY", "OUT MSG TODAY"}},
		{cmd: "statsAll", args: []string{"-t", T}, vary: []string{"IN TPS", "OUT TPS", "IN MSG 1M", "OUT MSG 1M", "IN MSG TODAY", "OUT MSG TODAY"}},
		{cmd: "stats send-rt", args: []string{"--topic", S, "--amount", "3", "--size", "16"}, vary: []string{"QUEUE", "RT MS"}},
		{cmd: "checkMsgSendRT", args: []string{"-t", S, "-a", "3", "-s", "16"}, vary: []string{"QUEUE", "RT MS"}},
		{cmd: "sendMsgStatus", args: []string{"-b", "broker-a", "-c", "2", "-s", "16"}, java: true},
		{cmd: "clusterRT", args: []string{"-a", "2", "-s", "16"}, vary: []string{"AVG RT MS"}},
		{cmd: "acl sign", args: []string{"--access-key", "ak", "--secret-key", "sk", "topic=T"}},
		{cmd: "mirror status"}, // no link writes into this cluster: an empty table
		{cmd: "mirror dedup"},  // every master's dedup windows: none open here

		{cmd: "acl whitelist", acl: true},
		{cmd: "acl version", acl: true},
		{cmd: "clusterAclConfigVersion", acl: true},
		{cmd: "acl config", acl: true},
		{cmd: "getAclConfig", acl: true},
		{cmd: "acl account-update", acl: true, args: []string{"--account", "walkNew", "--account-secret", "walkNewSecret"}},
		{cmd: "updateAclConfig", acl: true, args: []string{"-a", "walkNew2", "-s", "walkNewSecret2", "-i", "SUB"}},
		{cmd: "acl account-delete", acl: true, args: []string{"--account", "walkNew"}, between: [][]string{{"acl", "account-update", "--account", "walkNew", "--account-secret", "walkNewSecret"}}},
		{cmd: "deleteAclConfig", acl: true, args: []string{"-a", "walkNew2"}, between: [][]string{{"updateAclConfig", "-a", "walkNew2", "-s", "walkNewSecret2"}}},
		{cmd: "acl global-white-addrs", acl: true, args: []string{"--addrs", "10.9.*.*,10.7.*.*"}},
		{cmd: "updateGlobalWhiteAddr", acl: true, args: []string{"-g", "10.9.*.*"}},

		// ACL 2.0 (admin_acl2.go).
		{cmd: "createUser", acl: true, args: []string{"-u", "walkU", "-p", "walkUSecret1"}, between: [][]string{{"deleteUser", "-u", "walkU"}}},
		{cmd: "updateUser", acl: true, args: []string{"-u", "walkU", "-s", "enable"}},
		{cmd: "getUser", acl: true, args: []string{"-u", "walkU"}},
		{cmd: "listUser", acl: true},
		{cmd: "createAcl", acl: true, args: []string{"-s", "User:walkU", "-r", "Topic:walk*,Group:walkG", "-a", "Pub,Sub", "-i", "127.0.0.1"}},
		{cmd: "updateAcl", acl: true, args: []string{"-s", "User:walkU", "-r", "Topic:walk*", "-a", "Pub"}},
		{cmd: "getAcl", acl: true, args: []string{"-s", "User:walkU"}},
		{cmd: "listAcl", acl: true, args: []string{"-s", "walkU"}},
		{cmd: "copyUser", acl: true, args: []string{"-f", aclDev.Broker, "-t", aclDev.Broker, "-u", "walkU"}},
		{cmd: "copyAcl", acl: true, args: []string{"-f", aclDev.Broker, "-t", aclDev.Broker, "-s", "User:walkU"}},
		{cmd: "deleteAcl", acl: true, args: []string{"-s", "User:walkU", "-r", "Group:walkG"}, between: [][]string{{"createAcl", "-s", "User:walkU", "-r", "Group:walkG", "-a", "Sub"}}},
		{cmd: "migrateAuthFromV1", acl: true, args: []string{"-f", aclFile}, vary: []string{"RESULT"}},
		{cmd: "deleteUser", acl: true, args: []string{"-u", "walkU2"}, before: [][]string{{"createUser", "-u", "walkU2", "-p", "walkU2Secret"}},
			between: [][]string{{"createUser", "-u", "walkU2", "-p", "walkU2Secret"}}},
	}

	leaves := adminLeaves(t)
	covered := map[string]bool{}
	for _, st := range steps {
		require.Contains(t, leaves, st.cmd, "the walk names a command that is not in the tree")
		covered[st.cmd] = true
	}
	var missing []string
	for p := range leaves {
		if !covered[p] {
			missing = append(missing, p)
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "commands without a step in TestAdminJSONEveryCommand: add one (arguments that make them succeed)")

	for _, st := range steps {
		t.Run(st.cmd, func(t *testing.T) {
			server, extra := ns, []string(nil)
			if st.acl {
				server, extra = aclDev.Namesrv, signed
			}
			args := append(append(strings.Fields(st.cmd), st.args...), extra...)
			for _, b := range st.before {
				mqOK(t, server, append(b, extra...)...)
			}
			table := mqOK(t, server, args...)
			for _, b := range st.between {
				mqOK(t, server, append(b, extra...)...)
			}
			js := mqOK(t, server, append(args, "--output", "json")...)
			checkJSONMatchesTable(t, table, js, st)
		})
	}
}

// checkJSONMatchesTable checks that js is one JSON value carrying every
// cell of the table output.
func checkJSONMatchesTable(t *testing.T, table, js string, st jsonStep) {
	t.Helper()
	v := jsonValue(t, js)
	if st.java {
		assert.NotEmpty(t, strings.TrimSpace(table), "mqadmin's text")
		return
	}
	leaves := map[string]bool{}
	jsonLeaves(v, leaves)

	blocks := tableBlocks(table)
	if !assert.NotEmpty(t, blocks, "no table in:\n%s", table) {
		return
	}
	if list, ok := v.([]any); ok && !st.perKey && len(blocks) == 1 {
		assert.Len(t, blocks[0].rows, len(list), "JSON elements vs table rows\ntable:\n%s\njson:\n%s", table, js)
	}
	skip := map[string]bool{"FIELD": true, "ACTION": true} // labels; ACTION words the JSON's created flag
	for _, c := range st.vary {
		skip[c] = true
	}
	for _, b := range blocks {
		for _, r := range b.rows {
			for i, cell := range r {
				if skip[b.head[i]] || cell == "-" {
					continue
				}
				assert.True(t, cellInJSON(cell, leaves), "table cell %q (column %s) not in the JSON\ntable:\n%s\njson:\n%s", cell, b.head[i], table, js)
			}
		}
	}
}

// jsonValue decodes js, which must be one JSON object or list.
func jsonValue(t *testing.T, js string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(js))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v), "JSON output:\n%s", js)
	var extra any
	require.ErrorIs(t, dec.Decode(&extra), io.EOF, "one JSON value only, no prose after it:\n%s", js)
	switch v.(type) {
	case map[string]any, []any:
	default:
		t.Fatalf("JSON output is %T, want an object or a list:\n%s", v, js)
	}
	return v
}

type tableBlock struct {
	head []string
	rows [][]string
}

// tableBlocks reads every aligned table of a command's output: blocks
// separated by blank lines whose first line is an upper-case header;
// lines with another column count (summaries) are left out.
func tableBlocks(out string) []tableBlock {
	var blocks []tableBlock
	for _, chunk := range strings.Split(strings.TrimRight(out, "\n"), "\n\n") {
		lines := strings.Split(strings.Trim(chunk, "\n"), "\n")
		h := strings.TrimSpace(lines[0])
		if h == "" || strings.ToUpper(h) != h {
			continue
		}
		b := tableBlock{head: cols.Split(h, -1)}
		for _, l := range lines[1:] {
			f := cols.Split(strings.TrimSpace(l), -1)
			if len(f) == len(b.head) {
				b.rows = append(b.rows, f)
			}
		}
		blocks = append(blocks, b)
	}
	return blocks
}

// jsonLeaves collects every scalar and every object key of v as text.
func jsonLeaves(v any, into map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			into[k] = true
			jsonLeaves(e, into)
		}
	case []any:
		for _, e := range x {
			jsonLeaves(e, into)
		}
	case string:
		into[x] = true
	case json.Number:
		into[x.String()] = true
	case bool:
		into[strconv.FormatBool(x)] = true
	}
}

// cellInJSON reports whether a table cell shows a JSON value: itself, a
// quoted (maybe shortened) body, a formatted epoch-ms time, a
// comma-joined list, or "X from Y" / "X on Y".
func cellInJSON(cell string, leaves map[string]bool) bool {
	if leaves[cell] {
		return true
	}
	if ts, err := time.Parse("2006-01-02T15:04:05.000Z", cell); err == nil {
		return leaves[strconv.FormatInt(ts.UnixMilli(), 10)]
	}
	if s, err := strconv.Unquote(cell); err == nil {
		if p, cut := strings.CutSuffix(s, "…"); cut {
			for l := range leaves {
				if strings.HasPrefix(l, p) {
					return true
				}
			}
			return false
		}
		return leaves[s]
	}
	for _, sep := range []string{" from ", " on ", ","} {
		if parts := strings.Split(cell, sep); len(parts) > 1 {
			for _, p := range parts {
				if p != "-" && !cellInJSON(p, leaves) {
					return false
				}
			}
			return true
		}
	}
	return false
}
