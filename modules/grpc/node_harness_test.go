package grpc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

// nodeDev is a real `mq dev` with its gRPC endpoint on a free port, for
// the official Node.js client, and a 4.x remoting client to set it up and
// to check what the Node client did.
type nodeDev struct {
	endpoints string
	dev       *testserver.Proc
	rc        *remoting.Client
}

// startNodeDev starts `mq dev` (gRPC on, log.level=warn) with sets added.
func startNodeDev(t *testing.T, sets ...string) *nodeDev {
	t.Helper()
	endpoints := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	p := testserver.StartDev(t, testserver.Options{Sets: append([]string{"grpc.listen=" + endpoints, "log.level=warn"}, sets...)})
	rc := remoting.NewClient(func(ctx context.Context, addr string) (transport.Conn, error) {
		return tcp.Dial(ctx, addr, tcp.NewConfig(), 0)
	}, nil, nil, remoting.PeerOptions{})
	t.Cleanup(func() { _ = rc.Close() })
	return &nodeDev{endpoints: endpoints, dev: p, rc: rc}
}

// invoke sends one 4.x request to the broker.
func (e *nodeDev) invoke(t *testing.T, code int32, ext map[string]string, body []byte) *remoting.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.rc.Invoke(ctx, e.dev.Broker, remoting.NewRequest(code, ext, body))
	require.NoError(t, err)
	return resp
}

// createTopic creates topic with queues read and write queues.
func (e *nodeDev) createTopic(t *testing.T, topic string, queues int) {
	t.Helper()
	n := strconv.Itoa(queues)
	resp := e.invoke(t, remoting.UpdateAndCreateTopic, map[string]string{"topic": topic, "defaultTopic": protocol.AutoCreateTopic,
		"readQueueNums": n, "writeQueueNums": n, "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
}

// runNodeScript runs testdata/<script> with args under node (the client
// from dir), bounded by timeout, and decodes its JSON stdout into out.
func runNodeScript(t *testing.T, dir, script string, timeout time.Duration, out any, args ...string) {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("testdata", script))
	require.NoError(t, err)
	runNodeFile(t, dir, path, timeout, out, args...)
}

// runInlineNodeScript is runNodeScript for a script held in the test.
func runInlineNodeScript(t *testing.T, dir, src string, timeout time.Duration, out any, args ...string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "script.js")
	require.NoError(t, os.WriteFile(path, []byte(src), 0o600))
	runNodeFile(t, dir, path, timeout, out, args...)
}

// runNodeFile runs the node script at path with the client in dir and
// decodes its standard output, JSON, into out.
func runNodeFile(t *testing.T, dir, path string, timeout time.Duration, out any, args ...string) {
	t.Helper()
	script := filepath.Base(path)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{path}, args...)...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"), "HOME="+t.TempDir())
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	require.NoError(t, err, "node %s %v: %s", script, args, stderr.String())
	require.NoError(t, json.Unmarshal(raw, out), "node %s %v output: %s", script, args, raw)
}
