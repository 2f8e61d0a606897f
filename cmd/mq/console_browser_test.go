package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/websocket"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
)

// cdp is a minimal Chrome DevTools Protocol client for one page.
type cdp struct {
	t  *testing.T
	ws *websocket.Conn
	id int
}

func (c *cdp) call(method string, params map[string]any) json.RawMessage {
	c.t.Helper()
	c.id++
	id := c.id
	require.NoError(c.t, websocket.JSON.Send(c.ws, map[string]any{"id": id, "method": method, "params": params}))
	for {
		var msg struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct{ Message string }
		}
		require.NoError(c.t, c.ws.SetReadDeadline(time.Now().Add(30*time.Second)))
		require.NoError(c.t, websocket.JSON.Receive(c.ws, &msg))
		if msg.ID != id {
			continue // an event
		}
		if msg.Error != nil {
			c.t.Fatalf("%s: %s", method, msg.Error.Message)
		}
		return msg.Result
	}
}

// eval runs expr in the page and returns its value.
func (c *cdp) eval(expr string) any {
	c.t.Helper()
	var res struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
		ExceptionDetails any `json:"exceptionDetails"`
	}
	require.NoError(c.t, json.Unmarshal(c.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}), &res))
	require.Nil(c.t, res.ExceptionDetails, expr)
	return res.Result.Value
}

// waitFor polls until expr is true in the page.
func (c *cdp) waitFor(expr, what string) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if v, ok := c.eval("!!(" + expr + ")").(bool); ok && v {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("browser: %s: %s never true; page text:\n%v", what, expr, c.eval("document.body.innerText"))
}

// screenshot saves the page as docs/images/<name>.png when
// QUIVER_SCREENSHOTS=1 (how the README's images are made).
func (c *cdp) screenshot(name string) {
	if os.Getenv("QUIVER_SCREENSHOTS") != "1" {
		return
	}
	var res struct {
		Data string `json:"data"`
	}
	require.NoError(c.t, json.Unmarshal(c.call("Page.captureScreenshot", map[string]any{"format": "png"}), &res))
	png, err := base64.StdEncoding.DecodeString(res.Data)
	require.NoError(c.t, err)
	require.NoError(c.t, os.WriteFile(filepath.Join("..", "..", "docs", "images", name+".png"), png, 0o644))
}

