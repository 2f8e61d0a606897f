package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/internal/testserver"
)

// mqadminFlags are the options of Apache RocketMQ's mqadmin commands that
// docs/guide/admin.md maps to an mqadmin-named command of mq admin (the
// sub-commands' buildCommandlineOptions, 5.x, which keeps 4.9's): short
// name, long name. Java's long names with a trailing space (printMsg's
// "charsetName ") cannot be typed; mq admin takes them without it.
var mqadminFlags = map[string][][2]string{
	"updateTopic":         {{"b", "brokerAddr"}, {"c", "clusterName"}, {"a", "attributes"}, {"t", "topic"}, {"r", "readQueueNums"}, {"w", "writeQueueNums"}, {"p", "perm"}, {"o", "order"}, {"u", "unit"}, {"s", "hasUnitSub"}},
	"deleteTopic":         {{"t", "topic"}, {"c", "clusterName"}},
	"updateTopicPerm":     {{"b", "brokerAddr"}, {"c", "clusterName"}, {"t", "topic"}, {"p", "perm"}},
	"topicList":           {{"c", "clusterModel"}},
	"topicRoute":          {{"t", "topic"}, {"l", "list"}},
	"topicStatus":         {{"t", "topic"}, {"c", "cluster"}},
	"topicClusterList":    {{"t", "topic"}},
	"updateOrderConf":     {{"t", "topic"}, {"v", "orderConf"}, {"m", "method"}},
	"updateSubGroup":      {{"b", "brokerAddr"}, {"c", "clusterName"}, {"g", "groupName"}, {"s", "consumeEnable"}, {"m", "consumeFromMinEnable"}, {"d", "consumeBroadcastEnable"}, {"o", "consumeMessageOrderly"}, {"q", "retryQueueNums"}, {"r", "retryMaxTimes"}, {"p", "groupRetryPolicy"}, {"i", "brokerId"}, {"w", "whichBrokerWhenConsumeSlowly"}, {"a", "notifyConsumerIdsChanged"}},
	"deleteSubGroup":      {{"b", "brokerAddr"}, {"c", "clusterName"}, {"g", "groupName"}, {"r", "removeOffset"}},
	"consumerProgress":    {{"g", "groupName"}, {"t", "topicName"}, {"s", "showClientIP"}, {"c", "cluster"}},
	"consumerStatus":      {{"g", "consumerGroup"}, {"i", "clientId"}, {"b", "brokerAddr"}, {"s", "jstack"}},
	"consumerConnection":  {{"g", "consumerGroup"}, {"b", "brokerAddr"}},
	"producerConnection":  {{"g", "producerGroup"}, {"t", "topic"}},
	"getConsumerConfig":   {{"g", "groupName"}},
	"resetOffsetByTime":   {{"g", "group"}, {"t", "topic"}, {"s", "timestamp"}, {"f", "force"}, {"c", "cplus"}, {"b", "broker"}, {"q", "queue"}, {"o", "offset"}},
	"cloneGroupOffset":    {{"s", "srcGroup"}, {"d", "destGroup"}, {"t", "topic"}, {"o", "offline"}},
	"queryMsgById":        {{"t", "topic"}, {"i", "msgId"}, {"g", "consumerGroup"}, {"d", "clientId"}, {"s", "sendMessage"}, {"u", "unitName"}, {"f", "bodyFormat"}, {"c", "cluster"}},
	"queryMsgByKey":       {{"t", "topic"}, {"k", "msgKey"}, {"b", "beginTimestamp"}, {"e", "endTimestamp"}, {"m", "maxNum"}, {"c", "cluster"}},
	"queryMsgByUniqueKey": {{"i", "msgId"}, {"g", "consumerGroup"}, {"d", "clientId"}, {"t", "topic"}, {"a", "showAll"}, {"c", "cluster"}},
	"queryMsgByOffset":    {{"t", "topic"}, {"b", "brokerName"}, {"i", "queueId"}, {"o", "offset"}, {"f", "bodyFormat"}},
	"printMsg":            {{"t", "topic"}, {"c", "charsetName"}, {"s", "subExpression"}, {"b", "beginTimestamp"}, {"e", "endTimestamp"}, {"d", "printBody"}, {"l", "lmqParentTopic"}},
	"printMsgByQueue":     {{"t", "topic"}, {"a", "brokerName"}, {"i", "queueId"}, {"c", "charsetName"}, {"s", "subExpression"}, {"b", "beginTimestamp"}, {"e", "endTimestamp"}, {"p", "printMsg"}, {"d", "printBody"}, {"f", "calculate"}},
	"sendMessage":         {{"t", "topic"}, {"p", "body"}, {"k", "key"}, {"c", "tags"}, {"b", "broker"}, {"i", "qid"}, {"m", "msgTraceEnable"}},
	"consumeMessage":      {{"t", "topic"}, {"b", "brokerName"}, {"i", "queueId"}, {"o", "offset"}, {"g", "consumerGroup"}, {"s", "beginTimestamp"}, {"e", "endTimestamp"}, {"c", "MessageNumber"}},
	"checkMsgSendRT":      {{"t", "topic"}, {"a", "amount"}, {"s", "size"}},
	"sendMsgStatus":       {{"b", "brokerName"}, {"s", "messageSize"}, {"c", "count"}},
	"clusterRT":           {{"a", "amount"}, {"s", "size"}, {"c", "cluster"}, {"p", ""}, {"m", ""}, {"i", "interval"}},
	"clusterList":         {{"m", "moreStats"}, {"i", "interval"}, {"c", "clusterName"}},
	"brokerStatus":        {{"b", "brokerAddr"}, {"c", "clusterName"}},
	"getBrokerConfig":     {{"b", "brokerAddr"}, {"c", "clusterName"}},
	"updateBrokerConfig":  {{"b", "brokerAddr"}, {"c", "clusterName"}, {"a", "updateAllBroker"}, {"k", "key"}, {"v", "value"}},
	"wipeWritePerm":       {{"b", "brokerName"}},
	"addWritePerm":        {{"b", "brokerName"}},
	"cleanExpiredCQ":      {{"b", "brokerAddr"}, {"c", "cluster"}},
	"cleanUnusedTopic":    {{"b", "brokerAddr"}, {"c", "cluster"}},
	"brokerConsumeStats":  {{"b", "brokerAddr"}, {"t", "timeoutMillis"}, {"l", "level"}, {"o", "order"}},
	"statsAll":            {{"a", "activeTopic"}, {"t", "topic"}},
	"getNamesrvConfig":    {},
	"updateNamesrvConfig": {{"k", "key"}, {"v", "value"}},
	"updateKvConfig":      {{"s", "namespace"}, {"k", "key"}, {"v", "value"}},
	"deleteKvConfig":      {{"s", "namespace"}, {"k", "key"}},
}

