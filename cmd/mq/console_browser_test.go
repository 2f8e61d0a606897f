package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
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

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
)

// cdp is a minimal Chrome DevTools Protocol client for one page.
type cdp struct {
	t    *testing.T
	ws   *websocket.Conn
	id   *int   // shared by the copies of sub
	base string // the console, http://host:port
}

func (c *cdp) call(method string, params map[string]any) json.RawMessage {
	c.t.Helper()
	*c.id++
	id := *c.id
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
		"--remote-debugging-port=0", "--remote-allow-origins=*",
		// evil.example is a page of the cross-site test, served on 127.0.0.1.
		"--host-resolver-rules=MAP evil.example 127.0.0.1", "--user-data-dir="+profile, "--window-size=1280,900", "about:blank")
	// Chromium keeps its singleton socket in a directory of TMPDIR,
	// which a killed browser leaves behind: in the profile, it goes too.
	cmd.Env = append(os.Environ(), "TMPDIR="+profile)
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
	c := &cdp{t: t, ws: ws, id: new(int)}
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

// sub is b for subtest t.
func (c *cdp) sub(t *testing.T) *cdp {
	cp := *c
	cp.t = t
	return &cp
}

// open loads path of the console afresh (a reload: deep links).
func (c *cdp) open(path string) {
	c.t.Helper()
	c.call("Page.navigate", map[string]any{"url": c.base + path})
	c.waitFor(`document.readyState === "complete" && document.getElementById("mode") && document.getElementById("mode").textContent !== ""`, "page loaded: "+path)
}

// click clicks the element of a CSS selector.
func (c *cdp) click(sel string) {
	c.t.Helper()
	c.waitFor(fmt.Sprintf(`document.querySelector(%q)`, sel), "element "+sel)
	c.eval(fmt.Sprintf(`document.querySelector(%q).click()`, sel))
}

// submit fills form id's fields and submits it.
func (c *cdp) submit(form string, fields map[string]string) {
	c.t.Helper()
	js, _ := json.Marshal(fields)
	c.eval(fmt.Sprintf(`(() => { const f = document.getElementById(%q); const v = %s;
		for (const k in v) { const e = f.elements[k]; if (e.type === "checkbox") e.checked = v[k] === "true"; else e.value = v[k]; }
		f.requestSubmit(); })()`, form, js))
}

// confirm answers the page's confirmation dialog, typing expect when the
// dialog asks for it.
func (c *cdp) confirm(ok bool, expect string) {
	c.t.Helper()
	c.waitFor(`document.getElementById("confirm").open`, "confirmation dialog")
	if expect != "" {
		c.eval(fmt.Sprintf(`document.getElementById("confirm-input").value = %q`, expect))
	}
	if ok {
		c.click("#confirm-ok")
	} else {
		c.click("#confirm-cancel")
	}
	c.waitFor(`!document.getElementById("confirm").open`, "dialog closed")
}

// text is the page's visible text.
func (c *cdp) text(sel string) string {
	c.t.Helper()
	s, _ := c.eval(fmt.Sprintf(`(document.querySelector(%q) || {}).innerText || ""`, sel)).(string)
	return s
}

