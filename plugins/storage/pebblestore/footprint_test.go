//go:build footprint

package pebblestore

import (
	"bufio"
	"crypto/rand"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/storetest"
)

// TestFootprint appends 1 KiB messages at 5,000 msg/s for 20 s with the
// default (small-device) configuration and logs the process RSS, the Go
// heap, disk bytes per stored byte and the reopen time. Run it alone:
//
//	go test -tags footprint -run TestFootprint -v ./plugins/storage/pebblestore/
func TestFootprint(t *testing.T) {
	for _, mode := range []store.FlushMode{store.FlushAsync, store.FlushSync} {
		t.Run(string(mode), func(t *testing.T) {
			set := settings(t, mode)
			s := openStore(t, NewConfig(), set)
			t.Logf("idle: rss %s", rss(t))
			const rate, secs, writers = 5000, 20, 8
			start := time.Now()
			var stored int64
			tick := time.NewTicker(time.Second / (rate / 100))
			defer tick.Stop()
			done := make(chan error, writers)
			work := make(chan struct{}, writers)
			for w := 0; w < writers; w++ {
				go func(w int) {
					for range work {
						var batch []store.Message
						for i := 0; i < 100/writers; i++ {
							raw := make([]byte, 1024)
							_, _ = rand.Read(raw) // incompressible and distinct, like most payloads
							body := string(raw)
							batch = append(batch, storetest.Msg("Foot", int32((w+i)%8), body, map[string]string{"TAGS": "t", "UNIQ_KEY": "C0A8000100002A9F00000000000" + string(rune('A'+i%26))}))
						}
						for _, m := range batch {
							if _, err := s.Append(bg, []store.Message{m}); err != nil {
								done <- err
								return
							}
						}
					}
					done <- nil
				}(w)
			}
			peak := ""
			for time.Since(start) < secs*time.Second {
				<-tick.C
				for w := 0; w < writers; w++ {
					work <- struct{}{}
				}
				stored += 100 / writers * writers
				if time.Since(start) > secs*time.Second/2 && peak == "" {
					peak = rss(t)
				}
			}
			close(work)
			for w := 0; w < writers; w++ {
				require.NoError(t, <-done)
			}
			elapsed := time.Since(start)
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			t.Logf("loaded: %d msgs in %s (%.0f msg/s), rss mid-run %s, rss end %s, heap in use %d MiB",
				stored, elapsed.Round(time.Millisecond), float64(stored)/elapsed.Seconds(), peak, rss(t), ms.HeapInuse>>20)
			require.NoError(t, s.Close())
			disk := dirSize(t, set.Dir)
			t.Logf("disk: %d MiB for %d MiB of records (%.2f bytes per stored byte)", disk>>20, stored*1164>>20, float64(disk)/float64(stored*1164))
			t0 := time.Now()
			s = openStore(t, NewConfig(), set)
			t.Logf("reopen with %d messages: %s", stored, time.Since(t0).Round(time.Millisecond))
			require.NoError(t, s.Close())
		})
	}
}

func rss(t *testing.T) string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return "?"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func dirSize(t *testing.T, dir string) int64 {
	var n int64
	require.NoError(t, filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	}))
	return n
}
