//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/internal/testserver"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times (100 on
// every Linux architecture Go supports).
const clockTicks = 100

// procCPU is a process's user + system CPU time from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("cpu of %d: %w", pid, err)
	}
	// The command name may hold spaces: the fields start after its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("cpu of %d: short stat %q", pid, s)
	}
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("cpu of %d: bad stat %q", pid, s)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// selfCPU is this process's user + system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestCPUPerMessage measures the CPU time of 1 KiB sync sends over TCP and
// over QUIC through one `mq dev` on loopback, per message, split into the
// client (this process, getrusage) and the broker (mq dev's
// /proc/<pid>/stat), alternating TCP and QUIC for QUIVER_CPU_ROUNDS rounds
// (default 3) of QUIVER_CPU_SENDS sends (default 20,000) per shape: one
// sender, and 32 senders at once. It is a measurement, not a check: it
// runs only when QUIVER_CPU_SENDS is set, and prints a table for
// docs/lab/BENCHMARKS.md. QUIC_GO_DISABLE_GRO=true, if set, reaches both
// processes.
func TestCPUPerMessage(t *testing.T) {
	sends, _ := strconv.Atoi(os.Getenv("QUIVER_CPU_SENDS"))
	if sends <= 0 {
		t.Skip("set QUIVER_CPU_SENDS (and QUIVER_CPU_ROUNDS) to measure")
	}
	rounds, _ := strconv.Atoi(os.Getenv("QUIVER_CPU_ROUNDS"))
	if rounds <= 0 {
		rounds = 3
	}
	var env []string
	if v := os.Getenv("QUIC_GO_DISABLE_GRO"); v != "" {
		env = append(env, "QUIC_GO_DISABLE_GRO="+v)
	}
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"log.level=warn", "transports=tcp,quic"}, Env: env})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	topic := uniq("CPUBench")
	body := make([]byte, 1024)
	producers := map[string]*producer.Producer{}
	for _, tr := range []string{"tcp", "quic"} {
		c, err := client.New(client.WithNameServers(tr+"://"+srv.Namesrv), transports.WithDialer(transports.WithInsecureQUIC()))
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		p, err := producer.New(c, uniq("CPU_"+tr))
		require.NoError(t, err)
		t.Cleanup(func() { p.Shutdown(context.Background()) })
		for range 2000 { // warm up: route, connection, path MTU, the broker's caches
			_, err := p.SendSync(ctx, client.NewMessage(topic, body))
			require.NoError(t, err)
		}
		producers[tr] = p
	}
	type cell struct{ client, broker, wall []time.Duration }
	cells := map[string]*cell{}
	pid := srv.PID()
	for round := range rounds {
		order := []string{"tcp", "quic"}
		if round%2 == 1 {
			order = []string{"quic", "tcp"}
		}
		for _, senders := range []int{1, 32} {
			for _, tr := range order {
				p := producers[tr]
				b0, err := procCPU(pid)
				require.NoError(t, err)
				c0, w0 := selfCPU(), time.Now()
				var wg sync.WaitGroup
				per := sends / senders
				for range senders {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range per {
							if _, err := p.SendSync(ctx, client.NewMessage(topic, body)); err != nil {
								t.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				wall, c1 := time.Since(w0), selfCPU()
				b1, err := procCPU(pid)
				require.NoError(t, err)
				n := time.Duration(per * senders)
				key := fmt.Sprintf("%s sync%d", tr, senders)
				if cells[key] == nil {
					cells[key] = &cell{}
				}
				cl := cells[key]
				cl.client = append(cl.client, (c1-c0)/n)
				cl.broker = append(cl.broker, (b1-b0)/n)
				cl.wall = append(cl.wall, wall)
				t.Logf("round %d %s: client %v broker %v per message, %.0f msg/s", round+1, key, (c1-c0)/n, (b1-b0)/n, float64(n)/wall.Seconds())
			}
		}
	}
	var la [3]float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscan(string(b), &la[0], &la[1], &la[2]) //nolint:errcheck // informational
	}
	fmt.Printf("CPU per 1 KiB sync send, %d rounds of %d sends, load average %.2f %.2f %.2f at the end\n", rounds, sends, la[0], la[1], la[2])
	fmt.Println("| shape | transport | client µs/msg (runs) | broker µs/msg (runs) | total µs/msg (median) | msg/s (median) |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, senders := range []int{1, 32} {
		for _, tr := range []string{"tcp", "quic"} {
			cl := cells[fmt.Sprintf("%s sync%d", tr, senders)]
			var tot, rate []float64
			for i := range cl.client {
				tot = append(tot, us(cl.client[i]+cl.broker[i]))
				rate = append(rate, float64(sends/senders*senders)/cl.wall[i].Seconds())
			}
			fmt.Printf("| sync%d | %s | %s | %s | %.1f | %.0f |\n", senders, tr, usList(cl.client), usList(cl.broker), median(tot), median(rate))
		}
	}
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

func usList(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		s = append(s, fmt.Sprintf("%.1f", us(d)))
	}
	return strings.Join(s, " / ")
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