// evilSite serves, as http://evil.example:<port>/ (mapped to 127.0.0.1 in
// Chromium), a page that tries to reset the console's offsets: by fetch
// and by a classic form post.
func evilSite(t *testing.T, console string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><body><form id="f" method="POST" action="%[1]s/api/offset/reset">
<input name="group" value="BillingGroup"><input name="topic" value="OrdersTopic"><input name="timestamp" value="-1h"></form>
<script>window.tried = fetch(%[1]q + "/api/offset/reset", {method: "POST", mode: "no-cors", credentials: "include",
  headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "group=BillingGroup&topic=OrdersTopic&timestamp=-1h"}).then(() => "sent", e => "failed " + e);</script></body>`, console)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return fmt.Sprintf("http://evil.example:%d/", ln.Addr().(*net.TCPAddr).Port)
}

// consumerOffset is the group's committed offset of queue 0 of topic.
func consumerOffset(t *testing.T, ns, group, topic string) int64 {
	t.Helper()
	var st groupStatus
	mqJSON(t, ns, &st, "group", "status", "--group", group, "--output", "json")
	for _, q := range st.Queues {
		if q.Topic == topic && q.QueueID == 0 {
			return q.ConsumerOffset
		}
	}
	t.Fatalf("no queue 0 of %s in %+v", topic, st)
	return 0
}

// TestConsoleInBrowser drives every page and action of the console of a
// live mq dev with traffic in headless Chromium, one subtest each, deep
// links loaded afresh; and a cross-site page's attempts to act are
// refused.
func TestConsoleInBrowser(t *testing.T) {
	b := startChromium(t)
	consoleAddr := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	dev := testserver.StartDev(t, testserver.Options{Sets: []string{"console.listen=" + consoleAddr, "broker.trace_topic_enable=true"}})
	ns := dev.Namesrv
	// The page is served by a console of this test sampling every 200 ms
	// (mq dev's samples every 10 s), so that the overview has rates
	// within the test; it is the same console, with admin rights on
	// loopback.
	con := newConsole(ns, true, nil, nil)
	require.NoError(t, con.Start(context.Background(), "127.0.0.1:0", 200*time.Millisecond))
	t.Cleanup(func() { _ = con.Stop(context.Background()) })
	b.base = "http://" + con.Addr()
	const topic, group = "OrdersTopic", "BillingGroup"
	mqOK(t, ns, "topic", "create", "--topic", topic, "--read-queues", "2", "--write-queues", "2")
	for _, tp := range []string{"PageTopicA", "PageTopicB", "PageTopicC"} {
		mqOK(t, ns, "topic", "create", "--topic", tp, "--read-queues", "1", "--write-queues", "1")
	}
	var ids []string
	for i := 0; i < 5; i++ {
		var res map[string]any
		mqJSON(t, ns, &res, "message", "send", "--topic", topic, "--body", fmt.Sprintf(`{"order":%d,"amount":%d}`, 1000+i, 10*i), "--keys", fmt.Sprintf("order-%d", 1000+i), "--tags", "created")
		ids = append(ids, res["offsetMsgId"].(string))
	}
	fakeConsumer(t, dev.Broker, group, topic, 2) // 3 behind on queue 0
	rc := benchClient()
	defer rc.Close()
	for _, id := range ids[:2] { // two dead letters
		_, off, err := message.ParseOffsetMsgID(id)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := rc.Invoke(ctx, dev.Broker, remoting.NewRequest(remoting.ConsumerSendMsgBack, map[string]string{
			"group": group, "offset": fmt.Sprint(off), "delayLevel": "-1", "originMsgId": id}, nil))
		cancel()
		require.NoError(t, err)
		require.Equal(t, remoting.Success, r.Code, r.Remark)
	}
	// A live producer and a live consumer (Quiver's client) for the
	// connection and running-info views.
	live := liveClients(t, ns, "LiveTopic", "LiveProducerGroup", "LiveConsumerGroup")
	// Traced traffic for the overview's rates and the trace page: a
	// message every 100 ms until the test ends.
	send, flush := tracedTraffic(t, ns, "PaymentsTopic", "PaymentsProducer", "PaymentsConsumer")
	tracedID, err := send("payment-0")
	require.NoError(t, err)
	trafficCtx, stopTraffic := context.WithCancel(context.Background())
	trafficDone := make(chan struct{})
	go func() {
		defer close(trafficDone)
		for i := 1; ; i++ {
			select {
			case <-trafficCtx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			_, _ = send(fmt.Sprintf("payment-%d", i)) // an error shows as a lower rate only
		}
	}()
	t.Cleanup(func() { stopTraffic(); <-trafficDone })

	t.Run("cross-site refusal", func(t *testing.T) {
		b := b.sub(t)
		require.EqualValues(t, 2, consumerOffset(t, ns, group, topic))
		b.call("Page.navigate", map[string]any{"url": evilSite(t, b.base)})
		b.waitFor(`window.tried`, "evil page loaded")
		require.Equal(t, "sent", b.eval(`window.tried`), "the fetch reached the console (its answer is opaque)")
		b.eval(`document.getElementById("f").submit()`)
		b.waitFor(`location.href.startsWith("`+b.base+`") && document.body.innerText.includes("cross-origin request refused (Origin") && document.body.innerText.includes("http://evil.example:")`, "form post refused")
		require.EqualValues(t, 2, consumerOffset(t, ns, group, topic), "offsets untouched")
	})
	t.Run("cluster", func(t *testing.T) {
		b := b.sub(t)
		b.open("/cluster")
		b.waitFor(`document.querySelector("#cluster-table td") && document.body.innerText.includes("broker-a")`, "cluster page")
		b.waitFor(`document.getElementById("mode").textContent.startsWith("admin")`, "admin mode")
		b.waitFor(`document.querySelectorAll("#chart-tput text.xtick").length >= 3 && /^\d\d:\d\d(:\d\d)?$/.test(document.querySelector("#chart-tput text.xtick").textContent)`, "time axis")
		b.waitFor(`document.querySelectorAll("#chart-lag text.ytick").length === 5`, "value axis")
		b.screenshot("console-cluster")
	})
	t.Run("groups", func(t *testing.T) {
		b := b.sub(t)
		b.open("/groups")
		b.waitFor(`[...document.querySelectorAll("#groups-table tr")].some(r => r.innerText.includes("`+group+`") && r.cells[1].innerText === "3" && r.cells[2].innerText === "1")`, "group with lag 3 and one client")
		b.waitFor(`document.querySelector("#groups-table tr") && document.querySelector("#groups-table tr").innerText.includes("Consume TPS") && [...document.querySelectorAll("#groups-table tr")].some(r => r.cells[0].innerText === "PaymentsConsumer" && +r.cells[3].innerText > 0)`, "consume TPS column")
		b.click(`#groups-table a[href="/groups/` + group + `"]`)
		b.waitFor(`document.getElementById("group-title").textContent.includes("lag 3") && document.querySelector("#group-clients td")`, "group detail")
		b.screenshot("console-groups")
	})
	t.Run("consumer running info", func(t *testing.T) {
		b := b.sub(t)
		b.open("/groups/" + live.consumerGroup)
		b.waitFor(`document.querySelector("#group-clients button[data-client]")`, "live consumer listed")
		b.click("#group-clients button[data-client]")
		b.waitFor(`document.getElementById("running-info").textContent.includes("LiveTopic")`, "running info")
	})
	t.Run("producers", func(t *testing.T) {
		b := b.sub(t)
		b.open("/producers")
		b.submit("producer-form", map[string]string{"group": live.producerGroup})
		b.waitFor(`location.pathname === "/producers/`+live.producerGroup+`" && document.getElementById("producers-table").innerText.includes("GO")`, "producer connection")
		b.open("/producers?group=" + live.producerGroup)
		b.waitFor(`document.getElementById("producer-form").group.value === "`+live.producerGroup+`" && document.getElementById("producers-table").innerText.includes("GO")`, "?group= honoured")
	})
	t.Run("topic consuming groups", func(t *testing.T) {
		b := b.sub(t)
		b.open("/topics?q=PaymentsTopic")
		b.waitFor(`document.querySelector("#topics-table tr") && document.querySelector("#topics-table tr").innerText.includes("In TPS") && [...document.querySelectorAll("#topics-table tr")].some(r => r.cells[0].innerText === "PaymentsTopic" && +r.cells[3].innerText > 0 && +r.cells[4].innerText > 0)`, "TPS in and out columns")
		b.open("/topics/PaymentsTopic")
		b.waitFor(`[...document.querySelectorAll("#topic-groups tr")].some(r => r.cells[0].innerText === "PaymentsConsumer" && r.cells[3].innerText === "1")`, "the consuming group with its client")
		b.waitFor(`document.querySelectorAll("#chart-topic polyline").length === 2`, "topic chart")
		legendMatches(b, "chart-topic", []string{"PaymentsTopic in", "PaymentsTopic out"})
		b.screenshot("console-topic")
		b.click(`#topic-groups a[href="/groups/PaymentsConsumer"]`)
		b.waitFor(`location.pathname === "/groups/PaymentsConsumer" && document.getElementById("group-configs").innerText.includes("broker-a")`, "to the group")
	})
	t.Run("group manage", func(t *testing.T) {
		b := b.sub(t)
		b.open("/groups")
		b.submit("group-create", map[string]string{"group": "ConsoleGroup", "retryMaxTimes": "5", "consumeBroadcastEnable": "false"})
		b.confirm(false, "")
		require.NotContains(t, mqOK(t, ns, "group", "list"), "ConsoleGroup", "cancelled")
		b.submit("group-create", map[string]string{"group": "ConsoleGroup", "retryMaxTimes": "5", "consumeBroadcastEnable": "false"})
		b.confirm(true, "")
		b.waitFor(`location.pathname === "/groups/ConsoleGroup" && [...document.querySelectorAll("#group-configs tr")].some(r => r.cells[0].innerText === "broker-a" && r.cells[2].innerText === "false" && r.cells[6].innerText === "5")`, "created, config shown")
		b.waitFor(`document.getElementById("group-update").retryMaxTimes.value === "5"`, "update form filled")
		b.submit("group-update", map[string]string{"retryMaxTimes": "7", "consumeEnable": "false"})
		b.confirm(true, "")
		b.waitFor(`document.getElementById("notice").textContent.includes("updated group ConsoleGroup") && [...document.querySelectorAll("#group-configs tr")].some(r => r.cells[1].innerText === "false" && r.cells[6].innerText === "7")`, "updated")
		b.click("#group-delete")
		b.confirm(false, "")
		require.Contains(t, mqOK(t, ns, "group", "list"), "ConsoleGroup", "cancelled")
		b.click("#group-delete")
		b.confirm(true, "ConsoleGroup")
		b.waitFor(`location.pathname === "/groups" && document.getElementById("notice").textContent.includes("deleted group ConsoleGroup")`, "deleted")
		require.NotContains(t, mqOK(t, ns, "group", "list"), "ConsoleGroup")
	})
	t.Run("message trace", func(t *testing.T) {
		b := b.sub(t)
		flush()
		b.open("/trace")
		b.submit("trace-form", map[string]string{"msgId": tracedID})
		b.waitFor(`location.pathname === "/trace/`+tracedID+`" && document.getElementById("trace-pub").innerText.includes("PaymentsProducer")`, "the send")
		for range 50 { // the consume's records come when the dispatcher flushes
			if strings.Contains(b.text("#trace-groups"), "success") {
				break
			}
			flush()
			b.open("/trace/" + tracedID)
			b.waitFor(`document.getElementById("trace-pub").innerText.includes("PaymentsProducer")`, "reloaded")
		}
		b.waitFor(`[...document.querySelectorAll("#trace-groups tr")].some(r => r.cells[0].innerText === "PaymentsConsumer" && r.cells[3].innerText === "success")`, "consumed by PaymentsConsumer")
		b.screenshot("console-trace")
		b.open("/trace/" + tracedID + "?topic=NoSuchTraceTopic")
		b.waitFor(`document.getElementById("trace-note").textContent.includes("traces are off")`, "no trace topic")
	})
	t.Run("message consume status", func(t *testing.T) {
		b := b.sub(t)
		b.open("/messages/" + tracedID)
		b.waitFor(`[...document.querySelectorAll("#message-tracks tr")].some(r => r.cells[0].innerText === "PaymentsConsumer" && r.cells[1].innerText === "CONSUMED")`, "consumed by the group")
		// Resend to group asks first (the API test has a client consume it).
		b.click(`#message-tracks button[data-group="PaymentsConsumer"]`)
		b.confirm(false, "")
		require.Empty(t, b.text("#consume-result"), "cancelled")
		b.click(`#messages-table a[href="/trace/` + tracedID + `"]`)
		b.waitFor(`location.pathname === "/trace/`+tracedID+`" && document.getElementById("trace-pub").innerText.includes("PaymentsProducer")`, "trace link")
	})
	t.Run("topics paged", func(t *testing.T) {
		b := b.sub(t)
		b.open("/topics?q=PageTopic&size=2")
		b.waitFor(`document.querySelectorAll("#topics-table tr").length === 3 && document.getElementById("topics-pager").innerText.includes("page 1 of 2 (3)")`, "first page")
		b.click(`#topics-pager button[data-n="2"]`)
		b.waitFor(`location.search.includes("page=2") && document.getElementById("topics-table").innerText.includes("PageTopicC")`, "second page")
		b.open("/topics")
		b.waitFor(`[...document.querySelectorAll("#topics-table tr")].some(r => r.innerText.includes("`+topic+`") && r.cells[2].innerText === "5")`, "topic with 5 messages")
		b.screenshot("console-topics")
		b.click(`#topics-table a[href="/topics/` + topic + `"]`)
		b.waitFor(`location.pathname === "/topics/`+topic+`" && document.querySelectorAll("#topic-queues tr").length === 3`, "topic page by link")
	})
	t.Run("topic deep link", func(t *testing.T) {
		b := b.sub(t)
		b.open("/topics/" + topic)
		b.waitFor(`document.querySelectorAll("#topic-queues tr").length === 3 && document.getElementById("topic-configs").innerText.includes("`+dev.Broker+`")`, "topic page on reload")
	})
	t.Run("topic create", func(t *testing.T) {
		b := b.sub(t)
		b.open("/topics")
		b.submit("topic-create", map[string]string{"topic": "ConsoleMade", "readQueues": "3", "writeQueues": "3"})
		b.waitFor(`location.pathname === "/topics/ConsoleMade" && document.querySelectorAll("#topic-queues tr").length === 4`, "created with 3 queues")
		b.submit("topic-create", map[string]string{"topic": "ConsoleMade"})
		b.waitFor(`document.getElementById("error").textContent.includes("exists")`, "a second create refused")
	})
	t.Run("topic update", func(t *testing.T) {
		b := b.sub(t)
		b.open("/topics/ConsoleMade")
		b.waitFor(`document.getElementById("topic-update").writeQueues.value === "3"`, "form filled")
		b.submit("topic-update", map[string]string{"readQueues": "2", "writeQueues": "2", "perm": "4"})
		b.waitFor(`document.getElementById("notice").textContent.includes("updated") && document.getElementById("topic-configs").innerText.includes("\t2\t2\t4")`, "updated config")
	})
	t.Run("send test message", func(t *testing.T) {
		b := b.sub(t)
		b.open("/topics")
		// The topic's data arrives a second late; a send made meanwhile
		// keeps its answer when it does (the page once cleared it then).
		b.eval(`(() => { const f = window.fetch; window.fetch = (u, o) => String(u).endsWith("/api/topics/` + topic + `") ?
			new Promise(r => setTimeout(r, 1000)).then(() => f(u, o)) : f(u, o); })()`)
		b.click(`#topics-table a[href="/topics/` + topic + `"]`)
		b.submit("send-form", map[string]string{"tags": "probe", "keys": "console-sent", "body": "hello from the console", "properties": "origin=console\ntrace = 7"})
		b.waitFor(`document.getElementById("send-result").textContent.includes("offsetMsgId")`, "sent")
		b.waitFor(`document.querySelectorAll("#topic-queues tr").length === 3`, "the topic's late data")
		require.Contains(t, b.text("#send-result"), "offsetMsgId", "the send's answer outlives the page's late data")
		var ms []messageView
		mqJSON(t, ns, &ms, "message", "query", "--topic", topic, "--key", "console-sent", "--output", "json")
		require.Len(t, ms, 1)
		require.Equal(t, "hello from the console", ms[0].Body)
		require.Equal(t, "probe", ms[0].Tags)
		require.Equal(t, "console", ms[0].Properties["origin"])
		require.Equal(t, "7", ms[0].Properties["trace"])
	})
	t.Run("topic delete", func(t *testing.T) {
		b := b.sub(t)
		b.open("/topics/ConsoleMade")
		b.click("#topic-delete")
		b.confirm(false, "")
		require.Contains(t, mqOK(t, ns, "topic", "list"), "ConsoleMade", "cancelled: still there")
		b.click("#topic-delete")
		b.confirm(true, "ConsoleMade")
		b.waitFor(`location.pathname === "/topics" && document.getElementById("notice").textContent.includes("deleted topic ConsoleMade")`, "deleted")
		require.NotContains(t, mqOK(t, ns, "topic", "list"), "ConsoleMade")
	})
	t.Run("messages by key", func(t *testing.T) {
		b := b.sub(t)
		b.open("/messages")
		b.submit("search", map[string]string{"topic": topic, "key": "order-1003"})
		b.waitFor(`document.getElementById("messages-table").innerText.includes('{"order":1003,"amount":30}')`, "message body found by key")
		b.waitFor(`document.getElementById("message-detail").textContent.includes("order-1003")`, "message properties")
		b.screenshot("console-messages")
	})
	t.Run("messages by time range, paged", func(t *testing.T) {
		b := b.sub(t)
		b.open("/messages?topic=" + topic + "&begin=-1h&end=now&size=2")
		b.waitFor(`document.getElementById("messages-pager").innerText.includes("page 1 of 3 (6)")`, "6 messages, 2 a page")
		b.click(`#messages-pager button[data-n="2"]`)
		b.waitFor(`location.search.includes("page=2") && document.querySelector('#messages-pager button[data-n="3"]')`, "second page")
		b.click(`#messages-pager button[data-n="3"]`)
		b.waitFor(`location.search.includes("page=3") && document.querySelectorAll("#messages-table tr").length === 3`, "last page")
		b.open("/messages?topic=" + topic + "&begin=-1h&end=-30m")
		b.waitFor(`document.getElementById("messages-pager").innerText.includes("(0)")`, "none before -30m")
	})
	t.Run("message deep link", func(t *testing.T) {
		b := b.sub(t)
		b.open("/messages/" + ids[4])
		b.waitFor(`document.getElementById("message-detail").textContent.includes("order-1004")`, "message by id on reload")
	})
	t.Run("dlq resend one", func(t *testing.T) {
		b := b.sub(t)
		b.open("/dlq/" + group)
		b.waitFor(`document.querySelectorAll("#dlq-table button[data-id]").length === 2`, "two dead letters with resend buttons")
		b.screenshot("console-dlq")
		b.click("#dlq-table button[data-id]")
		b.waitFor(`document.getElementById("dlq-result").textContent.includes("resent 1 message")`, "resend done")
	})
	t.Run("dlq resend all", func(t *testing.T) {
		b := b.sub(t)
		b.open("/dlq")
		b.submit("dlq-form", map[string]string{"group": group})
		b.waitFor(`location.pathname === "/dlq/`+group+`" && !document.getElementById("dlq-resend-all").hidden`, "resend all offered")
		b.click("#dlq-resend-all")
		b.confirm(true, "")
		// The one resent before is skipped (a second resend needs again).
		b.waitFor(`document.getElementById("dlq-result").textContent.includes("resent 1 message")`, "resend all done")
		b.open("/messages?topic=%25RETRY%25" + group + "&begin=-1h&end=now")
		b.waitFor(`document.getElementById("messages-table").innerText.includes('{"order":1000,"amount":0}') && document.getElementById("messages-table").innerText.includes('{"order":1001,"amount":10}')`, "both resent in the retry topic")
	})
	t.Run("offset reset", func(t *testing.T) {
		b := b.sub(t)
		b.open("/offsets")
		b.submit("reset-form", map[string]string{"group": group, "topic": topic, "timestamp": "-1h"})
		b.confirm(false, "")
		require.EqualValues(t, 2, consumerOffset(t, ns, group, topic), "cancelled")
		b.submit("reset-form", map[string]string{"group": group, "topic": topic, "timestamp": "-1h"})
		b.confirm(true, "")
		b.waitFor(`document.querySelectorAll("#reset-table tr").length === 3`, "reset table")
		require.EqualValues(t, 0, consumerOffset(t, ns, group, topic))
	})
	t.Run("broker config", func(t *testing.T) {
		b := b.sub(t)
		b.open("/config")
		b.waitFor(`document.getElementById("config-table").innerText.includes("brokerName")`, "config table")
		b.submit("config-edit", map[string]string{"key": "waitTimeMillsInSendQueue", "value": "250"})
		b.confirm(true, "")
		b.waitFor(`document.getElementById("notice").textContent.includes("set waitTimeMillsInSendQueue") && [...document.querySelectorAll("#config-table tr")].some(r => r.cells[0].innerText === "waitTimeMillsInSendQueue" && r.cells[1].innerText === "250")`, "config changed")
	})
	t.Run("acl page without ACL 2.0", func(t *testing.T) {
		b := b.sub(t)
		b.open("/acl")
		b.waitFor(`document.getElementById("acl2-note").textContent.includes("ACL 2.0 is off") && document.getElementById("acl2").hidden`, "ACL 2.0 is off, said")
	})
	t.Run("overview", func(t *testing.T) {
		b := b.sub(t)
		b.open("/")
		b.waitFor(`document.getElementById("overview").classList.contains("on") && document.querySelector("header a.on").dataset.p === "overview"`, "overview is the start page")
		b.waitFor(`[...document.querySelectorAll("#overview-brokers tr")].some(r => r.cells[0].innerText === "broker-a" && +r.cells[1].innerText > 0)`, "broker with TPS in")
		b.waitFor(`document.querySelector("#overview-topics-in tr:nth-child(2)") && document.querySelector("#overview-topics-in tr:nth-child(2)").cells[0].innerText === "PaymentsTopic" && +document.querySelector("#overview-topics-in tr:nth-child(2)").cells[1].innerText > 0`, "PaymentsTopic first by TPS in")
		b.waitFor(`document.querySelector("#overview-topics-out tr:nth-child(2)") && document.querySelector("#overview-topics-out tr:nth-child(2)").cells[0].innerText === "PaymentsTopic" && +document.querySelector("#overview-topics-out tr:nth-child(2)").cells[2].innerText > 0`, "PaymentsTopic first by TPS out")
		b.waitFor(`document.getElementById("overview-groups").innerText.includes("`+group+`")`, "groups by lag")
		b.waitFor(`document.querySelectorAll("#chart-brokers polyline").length >= 2 && document.querySelectorAll("#chart-topics polyline").length >= 1`, "trend lines")
		b.waitFor(`document.querySelector("#chart-topics + .legend .key").innerText === "PaymentsTopic in"`, "busiest topic drawn first")
		legendMatches(b, "chart-brokers", []string{"broker-a in", "broker-a out"})
		b.screenshot("console-overview")
	})
	t.Run("chart legends", func(t *testing.T) {
		b := b.sub(t)
		b.open("/cluster")
		b.waitFor(`document.querySelectorAll("#chart-tput polyline").length >= 2`, "throughput lines")
		legendMatches(b, "chart-tput", []string{"broker-a in", "broker-a out"})
		b.waitFor(`document.querySelector("#chart-lag + .legend .key")`, "lag legend")
		legendMatches(b, "chart-lag", nil)
	})
}

