package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client/admin"
)

// TestPebbleDamage (issue 37): an mq dev with the pebble engine stores
// 2,000 messages in a topic of two queues and stops; then 64 bytes of one
// message in an sstable and 64 bytes of one message in the WAL are
// flipped, and it starts again. The topic's configuration is still there,
// a pull loop from offset 0 of each queue reads every message but the
// damaged ones (pulls over the damaged block answer an offset past it, not
// SYSTEM_ERROR), and a push consumer from the first offset gets the same
// messages: it does not stop at the damage.
func TestPebbleDamage(t *testing.T) {
	e := startEnv(t, tcpScheme, "storage.engine=pebble", "storage.pebble.compression=none", "storage.pebble.memtable_size=256KiB")
	topic := uniq("Damage")
	e.createTopic(t, topic, 2)
	p := e.producer(t)
	const n = 2000
	body := func(i int) string {
		return fmt.Sprintf("damage-%05d-%s", i, strings.Repeat(string(rune('a'+i%26)), 300))
	}
	for i := 0; i < n; i++ {
		m := msg(topic, body(i))
		sendSync(t, p, m)
	}
	e.srv.Stop()

	dir := filepath.Join(e.srv.Dir, "store", "pebble")
	flip := func(glob string, i int) bool {
		paths, err := filepath.Glob(filepath.Join(dir, glob))
		require.NoError(t, err)
		for _, path := range paths {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			if at := bytes.Index(b, []byte(body(i))); at >= 0 {
				for j := 0; j < 64; j++ {
					b[at+40+j] ^= 0xa5
				}
				require.NoError(t, os.WriteFile(path, b, 0o644))
				return true
			}
		}
		return false
	}
	require.True(t, flip("*.sst", 100), "message 100 is in an sstable (256KiB memtables were flushed)")
	require.True(t, flip("*.log", n-10), "message %d is in the WAL", n-10)
	e.srv.Start()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := e.admin(t)
	waitFor(t, 20*time.Second, func() bool {
		r, err := a.Route(ctx, topic)
		return err == nil && len(r.Publish) == 2
	}, "the route of %s after the restart: its configuration survives", topic)

	// A pull loop from 0 to the end of each queue.
	pulled := map[string]bool{}
	for qid := 0; qid < 2; qid++ {
		mx, err := a.MaxOffset(ctx, e.srv.Broker, topic, qid)
		require.NoError(t, err)
		for off, pulls := int64(0), 0; off < mx; pulls++ {
			require.Less(t, pulls, 1000)
			res, err := a.Pull(ctx, e.srv.Broker, admin.PullRequest{Topic: topic, QueueID: qid, Offset: off})
			require.NoError(t, err, "pull queue %d at %d", qid, off)
			msgs, err := res.Messages()
			require.NoError(t, err)
			for _, m := range msgs {
				pulled[string(m.Body)] = true
			}
			require.Greater(t, res.NextBeginOffset, off, "pull queue %d at %d: %v", qid, off, res.Status)
			off = res.NextBeginOffset
		}
	}
	var lost []int
	for i := 0; i < n; i++ {
		if !pulled[body(i)] {
			lost = append(lost, i)
		}
	}
	t.Logf("lost %d of %d messages: %v", len(lost), n, lost)
	assert.Contains(t, lost, 100)
	assert.Contains(t, lost, n-10)
	// One 4 KiB block holds about 12 messages of 350 bytes (one queue's
	// every other message), the WAL record one.
	assert.LessOrEqual(t, len(lost), 16, "only the damaged block's and record's messages are lost")

	col := newCollector()
	e.push(t, topic, pushOpts{group: uniq("CG")}, col.handle)
	col.wait(t, len(pulled), 60*time.Second)
	time.Sleep(200 * time.Millisecond)
	got := col.bodies()
	assert.Len(t, got, len(pulled), "the push consumer gets every intact message and no other")
	for _, b := range got {
		assert.True(t, pulled[b], "pushed %q was not pulled", b[:14])
	}
}