// TestAdminMqadminFlags checks that each mqadmin-named command takes every
// option of mqadmin's command under its short and long name.
func TestAdminMqadminFlags(t *testing.T) {
	leaves := adminLeaves(t)
	for name, flags := range mqadminFlags {
		c := leaves[name]
		if !assert.NotNil(t, c, "mq admin %s", name) {
			continue
		}
		for _, f := range flags {
			s := c.Flags().ShorthandLookup(f[0])
			if !assert.NotNil(t, s, "mq admin %s -%s (%s)", name, f[0], f[1]) {
				continue
			}
			if f[1] != "" {
				require.NotNil(t, c.Flags().Lookup(f[1]), "mq admin %s --%s", name, f[1])
				assert.Equal(t, s, c.Flags().Lookup(f[1]), "mq admin %s: -%s is --%s", name, f[0], f[1])
			}
		}
	}
}

// javaHeader formats a header as mqadmin's printf does (the format and
// column names copied from the Java command).
func javaHeader(format string, names ...any) string {
	return strings.TrimRight(fmt.Sprintf(format, names...), "\n")
}

// runbookStep is one line of an mqadmin runbook: its arguments, the exit
// code it must end with and a check of its output.
type runbookStep struct {
	args  []string
	exit  int
	check func(t *testing.T, stdout, stderr string)
}

// headerCols checks that the first line of a Quiver table has these
// columns.
func headerCols(cols ...string) func(t *testing.T, stdout, _ string) {
	return func(t *testing.T, stdout, _ string) {
		t.Helper()
		head, _, _ := strings.Cut(stdout, "\n")
		got := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(head), -1)
		assert.Equal(t, cols, got, "header of\n%s", stdout)
	}
}