// legendMatches checks chart id's legend: one key per line, in order,
// each key's colour that of its line (names too, when given).
func legendMatches(b *cdp, id string, names []string) {
	b.t.Helper()
	v := b.eval(fmt.Sprintf(`(() => {
		const svg = document.getElementById(%q), lg = svg.nextElementSibling;
		const lines = [...svg.querySelectorAll(".line")];
		const keys = [...lg.querySelectorAll(".key")];
		const series = new Set(lines.map(l => l.dataset.i));
		const bad = lines.filter(l => (l.getAttribute("stroke") || l.getAttribute("fill")) !== keys[+l.dataset.i].querySelector("line").getAttribute("stroke"));
		return {keys: keys.map(k => k.innerText), series: series.size, bad: bad.length, colours: new Set(keys.map(k => k.querySelector("line").getAttribute("stroke"))).size};
	})()`, id)).(map[string]any)
	keys := v["keys"].([]any)
	require.NotEmpty(b.t, keys, "legend of %s", id)
	require.LessOrEqual(b.t, v["series"], float64(len(keys)), "every line has a key")
	require.Zero(b.t, v["bad"], "line colours match their keys")
	require.EqualValues(b.t, min(len(keys), 10), v["colours"], "one colour per key")
	if names != nil {
		got := make([]string, len(keys))
		for i, k := range keys {
			got[i] = k.(string)
		}
		require.Equal(b.t, names, got)
	}
}

