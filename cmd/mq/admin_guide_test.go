package main

import (
	"bufio"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/internal/testserver"
)

const adminGuide = "../../docs/guide/admin.md"

// mqadmin49 are the commands of Apache RocketMQ 4.9's mqadmin
// (MQAdminStartup.initCommand, with the later 4.9.x additions).
var mqadmin49 = []string{
	"updateTopic", "deleteTopic", "updateSubGroup", "deleteSubGroup", "updateBrokerConfig", "updateTopicPerm",
	"topicRoute", "topicStatus", "topicClusterList", "brokerStatus", "queryMsgById", "queryMsgByKey",
	"queryMsgByUniqueKey", "queryMsgByOffset", "QueryMsgTraceById", "printMsg", "printMsgByQueue", "sendMsgStatus",
	"brokerConsumeStats", "producerConnection", "consumerConnection", "consumerProgress", "consumerStatus",
	"cloneGroupOffset", "clusterList", "topicList", "updateKvConfig", "deleteKvConfig", "wipeWritePerm", "addWritePerm",
	"resetOffsetByTime", "resetOffsetByOffset", "updateOrderConf", "cleanExpiredCQ", "cleanUnusedTopic", "startMonitoring",
	"statsAll", "allocateMQ", "checkMsgSendRT", "clusterRT", "getNamesrvConfig", "updateNamesrvConfig", "getBrokerConfig",
	"getConsumerConfig", "queryCq", "sendMessage", "consumeMessage", "updateAclConfig", "deleteAclConfig",
	"clusterAclConfigVersion", "updateGlobalWhiteAddr", "getAccessConfigSubCommand",
}

var backquoted = regexp.MustCompile("`([^`]+)`")

// TestAdminGuideTable checks docs/guide/admin.md's mqadmin table: a row
// for every mqadmin 4.9 command, every command it names exists in mq
// admin's tree, every mqadmin-named alias of the tree is in it, and a row
// without a command says why.
func TestAdminGuideTable(t *testing.T) {
	doc, err := os.ReadFile(adminGuide)
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(doc), "## mqadmin's commands")
	require.True(t, ok, "the guide has a section \"## mqadmin's commands\"")

	leaves := adminLeaves(t)
	names := map[string]bool{} // paths and cobra aliases
	var aliases []string       // the mqadmin-named ones
	for p, c := range leaves {
		names[p] = true
		prefix := strings.TrimSuffix(p, c.Name())
		for _, a := range c.Aliases {
			names[prefix+a] = true
		}
		if c.GroupID == "mqadmin" {
			aliases = append(aliases, p)
			aliases = append(aliases, c.Aliases...)
		}
	}
	rows := map[string]bool{}
	listed := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		require.Len(t, cells, 5, "row %q: three cells", line)
		cells = cells[1:4]
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		m := backquoted.FindStringSubmatch(cells[0])
		require.NotNil(t, m, "row %q", line)
		assert.False(t, rows[m[1]], "%s has two rows", m[1])
		rows[m[1]] = true
		ours := backquoted.FindAllStringSubmatch(cells[1], -1)
		if len(ours) == 0 {
			assert.Equal(t, "—", cells[1], "row %s: commands in backquotes, or — and a reason", m[1])
			assert.True(t, strings.HasPrefix(cells[2], "Absent: "), "row %s names no command: its note says why (Absent: ...)", m[1])
			continue
		}
		for _, o := range ours {
			assert.True(t, names[o[1]], "row %s: %q is no command of mq admin", m[1], o[1])
			listed[o[1]] = true
		}
	}
	for _, n := range mqadmin49 {
		assert.True(t, rows[n], "mqadmin %s has no row in %s", n, adminGuide)
	}
	assert.Len(t, rows, len(mqadmin49), "rows for commands mqadmin 4.9 does not have")
	sort.Strings(aliases)
	for _, a := range aliases {
		assert.True(t, listed[a], "mq admin %s (an mqadmin name) is missing from the guide's table", a)
	}
}

// guideBlocks returns the lines of the guide's ```sh test blocks.
func guideBlocks(t *testing.T) [][]string {
	t.Helper()
	f, err := os.Open(adminGuide)
	require.NoError(t, err)
	defer f.Close()
	var blocks [][]string
	var cur []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case !in && strings.TrimSpace(l) == "```sh test":
			in, cur = true, nil
		case in && strings.TrimSpace(l) == "```":
			in = false
			blocks = append(blocks, cur)
		case in && strings.TrimSpace(l) != "" && !strings.HasPrefix(strings.TrimSpace(l), "#"):
			cur = append(cur, l)
		}
	}
	require.NoError(t, sc.Err())
	require.False(t, in, "unterminated block")
	return blocks
}

var wantExit = regexp.MustCompile(`\s+#\s*exit\s+(\d+)\s*$`)

// TestAdminGuide runs the guide's ```sh test blocks against a fresh mq
// dev, the name server named by QUIVER_NAMESRV as the guide says: each
// line must end with its `# exit N` (0 when not given). A line that must
// succeed is retried while the name server has not yet learnt of a
// topic just created (the broker's registration follows the create).
func TestAdminGuide(t *testing.T) {
	blocks := guideBlocks(t)
	require.NotEmpty(t, blocks)
	dev := testserver.StartDev(t, testserver.Options{Sets: []string{"console.listen="}})
	t.Setenv("QUIVER_NAMESRV", dev.Namesrv)
	run := func(args []string) (string, error) {
		cmd := newRootCmd()
		var out strings.Builder
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		err := cmd.Execute()
		return out.String(), err
	}
	for _, b := range blocks {
		for _, line := range b {
			want := 0
			if m := wantExit.FindStringSubmatch(line); m != nil {
				want, _ = strconv.Atoi(m[1])
				line = line[:len(line)-len(m[0])]
			}
			f := strings.Fields(line)
			require.Equal(t, "mq", f[0], "guide line %q", line)
			var out string
			var err error
			if want == 0 {
				require.Eventually(t, func() bool {
					out, err = run(f[1:])
					return err == nil || !strings.Contains(err.Error(), "does not exist")
				}, 10*time.Second, 20*time.Millisecond)
			} else {
				out, err = run(f[1:])
			}
			assert.Equal(t, want, exitCodeOf(err), "%s\n%s%v", line, out, err)
			if want == 0 {
				assert.NotEmpty(t, out, "%s prints something", line)
			}
		}
	}
}
