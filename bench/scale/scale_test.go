// Package scale is the scale harness of issue 30: one broker with many
// topics (creation time per topic, RSS, restart time, route lookup p99)
// and one name server with many simulated brokers registering and
// heart-beating (CPU, registration latency, route lookup p99). Both run
// the real `mq` binary as a separate process, so RSS and CPU are the
// server's own.
//
// In -short mode (make test) the sizes are small and nothing is timed
// against a bound: the run shows the harness works. The full sizes run
// with
//
//	go test -count=1 -timeout 60m -v -run TestScale ./bench/scale
//
// (or make soak); QUIVER_SCALE_TOPICS=10000,50000,100000 and
// QUIVER_SCALE_BROKERS=200,1000 choose the sizes. The results are in
// docs/lab/BENCHMARKS.md.
package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

func sizes(t *testing.T, env string, short, full []int) []int {
	if s := os.Getenv(env); s != "" {
		var out []int
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			require.NoError(t, err, env)
			out = append(out, n)
		}
		return out
	}
	if testing.Short() {
		return short
	}
	return full
}

func client(t *testing.T) *remoting.Client {
	c := remoting.NewClient(func(ctx context.Context, addr string) (transport.Conn, error) {
		return tcp.Dial(ctx, addr, tcp.NewConfig(), 0)
	}, nil, nil, remoting.PeerOptions{})
	t.Cleanup(func() { c.Close() })
	return c
}

func invoke(t *testing.T, c *remoting.Client, addr string, code int32, ext map[string]string, body []byte) (*remoting.Command, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := c.Invoke(ctx, addr, remoting.NewRequest(code, ext, body))
	took := time.Since(start)
	require.NoError(t, err)
	return resp, took
}

func pct(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func routeLookups(t *testing.T, c *remoting.Client, ns string, topics []string, n int) time.Duration {
	var lat []time.Duration
	for range n {
		topic := topics[rand.IntN(len(topics))]
		resp, took := invoke(t, c, ns, remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
		require.Equal(t, remoting.Success, resp.Code, "route %s: %s", topic, resp.Remark)
		lat = append(lat, took)
	}
	return pct(lat, 0.99)
}

// TestScaleBroker creates topics on one `mq dev` up to each size.
func TestScaleBroker(t *testing.T) {
	steps := sizes(t, "QUIVER_SCALE_TOPICS", []int{300, 600}, []int{10000, 50000, 100000})
	p := testserver.StartDev(t, testserver.Options{Sets: []string{"log.level=warn"}})
	c := client(t)
	var names []string
	var lat []time.Duration
	t.Logf("| topics | create p50 | create p99 | route lookup p99 | RSS MiB |")
	t.Logf("|---|---|---|---|---|")
	for _, step := range steps {
		lat = lat[:0]
		for i := len(names); i < step; i++ {
			name := fmt.Sprintf("Scale%06d", i)
			resp, took := invoke(t, c, p.Broker, remoting.UpdateAndCreateTopic, map[string]string{
				"topic": name, "defaultTopic": protocol.AutoCreateTopic, "readQueueNums": "4", "writeQueueNums": "4",
				"perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
			}, nil)
			require.Equal(t, remoting.Success, resp.Code, resp.Remark)
			names = append(names, name)
			lat = append(lat, took)
		}
		last := names[len(names)-1]
		waitRouted(t, c, p.Namesrv, last)
		tail := lat[max(0, len(lat)-1000):]
		rss, err := p.RSS()
		require.NoError(t, err)
		t.Logf("| %d | %v | %v | %v | %.1f |", step, pct(tail, 0.5), pct(tail, 0.99),
			routeLookups(t, c, p.Namesrv, names, 2000), float64(rss)/(1<<20))
	}
	start := time.Now()
	p.Restart() // SIGTERM, then start until the name server routes TBW102
	waitRouted(t, c, p.Namesrv, names[len(names)-1])
	t.Logf("restart with %d topics: %v (stop, start, every topic routed again)", len(names), time.Since(start))
	c.CloseAddr(p.Namesrv)
	c.CloseAddr(p.Broker)
}

func waitRouted(t *testing.T, c *remoting.Client, ns, topic string) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, _ := invoke(t, c, ns, remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
		if resp.Code == remoting.Success {
			return
		}
		require.True(t, time.Now().Before(deadline), "topic %s never routed: %s", topic, resp.Remark)
		time.Sleep(10 * time.Millisecond)
	}
}

// cpuTime is the process's user+system CPU time (Linux /proc).
func cpuTime(t *testing.T, pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100) // USER_HZ
}