type liveSet struct{ producerGroup, consumerGroup string }

// liveClients runs a producer (one message sent) and a push consumer of
// Quiver's client on topic until the test ends.
func liveClients(t *testing.T, ns, topic, pgroup, cgroup string) liveSet {
	t.Helper()
	mqOK(t, ns, "topic", "create", "--topic", topic, "--read-queues", "1", "--write-queues", "1")
	// The broker registers the new topic with the name server just after
	// answering: a producer asking before that would fall back to the
	// default route (4 queues) and be refused queue 3.
	require.Eventually(t, func() bool {
		_, err := mqRun(t, ns, "topic", "route", "--topic", topic)
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "the name server routes %s", topic)
	c, err := client.New(client.WithNameServers(ns), transports.WithDialer())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := producer.New(c, pgroup)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	_, err = p.SendSync(ctx, client.NewMessage(topic, []byte("live")))
	require.NoError(t, err)
	pc, err := consumer.NewPush(c, cgroup, func(context.Context, []*client.MessageExt) consumer.Result { return consumer.ConsumeSuccess })
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe(topic, consumer.Tags("*")))
	require.NoError(t, pc.Start(ctx))
	t.Cleanup(func() { pc.Shutdown(context.Background()) })
	return liveSet{producerGroup: pgroup, consumerGroup: cgroup}
}

