// Package lossy compares TCP and QUIC between Quiver's client and a real
// `mq dev` on a lossy link: 32 concurrent in-flight sync sends of 1 KiB.
// It runs only when QUIVER_LOSSY_SECONDS is set, inside a network namespace
// whose loopback drops packets at random — see scripts/lossy-bench.sh.
package lossy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/internal/testserver"
)

func TestLossyLink(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("QUIVER_LOSSY_SECONDS"))
	if secs <= 0 {
		t.Skip("set QUIVER_LOSSY_SECONDS (scripts/lossy-bench.sh runs this inside a lossy network namespace)")
	}
	loss := os.Getenv("QUIVER_LOSSY_LOSS")
	// QUIVER_LOSSY_ORDER picks the transports and their order (the script
	// alternates it between rounds); default tcp,quic.
	order := []string{"tcp", "quic"}
	if o := os.Getenv("QUIVER_LOSSY_ORDER"); o != "" {
		order = strings.Split(o, ",")
	}
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"transports=tcp,quic", "log.level=warn"}})
	for _, scheme := range order {
		t.Run(scheme, func(t *testing.T) {
			c, err := client.New(client.WithNameServers(scheme+"://"+srv.Namesrv), transports.WithDialer(transports.WithInsecureQUIC()),
				client.WithRequestTimeout(30*time.Second))
			require.NoError(t, err)
			defer c.Close()
			p, err := producer.New(c, "LOSSY_"+scheme, producer.WithSendTimeout(30*time.Second), producer.WithRetryTimesWhenSendFailed(0))
			require.NoError(t, err)
			defer p.Shutdown(context.Background())
			topic := "Lossy_" + scheme
			body := make([]byte, 1024)
			// Create the topic and warm the connections up.
			for i := 0; i < 20; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := p.SendSync(ctx, client.NewMessage(topic, body))
				cancel()
				if err == nil {
					break
				}
			}
			cli0, srv0, udp0 := selfCPU(), procCPU(srv.PID()), udpOut()
			var mu sync.Mutex
			var lat []time.Duration
			var errs atomic.Int64
			deadline := time.Now().Add(time.Duration(secs) * time.Second)
			var wg sync.WaitGroup
			for g := 0; g < 32; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 1_000_000 && time.Now().Before(deadline); i++ {
						t0 := time.Now()
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						_, err := p.SendSync(ctx, client.NewMessage(topic, body))
						cancel()
						if err != nil {
							errs.Add(1)
							continue
						}
						d := time.Since(t0)
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			cliCPU, srvCPU, udp := selfCPU()-cli0, procCPU(srv.PID())-srv0, udpOut()-udp0
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			q := func(f float64) time.Duration {
				if len(lat) == 0 {
					return 0
				}
				return lat[int(f*float64(len(lat)-1))]
			}
			perMsg := func(d time.Duration) float64 {
				if len(lat) == 0 {
					return 0
				}
				return float64(d.Microseconds()) / float64(len(lat))
			}
			fmt.Printf("LOSSY loss=%s transport=%s msgs_per_sec=%.0f p50=%v p99=%v p999=%v errors=%d cpu_us_per_msg_client=%.1f cpu_us_per_msg_server=%.1f udp_datagrams_per_msg=%.2f\n",
				loss, scheme, float64(len(lat))/float64(secs), q(.5).Round(time.Microsecond), q(.99).Round(time.Microsecond), q(.999).Round(time.Microsecond), errs.Load(),
				perMsg(cliCPU), perMsg(srvCPU), float64(udp)/max(1, float64(len(lat))))
		})
	}
}

// selfCPU is the CPU time (user and system) this process used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the CPU time process pid used so far, from /proc (0 where
// there is none).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command (which may hold spaces) in parentheses:
	// utime and stime are the 12th and 13th.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat times (100 on Linux).
const clockTicks = 100

// udpOut is the namespace's count of UDP datagrams sent (both ends, as
// both run in it), from /proc/net/snmp; 0 where there is none.
func udpOut() int64 {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return 0
	}
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == "OutDatagrams" && i < len(f) {
				v, _ := strconv.ParseInt(f[i], 10, 64)
				return v
			}
		}
	}
	return 0
}