// TestScaleNamesrv registers simulated brokers with one `mq namesrv` and
// drives a heartbeat round (every broker registering once, as each does
// every 30 s by default) both as Java 4.9 brokers send it (the whole
// topic table) and as Quiver's do (a QUERY_DATA_VERSION digest).
func TestScaleNamesrv(t *testing.T) {
	steps := sizes(t, "QUIVER_SCALE_BROKERS", []int{50}, []int{200, 1000})
	const topicsPerBroker = 20
	const interval = 30 * time.Second
	for _, n := range steps {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			dir := t.TempDir()
			addr := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
			cmd := exec.Command(testserver.Binary(t), "namesrv", "--set", "namesrv.listen="+addr, "--set", "log.level=warn",
				"--set", "namesrv.kv_config_path="+filepath.Join(dir, "kv.json"))
			cmd.Dir = dir
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			c := client(t)
			deadline := time.Now().Add(30 * time.Second)
			for {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := c.Invoke(ctx, addr, remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil))
				cancel()
				if err == nil {
					break
				}
				require.True(t, time.Now().Before(deadline), "name server not up: %v", err)
				c.CloseAddr(addr)
				time.Sleep(50 * time.Millisecond)
			}

			type sim struct {
				ext  map[string]string
				body []byte
				dv   []byte
			}
			var sims []sim
			var topics []string
			for i := range n {
				tcs := map[string]*protocol.TopicConfig{}
				for j := range topicsPerBroker {
					name := fmt.Sprintf("T%05d", (i*7+j)%(n*topicsPerBroker/4+1))
					tcs[name] = &protocol.TopicConfig{TopicName: name, ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6}
					topics = append(topics, name)
				}
				dv := protocol.DataVersion{Timestamp: 1, Counter: int64(i + 1)}
				body, err := json.Marshal(protocol.RegisterBrokerBody{
					TopicConfigSerializeWrapper: protocol.TopicConfigWrapper{DataVersion: dv, TopicConfigTable: tcs},
					FilterServerList:            []string{}})
				require.NoError(t, err)
				dvb, _ := json.Marshal(dv)
				sims = append(sims, sim{ext: map[string]string{
					"brokerName": fmt.Sprintf("broker-%04d", i), "brokerAddr": fmt.Sprintf("127.0.0.2:%d", 10000+i),
					"clusterName": "ScaleCluster", "haServerAddr": fmt.Sprintf("127.0.0.2:%d", 10000+i),
					"brokerId": "0", "compressed": "false",
				}, body: body, dv: dvb})
			}
			var reg []time.Duration
			for _, s := range sims {
				resp, took := invoke(t, c, addr, remoting.RegisterBroker, s.ext, s.body)
				require.Equal(t, remoting.Success, resp.Code, resp.Remark)
				reg = append(reg, took)
			}
			round := func(digest bool) time.Duration {
				before := cpuTime(t, cmd.Process.Pid)
				for _, s := range sims {
					if digest {
						resp, _ := invoke(t, c, addr, remoting.QueryDataVersion, s.ext, s.dv)
						require.Equal(t, "false", resp.Ext("changed"))
					} else {
						resp, _ := invoke(t, c, addr, remoting.RegisterBroker, s.ext, s.body)
						require.Equal(t, remoting.Success, resp.Code)
					}
				}
				return cpuTime(t, cmd.Process.Pid) - before
			}
			var full, dig []time.Duration
			for range 3 {
				full = append(full, round(false))
				dig = append(dig, round(true))
			}
			share := func(d []time.Duration) string {
				m := pct(d, 0.5)
				return fmt.Sprintf("%v (%.2f %% of a core at one round per %v)", m, 100*m.Seconds()/interval.Seconds(), interval)
			}
			t.Logf("| %d brokers | register p50 %v p99 %v | heartbeat round CPU, whole tables: %s | digests: %s | route lookup p99 %v |",
				n, pct(reg, 0.5), pct(reg, 0.99), share(full), share(dig), routeLookups(t, c, addr, topics, 2000))
		})
	}
}