// TestConsoleACLInBrowser: with console.auth: acl the page asks for a
// login; an admin account sees the ACL page, adds an account and deletes
// it after confirming with its name; logging out asks again.
func TestConsoleACLInBrowser(t *testing.T) {
	b := startChromium(t)
	ns, base := aclDev(t)
	b.base = base
	signed := []string{"--access-key", "adminKey01", "--secret-key", "adminSecret01"}

	t.Run("login", func(t *testing.T) {
		b := b.sub(t)
		b.open("/acl")
		b.waitFor(`document.getElementById("login").classList.contains("on")`, "login form")
		b.submit("login-form", map[string]string{"accessKey": "adminKey01", "secretKey": "wrong-secret"})
		b.waitFor(`document.getElementById("error").textContent.includes("wrong credentials")`, "wrong secret refused")
		b.submit("login-form", map[string]string{"accessKey": "adminKey01", "secretKey": "adminSecret01"})
		b.waitFor(`document.getElementById("mode").textContent.includes("adminKey01") && document.getElementById("acl").classList.contains("on")`, "logged in, on the page asked for")
	})
	t.Run("acl accounts", func(t *testing.T) {
		b := b.sub(t)
		b.open("/acl")
		b.waitFor(`document.getElementById("acl-table").innerText.includes("appKey01") && document.getElementById("acl-table").innerText.includes("PUB|SUB")`, "accounts")
		require.NotContains(t, b.text("#acl"), "appSecret01")
	})
	t.Run("acl account create", func(t *testing.T) {
		b := b.sub(t)
		b.open("/acl")
		b.waitFor(`document.getElementById("acl-table").innerText.includes("appKey01")`, "accounts")
		b.submit("acl-edit", map[string]string{"accessKey": "consoleKey01", "secretKey": "consoleSecret01", "defaultTopicPerm": "SUB", "topicPerms": "OrdersTopic=PUB"})
		b.confirm(true, "")
		b.waitFor(`document.getElementById("acl-table").innerText.includes("consoleKey01") && document.getElementById("acl-table").innerText.includes("OrdersTopic=PUB")`, "account created")
		require.Contains(t, mqOK(t, ns, append([]string{"acl", "config"}, signed...)...), "consoleKey01")
	})
	t.Run("acl account delete", func(t *testing.T) {
		b := b.sub(t)
		b.open("/acl")
		b.click(`#acl-table button[data-ak="consoleKey01"]`)
		b.confirm(true, "consoleKey01")
		b.waitFor(`document.getElementById("notice").textContent.includes("deleted account consoleKey01") && !document.getElementById("acl-table").innerText.includes("consoleKey01")`, "account deleted")
	})
	t.Run("logout", func(t *testing.T) {
		b := b.sub(t)
		b.open("/cluster")
		b.click("#logout")
		b.waitFor(`document.getElementById("login").classList.contains("on")`, "login asked again")
		b.open("/topics")
		b.waitFor(`document.getElementById("login").classList.contains("on") && !document.getElementById("topics").classList.contains("on")`, "no page without a login")
	})
}