// startChromium runs headless Chromium and opens a page on it.
func startChromium(t *testing.T) *cdp {
	bin := ""
	for _, b := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"} {
		if _, err := os.Stat(b); err == nil {
			bin = b
			break
		}
	}
	if bin == "" {
		t.Skip("no Chromium installed (apt-get install chromium)")
	}
	// Not t.TempDir: Chromium's helper processes may still write to the
	// profile for a moment after the browser was killed, which fails
	// TempDir's cleanup; this one is removed with retries after the kill
	// (cleanups run last registered first).
	profile, err := os.MkdirTemp("", "quiver-chromium-")
	require.NoError(t, err)
	t.Cleanup(func() { removeAllRetry(t, profile, 10*time.Second) })
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--remote-debugging-port=0", "--remote-allow-origins=*", "--user-data-dir="+profile, "--window-size=1280,900", "about:blank")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`DevTools listening on (ws://\S+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	var browserWS string
	select {
	case browserWS = <-found:
	case <-time.After(30 * time.Second):
		t.Fatal("chromium: no DevTools endpoint")
	}
	u, err := url.Parse(browserWS)
	require.NoError(t, err)
	req, _ := http.NewRequest(http.MethodPut, "http://"+u.Host+"/json/new?about:blank", nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var target struct {
		WS string `json:"webSocketDebuggerUrl"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&target))
	resp.Body.Close()
	ws, err := websocket.Dial(target.WS, "", "http://localhost/")
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	c := &cdp{t: t, ws: ws}
	c.call("Page.enable", nil)
	c.call("Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false})
	return c
}

// removeAllRetry removes dir, trying again while files still appear in it
// (processes that are exiting), for up to d; what is left is only logged.
func removeAllRetry(t *testing.T, dir string, d time.Duration) {
	deadline := time.Now().Add(d)
	for {
		err := os.RemoveAll(dir)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Logf("chromium profile %s not removed: %v", dir, err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestConsoleInBrowser opens the console of a live mq dev with traffic in
// headless Chromium: the topic and the group with its lag, a search by
// key showing the body, and a DLQ resend whose message reaches the retry
// topic.
func TestConsoleInBrowser(t *testing.T) {
	b := startChromium(t)
	consoleAddr := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	dev := testserver.StartDev(t, testserver.Options{Sets: []string{"console.listen=" + consoleAddr}})
	ns := dev.Namesrv
	const topic, group = "OrdersTopic", "BillingGroup"
	mqOK(t, ns, "topic", "create", "--topic", topic, "--read-queues", "2", "--write-queues", "2")
	var first string
	for i := 0; i < 5; i++ {
		var res map[string]any
		mqJSON(t, ns, &res, "message", "send", "--topic", topic, "--body", fmt.Sprintf(`{"order":%d,"amount":%d}`, 1000+i, 10*i), "--keys", fmt.Sprintf("order-%d", 1000+i), "--tags", "created")
		if i == 0 {
			first = res["offsetMsgId"].(string)
		}
	}
	fakeConsumer(t, dev.Broker, group, topic, 2) // 3 behind on queue 0
	_, off, err := message.ParseOffsetMsgID(first)
	require.NoError(t, err)
	c := benchClient()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := c.Invoke(ctx, dev.Broker, remoting.NewRequest(remoting.ConsumerSendMsgBack, map[string]string{
		"group": group, "offset": fmt.Sprint(off), "delayLevel": "-1", "originMsgId": first}, nil))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, r.Code, r.Remark)

	b.call("Page.navigate", map[string]any{"url": "http://" + consoleAddr + "/"})
	b.waitFor(`document.querySelector("#cluster-table td") && document.body.innerText.includes("broker-a")`, "cluster page")
	b.waitFor(`document.getElementById("mode").textContent.startsWith("admin")`, "admin mode")
	b.screenshot("console-cluster")

	b.eval(`document.querySelector('a[data-p="topics"]').click()`)
	b.waitFor(`[...document.querySelectorAll("#topics-table tr")].some(r => r.innerText.includes("`+topic+`") && r.cells[2].innerText === "5")`, "topic with 5 messages")
	b.eval(`document.querySelector('a[data-topic="` + topic + `"]').click()`)
	b.waitFor(`document.querySelectorAll("#topic-queues tr").length === 3`, "topic queues")
	b.screenshot("console-topics")

	b.eval(`document.querySelector('a[data-p="groups"]').click()`)
	b.waitFor(`[...document.querySelectorAll("#groups-table tr")].some(r => r.innerText.includes("`+group+`") && r.cells[1].innerText === "3" && r.cells[2].innerText === "1")`, "group with lag 3 and one client")
	b.eval(`document.querySelector('a[data-group="` + group + `"]').click()`)
	b.waitFor(`document.getElementById("group-title").textContent.includes("lag 3") && document.querySelector("#group-clients td")`, "group detail")
	b.screenshot("console-groups")

	b.eval(`document.querySelector('a[data-p="messages"]').click()`)
	b.eval(`(() => { const f = document.getElementById("search"); f.topic.value = "` + topic + `"; f.key.value = "order-1003"; f.requestSubmit(); })()`)
	b.waitFor(`document.getElementById("messages-table").innerText.includes('{"order":1003,"amount":30}')`, "message body found by key")
	b.waitFor(`document.getElementById("message-detail").textContent.includes("order-1003")`, "message properties")
	b.screenshot("console-messages")

	b.eval(`document.querySelector('a[data-p="dlq"]').click()`)
	b.eval(`(() => { const f = document.getElementById("dlq-form"); f.group.value = "` + group + `"; f.requestSubmit(); })()`)
	b.waitFor(`document.querySelector("#dlq-table button[data-id]")`, "dead letter with a resend button")
	b.screenshot("console-dlq")
	b.eval(`document.querySelector("#dlq-table button[data-id]").click()`)
	b.waitFor(`document.getElementById("dlq-result").textContent.includes("resent 1 message")`, "resend done")

	// The resent message is delivered to the group again, through its
	// retry topic: the console finds it there.
	b.eval(`document.querySelector('a[data-p="messages"]').click()`)
	b.eval(`(() => { const f = document.getElementById("search"); f.id.value = ""; f.key.value = ""; f.topic.value = "%RETRY%` + group + `"; f.requestSubmit(); })()`)
	b.waitFor(`document.getElementById("messages-table").innerText.includes('{"order":1000,"amount":0}')`, "resent message in the retry topic")
	require.True(t, strings.Contains(b.eval(`document.getElementById("mode").textContent`).(string), ns))

	// And a consumer of the group takes it: pull the group's retry queue
	// as the group does.
	pctx, pcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer pcancel()
	pr, err := c.Invoke(pctx, dev.Broker, remoting.NewRequest(remoting.PullMessage, map[string]string{
		"consumerGroup": group, "topic": "%RETRY%" + group, "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
		"sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0", "expressionType": "TAG"}, nil))
	require.NoError(t, err)
	require.Equal(t, remoting.Success, pr.Code, pr.Remark)
	consumed, err := message.DecodeAll(pr.Body)
	require.NoError(t, err)
	var bodies []string
	for _, m := range consumed {
		bodies = append(bodies, string(m.Body))
	}
	require.Contains(t, bodies, `{"order":1000,"amount":0}`, "the group consumes the resent dead letter")
}
