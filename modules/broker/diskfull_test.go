package broker

import (
	"context"
	"crypto/rand"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/plugins/filter/tag"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/storage/pebblestore"
)

// smallDisk mounts a tmpfs of size bytes (a real full disk), or skips the
// test where mounting is not allowed.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// lineCounter is a slog handler counting records at ERROR and WARN.
type lineCounter struct {
	mu    sync.Mutex
	lines int
	last  string
}

func (c *lineCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *lineCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		c.mu.Lock()
		c.lines++
		c.last = r.Message
		c.mu.Unlock()
	}
	return nil
}
func (c *lineCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *lineCounter) WithGroup(string) slog.Handler      { return c }

func (c *lineCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lines
}

// lastLine is the message of the last record counted; the store's
// background goroutines (Pebble's flushes) may be logging meanwhile.
func (c *lineCounter) lastLine() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// TestDiskFullBothEngines fills a real (tmpfs) disk through the broker on
// each engine and flush mode: once the disk is full every send is answered
// SERVICE_NOT_AVAILABLE with DiskFullRemark (not SYSTEM_ERROR, not
// SYSTEM_BUSY with the cause hidden), quickly, counted, and the store and
// broker log a bounded number of error lines.
func TestDiskFullBothEngines(t *testing.T) {
	type opener func(dir string, mode store.FlushMode, log *slog.Logger) (store.Store, error)
	engines := map[string]opener{
		"commitlog": func(dir string, mode store.FlushMode, log *slog.Logger) (store.Store, error) {
			c := commitlog.NewConfig()
			c.SegmentSize = 1 << 20
			return commitlog.Open(c, store.Deps{Logger: log, Settings: store.Settings{Dir: dir, Flush: mode, FlushInterval: 20 * time.Millisecond, MaxMessageSize: 4 << 20}})
		},
		"pebble": func(dir string, mode store.FlushMode, log *slog.Logger) (store.Store, error) {
			c := pebblestore.NewConfig()
			c.MemTableSize = 1 << 20
			return pebblestore.Open(c, store.Deps{Logger: log, Settings: store.Settings{Dir: dir, Flush: mode, FlushInterval: 20 * time.Millisecond, MaxMessageSize: 4 << 20}})
		},
	}
	for _, name := range []string{"commitlog", "pebble"} {
		for _, mode := range []store.FlushMode{store.FlushSync, store.FlushAsync} {
			t.Run(name+"/"+string(mode), func(t *testing.T) {
				disk := smallDisk(t, "12m")
				logs := &lineCounter{}
				log := slog.New(logs)
				st, err := engines[name](disk, mode, log)
				require.NoError(t, err)
				cfg := NewConfig()
				cfg.Listen = "127.0.0.1:0"
				cfg.Advertise = "127.0.0.1:10911"
				cfg.ScanInterval = time.Hour
				tagc, err := tag.NewProvider().New(tag.NewProvider().NewConfig())
				require.NoError(t, err)
				b, err := New(cfg, Deps{Store: st, Transports: transports(), DataDir: t.TempDir(), Logger: log, Filters: map[string]filter.Compiler{filter.TypeTag: tagc}})
				require.NoError(t, err)
				require.NoError(t, b.Start(context.Background()))
				h := &harness{t: t, b: b, st: st, addr: b.Addrs()[0]}
				h.client = remoting.NewClient(transports().Dial, nil, nil, remoting.PeerOptions{})
				t.Cleanup(func() {
					h.client.Close()
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					_ = b.Stop(ctx)
					_ = st.Close() // may fail: the disk is full
				})

				// Incompressible: Pebble compresses its tables.
				raw := make([]byte, 64<<10)
				_, _ = rand.Read(raw)
				body := string(raw)
				var resp *remoting.Command
				deadline := time.Now().Add(60 * time.Second)
				sent := 0
				// A send whose append was in flight when the disk filled may
				// wait for space instead of being refused (Pebble's log write:
				// pebblestore/diskfull.go) until space returns or the store
				// closes; its client times out, and the next send is refused.
				trySend := func() (*remoting.Command, error) {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					return h.client.Invoke(ctx, h.addr, remoting.NewRequest(remoting.SendMessage, sendExt("Full", 0, message.Properties{}), []byte(body)))
				}
				waited := 0
				for time.Now().Before(deadline) {
					r, err := trySend()
					if err != nil {
						waited++
						require.Less(t, waited, 3, "sends neither answered nor refused: %v", err)
						t.Logf("a send waits for space: %v", err)
						continue
					}
					resp = r
					if resp.Code != remoting.Success {
						break
					}
					sent++
				}
				require.NotNil(t, resp)
				t.Logf("%d messages of 64 KiB stored, then %d %q", sent, resp.Code, resp.Remark)
				require.Equal(t, remoting.ServiceNotAvailable, resp.Code, resp.Remark)
				assert.Equal(t, DiskFullRemark, resp.Remark)
				// Later sends: the same answer, at once (or stored, when the
				// engine got space back: Pebble drops the files of a failed
				// flush), never another code.
				linesBefore := logs.count()
				start := time.Now()
				refused := 0
				for range 50 {
					r := h.send("Full", 0, body, nil)
					if r.Code == remoting.ServiceNotAvailable {
						refused++
						assert.Equal(t, DiskFullRemark, r.Remark)
						continue
					}
					require.Equal(t, remoting.Success, r.Code, r.Remark)
				}
				took := time.Since(start)
				assert.Less(t, took, 10*time.Second, "50 sends on a full disk")
				assert.Positive(t, refused)
				assert.Equal(t, int64(refused+1), b.FlowStats().DiskFull)
				logged := logs.count() - linesBefore
				t.Logf("50 sends on a full disk in %v: %d refused, %d warn/error lines logged", took, refused, logged)
				assert.LessOrEqual(t, logged, 2*int(took/time.Second)+6, "error lines are rate-limited (last: %s)", logs.lastLine())
			})
		}
	}
}