// TestConsoleACL2InBrowser: on mq dev with ACL 2.0 on, a Super user logged
// in sees the ACL page's users and policies, creates a user and a policy
// entry through the forms, and deletes both after typing their names.
func TestConsoleACL2InBrowser(t *testing.T) {
	b := startChromium(t)
	ns, base := acl2ConsoleDev(t)
	b.base = base
	root := []string{"--access-key", acl2RootUser, "--secret-key", acl2RootPass}

	b.open("/acl")
	b.waitFor(`document.getElementById("login").classList.contains("on")`, "login form")
	b.submit("login-form", map[string]string{"accessKey": acl2RootUser, "secretKey": acl2RootPass})
	b.waitFor(`document.getElementById("acl").classList.contains("on") && document.getElementById("acl2-users").innerText.includes("Super")`, "users listed")
	require.False(t, b.eval(`document.getElementById("acl2").hidden`).(bool))

	b.submit("acl2-user", map[string]string{"mode": "create", "username": "webapp", "password": "webapp-secret-01", "userType": "Normal"})
	b.confirm(true, "")
	b.waitFor(`document.getElementById("notice").textContent.includes("created user webapp") && document.getElementById("acl2-users").innerText.includes("webapp")`, "user created")
	b.submit("acl2-acl", map[string]string{"mode": "create", "subject": "User:webapp", "resources": "Topic:orders*", "actions": "Pub", "sourceIps": "10.0.0.0/8", "decision": "Allow"})
	b.confirm(true, "")
	b.waitFor(`document.getElementById("acl2-acls").innerText.includes("Topic:orders*") && document.getElementById("acl2-acls").innerText.includes("10.0.0.0/8")`, "policy created")
	var es []aclEntryView
	mqJSON(t, ns, &es, append([]string{"listAcl", "-s", "User:webapp"}, root...)...)
	require.Len(t, es, 1)
	b.screenshot("console-acl2")

	b.click(`#acl2-acls button[data-resource="Topic:orders*"]`)
	b.confirm(true, "Topic:orders*")
	b.waitFor(`document.getElementById("notice").textContent.includes("deleted Topic:orders*") && !document.getElementById("acl2-acls").innerText.includes("Topic:orders*")`, "entry deleted")
	b.click(`#acl2-users button[data-user="webapp"]`)
	b.confirm(false, "")
	require.Contains(t, b.text("#acl2-users"), "webapp", "cancelled: kept")
	b.click(`#acl2-users button[data-user="webapp"]`)
	b.confirm(true, "webapp")
	b.waitFor(`document.getElementById("notice").textContent.includes("deleted user webapp") && !document.getElementById("acl2-users").innerText.includes("webapp")`, "user deleted")
	var users []userView
	mqJSON(t, ns, &users, append([]string{"listUser", "-f", "webapp"}, root...)...)
	require.Empty(t, users)
}