func firstLine(want string) func(t *testing.T, stdout, _ string) {
	return func(t *testing.T, stdout, _ string) {
		t.Helper()
		head, _, _ := strings.Cut(stdout, "\n")
		assert.Equal(t, want, head, "first line of\n%s", stdout)
	}
}

func contains(subs ...string) func(t *testing.T, stdout, _ string) {
	return func(t *testing.T, stdout, _ string) {
		t.Helper()
		for _, s := range subs {
			assert.Contains(t, stdout, s)
		}
	}
}

func usage(sub string) func(t *testing.T, stdout, stderr string) {
	return func(t *testing.T, stdout, stderr string) {
		t.Helper()
		assert.Empty(t, stdout, "a usage error prints nothing on stdout")
		assert.Contains(t, stderr, sub)
		assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line on stderr: %q", stderr)
	}
}

// TestAdminMqadminRunbook runs an mqadmin runbook of mqadmin's command
// names and flags as a script would: the real mq binary, one process per
// line, stdin closed and no terminal, against a live mq dev. Each line
// must end with its exit code (nothing asks; destructive commands run as
// in mqadmin) and print what mqadmin prints where scripts parse it
// (clusterList, topicList, printMsg, updateBrokerConfig: Java's printf
// formats and headers) or Quiver's table with the columns the guide
// lists. Usage errors and unknown commands exit 2 with one line on
// stderr.
func TestAdminMqadminRunbook(t *testing.T) {
	bin := testserver.Binary(t)
	dev := testserver.StartDev(t, testserver.Options{Sets: []string{"console.listen="}})
	broker := dev.Broker
	const topic, topic2, group, group2 = "RunbookOrders", "RunbookScratch", "RunbookWorkers", "RunbookCopy"
	run := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		r, w, err := os.Pipe()
		require.NoError(t, err)
		require.NoError(t, w.Close()) // stdin closed: EOF at once, not a terminal
		defer r.Close()
		cmd := exec.Command(bin, append([]string{"admin", "-n", dev.Namesrv}, args...)...)
		cmd.Stdin = r
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err = cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out.String(), errb.String(), ee.ExitCode()
		}
		require.NoError(t, err)
		return out.String(), errb.String(), 0
	}
	do := func(st runbookStep) string {
		t.Helper()
		stdout, stderr, code := run(st.args...)
		if assert.Equal(t, st.exit, code, "mq admin %s\nstdout: %s\nstderr: %s", strings.Join(st.args, " "), stdout, stderr) && st.check != nil {
			st.check(t, stdout, stderr)
		}
		return stdout
	}

	clusterHead := javaHeader("%-22s  %-22s  %-4s  %-22s %-16s  %16s  %30s  %-22s  %-11s  %-12s  %-8s  %-10s",
		"#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)", "#OutTPS(LOAD)", "#Timer(Progress)", "#PCWait(ms)", "#Hour", "#SPACE", "#ACTIVATED")
	clusterMoreHead := javaHeader("%-16s  %-32s %14s %14s %14s %14s", "#Cluster Name", "#Broker Name", "#InTotalYest", "#OutTotalYest", "#InTotalToday", "#OutTotalToday")
	topicListHead := javaHeader("%-20s  %-48s  %-48s", "#Cluster Name", "#Topic", "#Consumer Group")

	steps := []runbookStep{
		{args: []string{"clusterList"}, check: func(t *testing.T, out, _ string) {
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			require.Len(t, lines, 2, out)
			assert.Equal(t, clusterHead, lines[0])
			assert.Regexp(t, `^DefaultCluster\s+broker-a\s+0\s+`+regexp.QuoteMeta(broker)+`\s+V4_9_8\s+\d+\.\d{2}\(\d+,\d+ms\)\s+\d+\.\d{2}\(\d+,\d+ms\|\d+,\d+ms\)\s+\d+-\d+\(.*\)\s+\d+\s+\d+\.\d{2}\s+\d\.\d{4}\s+true$`, lines[1])
		}},
		{args: []string{"clusterList", "-m"}, check: func(t *testing.T, out, _ string) {
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			require.Len(t, lines, 2, out)
			assert.Equal(t, clusterMoreHead, lines[0])
			assert.Regexp(t, `^DefaultCluster\s+broker-a\s+\d+\s+\d+\s+\d+\s+\d+$`, lines[1])
		}},
		{args: []string{"CLUSTERLIST", "--moreStats", "-c", "DefaultCluster"}, check: firstLine(clusterMoreHead)},
		{args: []string{"updateTopic", "-t", topic, "-c", "DefaultCluster", "-r", "4", "-w", "4"}, check: headerCols("TOPIC", "BROKER", "READ QUEUES", "WRITE QUEUES", "PERM", "ORDER", "MESSAGE TYPE", "ACTION")},
		{args: []string{"updatetopic", "--topic", topic2, "--clusterName", "DefaultCluster", "--readQueueNums", "2", "--writeQueueNums", "2"}, check: contains(topic2, "created")},
		{args: []string{"updateSubGroup", "-g", group, "-c", "DefaultCluster", "-r", "3", "-s", "true"}, check: contains(group)},
	}
	for _, st := range steps {
		do(st)
	}
	// The name server learns of new topics at the broker's registration.
	require.Eventually(t, func() bool {
		_, _, code := run("topicRoute", "-t", topic2)
		_, _, code2 := run("topicRoute", "-t", topic)
		return code == 0 && code2 == 0
	}, 10*time.Second, 50*time.Millisecond)
	var ids []string
	for i := 0; i < 3; i++ {
		out := do(runbookStep{args: []string{"sendMessage", "-t", topic, "-p", fmt.Sprintf("order-%d", i), "-k", "rb-key", "-c", "TagA", "-b", "broker-a", "-i", "0"},
			check: headerCols("TOPIC", "BROKER", "QUEUE", "OFFSET", "MSG ID", "OFFSET MSG ID")})
		f := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(strings.Split(out, "\n")[1]), -1)
		require.Len(t, f, 6, out)
		ids = append(ids, f[4])
	}
	fakeConsumer(t, broker, group, topic, 2)
	msgLine := regexp.MustCompile(`(?m)^MSGID: \S+ MessageExt \[brokerName=broker-a, queueId=0, .*\] BODY: order-\d$`)

	steps = []runbookStep{
		{args: []string{"topicList"}, check: func(t *testing.T, out, _ string) {
			lines := strings.Split(strings.TrimSpace(out), "\n")
			assert.Contains(t, lines, topic)
			assert.Contains(t, lines, "TBW102", "mqadmin lists system topics too")
			assert.NotContains(t, out, "#", "no header: one topic a line")
		}},
		{args: []string{"topicList", "-c"}, check: func(t *testing.T, out, _ string) {
			assert.Equal(t, topicListHead, strings.Split(out, "\n")[0])
			assert.Regexp(t, `(?m)^DefaultCluster\s+`+topic+`\s+`+group+`\s*$`, out)
			assert.NotContains(t, out, "%RETRY%")
		}},
		{args: []string{"topicRoute", "-t", topic}, check: func(t *testing.T, out, _ string) {
			var rd struct {
				QueueDatas  []map[string]any `json:"queueDatas"`
				BrokerDatas []map[string]any `json:"brokerDatas"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &rd), "mqadmin prints the route as JSON:\n%s", out)
			assert.Len(t, rd.QueueDatas, 1)
			assert.Len(t, rd.BrokerDatas, 1)
		}},
		{args: []string{"topicRoute", "-t", topic, "-l"}, check: func(t *testing.T, out, _ string) {
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			require.Len(t, lines, 4, out)
			assert.Equal(t, javaHeader("%-45s %-32s %-50s %-10s %-11s %-5s", "#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm"), lines[0])
			assert.Regexp(t, `^DefaultCluster\s+broker-a\s+\{0=`+regexp.QuoteMeta(broker)+`\}\s+4\s+4\s+6\s*$`, lines[1])
			assert.Equal(t, strings.Repeat("-", 158), lines[2])
			assert.Regexp(t, `^Total:\s+1\s+4\s+4\s*$`, lines[3])
		}},
		{args: []string{"topicStatus", "-t", topic}, check: func(t *testing.T, out, _ string) {
			assert.Equal(t, javaHeader("%-32s  %-4s  %-20s  %-20s    %s", "#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"), strings.Split(out, "\n")[0])
			assert.Regexp(t, `(?m)^broker-a\s+0\s+0\s+3\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}$`, out)
			assert.Regexp(t, `(?m)^broker-a\s+3\s+0\s+0\s*$`, out)
		}},
		{args: []string{"topicClusterList", "-t", topic}, check: func(t *testing.T, out, _ string) {
			assert.Equal(t, "DefaultCluster\n", out)
		}},
		{args: []string{"updateTopicPerm", "-t", topic, "-p", "4", "-c", "DefaultCluster"}, check: func(t *testing.T, out, _ string) {
			rows := parseTable(t, out)
			require.Len(t, rows, 1)
			assert.Equal(t, "4", rows[0]["PERM"])
			assert.Equal(t, "4", rows[0]["READ QUEUES"], "only the permission changes")
		}},
		{args: []string{"updateTopicPerm", "--topic", topic, "--perm", "6", "--brokerAddr", broker}, check: contains("updated")},
		{args: []string{"printMsg", "-t", topic, "-d", "true"}, check: func(t *testing.T, out, _ string) {
			assert.Contains(t, out, "minOffset=0, maxOffset=3, MessageQueue [topic="+topic+", brokerName=broker-a, queueId=0]")
			assert.Len(t, msgLine.FindAllString(out, -1), 3, out)
			assert.Contains(t, out, "minOffset=0, maxOffset=0, MessageQueue [topic="+topic+", brokerName=broker-a, queueId=1]\n-----", "an empty queue: no pull, as mqadmin")
			assert.Equal(t, 4, strings.Count(out, "--------------------------------------------------------\n"), "a block per queue")
		}},
		{args: []string{"printMsg", "-t", topic, "-s", "TagB", "-b", "0", "-e", fmt.Sprint(time.Now().Add(time.Hour).UnixMilli())}, check: func(t *testing.T, out, _ string) {
			assert.NotContains(t, out, "MSGID:")
			assert.Contains(t, out, "no matched msg. status=NO_MATCHED_MSG")
		}},
		{args: []string{"printMsgByQueue", "-t", topic, "-a", "broker-a", "-i", "0", "-p", "true", "-d", "true", "-f", "true"}, check: func(t *testing.T, out, _ string) {
			assert.Len(t, msgLine.FindAllString(out, -1), 3, out)
			assert.Regexp(t, `(?m)^Tag: TagA\s+Count: 3$`, out)
		}},
		{args: []string{"printMsgByQueue", "-t", topic, "-a", "broker-a", "-i", "0"}, check: func(t *testing.T, out, _ string) {
			assert.Empty(t, out, "without -p true nothing is printed, as mqadmin")
		}},
		{args: []string{"queryMsgByKey", "-t", topic, "-k", "rb-key"}, check: func(t *testing.T, out, _ string) {
			assert.Len(t, parseTable(t, out), 3)
		}},
		{args: []string{"queryMsgById", "-i", ids[0]}, check: contains("order-0")},
		{args: []string{"queryMsgByUniqueKey", "-i", ids[1], "-t", topic}, check: contains("order-1")},
		{args: []string{"queryMsgByOffset", "-t", topic, "-b", "broker-a", "-i", "0", "-o", "2"}, check: contains("order-2")},
		{args: []string{"consumeMessage", "-t", topic, "-b", "broker-a", "-i", "0", "-o", "0", "-c", "10"}, check: func(t *testing.T, out, _ string) {
			assert.Len(t, parseTable(t, out), 3)
		}},
		{args: []string{"consumerProgress", "-g", group}, check: func(t *testing.T, out, _ string) {
			assert.Equal(t, javaHeader("%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s%s", "#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#Inflight", "#LastTime"), strings.Split(out, "\n")[0])
			assert.Regexp(t, `(?m)^`+topic+`\s+broker-a\s+0\s+3\s+2\s+1\s+0\s+`, out)
			assert.Contains(t, out, "\nConsume TPS: ")
			assert.Contains(t, out, "\nConsume Diff Total: 1\n")
		}},
		{args: []string{"consumerProgress", "-g", group, "-s", "true", "-t", topic}, check: firstLine(javaHeader("%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s %-20s%s", "#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Client IP", "#Diff", "#Inflight", "#LastTime"))},
		{args: []string{"consumerProgress"}, check: func(t *testing.T, out, _ string) {
			assert.Equal(t, javaHeader("%-64s  %-6s  %-24s %-5s  %-14s  %-7s  %s", "#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total"), strings.Split(out, "\n")[0])
			assert.Regexp(t, `(?m)^`+group+`\s+1\s+V4_9_8\s+PUSH\s+CLUSTERING\s+\d+\s+1$`, out)
		}},
		{args: []string{"consumerConnection", "-g", group}, check: func(t *testing.T, out, _ string) {
			assert.Equal(t, javaHeader("%-36s %-22s %-10s %s", "#ClientId", "#ClientAddr", "#Language", "#Version"), strings.Split(out, "\n")[0])
			assert.Contains(t, out, "127.0.0.1@admin-test")
			assert.Contains(t, out, "\nBelow is subscription:\n")
			assert.Regexp(t, `(?m)^`+topic+`\s+\*$`, out)
			assert.Contains(t, out, "\nConsumeType: CONSUME_PASSIVELY\nMessageModel: CLUSTERING\nConsumeFromWhere: CONSUME_FROM_FIRST_OFFSET\n")
		}},
		{args: []string{"getConsumerConfig", "-g", group}, check: contains(group)},
		{args: []string{"brokerStatus", "-b", broker}, check: func(t *testing.T, out, _ string) {
			assert.Regexp(t, `(?m)^putTps {26}: \S+ \S+ \S+$`, out)
			assert.Regexp(t, `(?m)^brokerVersionDesc {15}: V4_9_8$`, out)
		}},
		{args: []string{"brokerStatus", "-c", "DefaultCluster"}, check: func(t *testing.T, out, _ string) {
			assert.Regexp(t, `(?m)^`+regexp.QuoteMeta(broker)+` +msgPutTotalTodayNow +: \d+$`, out)
		}},
		{args: []string{"brokerConsumeStats", "-b", broker}, check: contains(group)},
		{args: []string{"getBrokerConfig", "-b", broker}, check: func(t *testing.T, out, _ string) {
			assert.Equal(t, "============"+broker+"============", strings.Split(out, "\n")[0])
			assert.Regexp(t, `(?m)^autoCreateTopicEnable {29}=  true$`, out)
		}},
		{args: []string{"updateBrokerConfig", "-b", broker, "-k", "autoCreateTopicEnable", "-v", "false"}, check: firstLine("update broker config success, " + broker)},
		{args: []string{"updateBrokerConfig", "-c", "DefaultCluster", "-k", "autoCreateTopicEnable", "-v", "true"}, check: firstLine("update broker config success, " + broker)},
		{args: []string{"updateBrokerConfig", "-b", broker, "-k", "fileReservedTime", "-v", "48"}, check: firstLine("update broker config success, " + broker)},
		{args: []string{"updateBrokerConfig", "-b", broker, "-k", "deleteWhen", "-v", "03;15"}, check: firstLine("update broker config success, " + broker)},
		{args: []string{"updateBrokerConfig", "-b", broker, "-k", "brokerPermission", "-v", "6"}, check: firstLine("update broker config success, " + broker)},
		{args: []string{"getBrokerConfig", "-c", "DefaultCluster"}, check: func(t *testing.T, out, _ string) {
			assert.Equal(t, "============Master: "+broker+"============", strings.Split(out, "\n")[0])
			assert.Regexp(t, `(?m)^fileReservedTime +=  48$`, out)
			assert.Regexp(t, `(?m)^deleteWhen +=  03;15$`, out)
		}},
		{args: []string{"resetOffsetByTime", "-g", group, "-t", topic, "-s", "0"}, check: func(t *testing.T, out, _ string) {
			lines := strings.Split(out, "\n")
			assert.Equal(t, "start reset consumer offset by specified, group["+group+"], topic["+topic+"], force[true], timestamp(string)[0], timestamp(long)[0]", lines[0])
			assert.Equal(t, javaHeader("%-40s  %-40s  %-40s", "#brokerName", "#queueId", "#offset"), lines[1])
			assert.Regexp(t, `(?m)^broker-a\s+0\s+0\s*$`, out)
		}},
		{args: []string{"updateSubGroup", "--groupName", group2, "--clusterName", "DefaultCluster"}, check: contains(group2)},
		{args: []string{"cloneGroupOffset", "-s", group, "-d", group2, "-t", topic, "-o", "false"}},
		{args: []string{"statsAll", "-t", topic}, check: contains(topic)},
		{args: []string{"sendMsgStatus", "-b", "broker-a", "-c", "2", "-s", "16"}, check: func(t *testing.T, out, _ string) {
			assert.Len(t, regexp.MustCompile(`(?m)^rt=\d+ms, SendResult=SendResult \[sendStatus=SEND_OK, msgId=\S+, offsetMsgId=\S+, messageQueue=MessageQueue \[topic=broker-a, brokerName=broker-a, queueId=0\], queueOffset=\d+\]$`).FindAllString(out, -1), 2, out)
		}},
		{args: []string{"wipeWritePerm", "-b", "broker-a"}, check: headerCols("NAMESRV", "BROKER", "TOPICS CHANGED")},
		{args: []string{"addWritePerm", "-b", "broker-a"}, check: headerCols("NAMESRV", "BROKER", "TOPICS CHANGED")},
		{args: []string{"cleanExpiredCQ", "-b", broker}, check: headerCols("BROKER", "CLEANED")},
		{args: []string{"cleanUnusedTopic", "-c", "DefaultCluster"}, check: headerCols("BROKER", "CLEANED")},
		{args: []string{"getNamesrvConfig"}, check: contains("orderMessageEnable")},
		{args: []string{"updateKvConfig", "-s", "RunbookNS", "-k", "k1", "-v", "v1"}},
		{args: []string{"deleteKvConfig", "-s", "RunbookNS", "-k", "k1"}},
		// Destructive mqadmin names run without --yes and without asking.
		{args: []string{"deleteSubGroup", "-g", group2, "-c", "DefaultCluster"}, check: contains(group2)},
		{args: []string{"deleteTopic", "-t", topic2, "-c", "DefaultCluster"}, check: contains(topic2)},
		// Scripts can trust the exit codes.
		{args: []string{"deleteTopic", "-t", topic2, "-c", "DefaultCluster"}, exit: 1, check: usage("not found")},
		{args: []string{"topicRoute", "-t", "NoSuchTopic"}, exit: 1, check: usage("NoSuchTopic")},
		{args: []string{"printMsg"}, exit: 2, check: usage(`required flag(s) "topic" not set`)},
		{args: []string{"printMsg", "-x"}, exit: 2, check: usage("unknown shorthand flag: 'x'")},
		{args: []string{"topic", "lst"}, exit: 2, check: usage(`unknown command "lst" for "mq admin topic"; did you mean list?`)},
		{args: []string{"noSuchCommand"}, exit: 2, check: usage(`unknown command "noSuchCommand" for "mq admin"`)},
		{args: []string{"updateTopicPerm", "-t", topic, "-p", "9"}, exit: 2, check: usage("-p 9")},
		{args: []string{"updateBrokerConfig", "-k", "fileReservedTime", "-v", "1"}, exit: 2, check: usage("-b")},
		{args: []string{"updateBrokerConfig", "-b", broker, "-k", "flushDiskType", "-v", "SYNC_FLUSH"}, exit: 1, check: usage("flushDiskType")},
		{args: []string{"resetOffsetByTime", "-g", group, "-t", topic, "-s", "0", "--confirm"}, exit: 2, check: usage("terminal")},
	}
	for _, st := range steps {
		do(st)
	}
	assert.GreaterOrEqual(t, len(steps)+9, 30, "a runbook of at least 30 commands")

	// brokerPermission takes the broker out of producers' routes at once,
	// as Java's updateBrokerConfig does (the name server's route turns
	// read-only), and 6 brings it back.
	permOf := func() string {
		out, _, code := run("topicRoute", "-t", topic)
		if code != 0 {
			return ""
		}
		var rd struct {
			QueueDatas []struct {
				Perm int `json:"perm"`
			} `json:"queueDatas"`
		}
		if json.Unmarshal([]byte(out), &rd) != nil || len(rd.QueueDatas) != 1 {
			return ""
		}
		return fmt.Sprint(rd.QueueDatas[0].Perm)
	}
	for _, perm := range []string{"4", "6"} {
		do(runbookStep{args: []string{"updateBrokerConfig", "-b", broker, "-k", "brokerPermission", "-v", perm}, check: firstLine("update broker config success, " + broker)})
		require.Eventually(t, func() bool { return permOf() == perm }, 10*time.Second, 50*time.Millisecond, "route permission %s after brokerPermission=%s", permOf(), perm)
	}
}
