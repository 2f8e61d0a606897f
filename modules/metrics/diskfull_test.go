//go:build linux

package metrics

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/modules/broker"
	"github.com/quivermq/quiver/plugins/filter/tag"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
)

// TestDiskFullReadiness fills a real (tmpfs) disk under a broker's store
// through sends: the refused sends are counted by reason
// (quiver_broker_write_refused_total), the reason gauge is 1, /readyz
// answers 503 naming the full disk while /healthz stays 200; once space
// returns /readyz is 200 again, the gauge 0, and sends are stored.
func TestDiskFullReadiness(t *testing.T) {
	disk := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", disk).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", disk).Run() })
	// Most of the disk goes to a file freed later.
	filler := filepath.Join(disk, "filler")
	require.NoError(t, os.WriteFile(filler, make([]byte, 3<<20), 0o644))

	ctx := context.Background()
	cfg := commitlog.NewConfig()
	cfg.SegmentSize = 1 << 20
	st, err := commitlog.Open(cfg, store.Deps{Settings: store.Settings{
		Dir: filepath.Join(disk, "store"), Flush: store.FlushSync, FlushInterval: time.Hour, MaxMessageSize: 4 << 20,
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	bc := broker.NewConfig()
	bc.Listen = "127.0.0.1:0"
	bc.Advertise = "127.0.0.1:10911"
	bc.ScanInterval = time.Hour
	tagc, err := tag.NewProvider().New(tag.NewProvider().NewConfig())
	require.NoError(t, err)
	b, err := broker.New(bc, broker.Deps{Store: st, Transports: transports(), DataDir: t.TempDir(), Filters: map[string]filter.Compiler{filter.TypeTag: tagc}})
	require.NoError(t, err)
	s, err := New(&Config{Listen: "127.0.0.1:0"}, Deps{Broker: b, StorageDir: filepath.Join(disk, "store")})
	require.NoError(t, err)
	require.NoError(t, b.Start(ctx))
	t.Cleanup(func() { assert.NoError(t, b.Stop(context.Background())) })
	require.NoError(t, s.Start(ctx))
	t.Cleanup(func() {
		assert.NoError(t, s.Stop(context.Background()))
		http.DefaultClient.CloseIdleConnections()
	})
	l := &live{t: t, url: "http://" + s.Addr() + "/metrics", b: b, s: s}
	base := "http://" + s.Addr()

	client := remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
	t.Cleanup(func() { client.Close() })
	body := []byte(strings.Repeat("x", 32<<10))
	send := func() *remoting.Command {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := client.Invoke(ctx, b.Addrs()[0], remoting.NewRequest(remoting.SendMessage, map[string]string{
			"producerGroup": "FullPG", "topic": "FullTopic", "defaultTopic": protocol.AutoCreateTopic,
			"defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
			"bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
			"properties": message.Properties{"TAGS": "A"}.Encode(), "reconsumeTimes": "0", "unitMode": "false",
			"maxReconsumeTimes": "0", "batch": "false",
		}, body))
		require.NoError(t, err)
		return resp
	}

	code, _ := get(t, base+"/readyz")
	require.Equal(t, http.StatusOK, code)
	var resp *remoting.Command
	for range 200 {
		if resp = send(); resp.Code != remoting.Success {
			break
		}
	}
	require.Equal(t, remoting.ServiceNotAvailable, resp.Code, resp.Remark)
	assert.Equal(t, remoting.ServiceNotAvailable, send().Code)

	code, text := get(t, base+"/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, text, store.RefusedDiskFull)
	assert.Contains(t, text, "no space left on device")
	code, _ = get(t, base+"/healthz")
	assert.Equal(t, http.StatusOK, code, "the process is alive")
	fams := l.scrape()
	assert.Equal(t, 2.0, l.must(fams, "quiver_broker_write_refused_total", map[string]string{"reason": store.RefusedDiskFull}))
	assert.Equal(t, 0.0, l.must(fams, "quiver_broker_write_refused_total", map[string]string{"reason": store.RefusedStoreFailed}))
	assert.Equal(t, 1.0, l.must(fams, "quiver_store_writes_refused", map[string]string{"reason": store.RefusedDiskFull}))
	assert.Equal(t, 0.0, l.must(fams, "quiver_store_writes_refused", map[string]string{"reason": store.RefusedStoreFailed}))

	// Space returns: ready again, sends stored, no restart.
	require.NoError(t, os.Remove(filler))
	code, text = get(t, base+"/readyz")
	assert.Equal(t, http.StatusOK, code, text)
	assert.Equal(t, 0.0, l.must(l.scrape(), "quiver_store_writes_refused", map[string]string{"reason": store.RefusedDiskFull}))
	resp = send()
	assert.Equal(t, remoting.Success, resp.Code, resp.Remark)
}
