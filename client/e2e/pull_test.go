package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/client/producer"
)

// TestPullEach: PullEach hands every message once, in queue order, with
// its body, tags, keys and offsets; the memory it reuses between messages
// and pulls never shows in what the callback copied, nor in the messages
// an earlier Pull returned (those stay the caller's).
func TestPullEach(t *testing.T) {
	e := startEnv(t, tcpScheme)
	topic := uniq("PullEach")
	e.createTopic(t, topic, 1)
	p := e.producer(t, producer.WithAutoBatch(false))
	const n = 600
	body := func(i int) string {
		return fmt.Sprintf("each-%04d-%s", i, strings.Repeat(string(rune('a'+i%26)), i%900))
	}
	for i := 0; i < n; i++ {
		m := msg(topic, body(i)).SetTag(fmt.Sprint("T", i%3)).SetKeys(fmt.Sprint("k", i))
		sendSync(t, p, m)
	}
	pc, err := consumer.NewPull(e.client(t), uniq("PullEachGroup"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	qs, err := pc.Queues(ctx, topic)
	require.NoError(t, err)
	mq := qs[0]

	// an ordinary pull of the first 50: the caller's to keep
	first, err := pc.Pull(ctx, mq, consumer.All(), 0, 50)
	require.NoError(t, err)
	require.Len(t, first.Messages, 50)

	type seen struct {
		body, tag, keys string
		off             int64
	}
	var got []seen
	off := int64(50)
	for off < n {
		r, err := pc.PullEach(ctx, mq, consumer.All(), off, 64, func(m *client.MessageExt) {
			got = append(got, seen{string(m.Body), m.Tag(), strings.Join(m.Keys(), " "), m.QueueOffset})
		})
		require.NoError(t, err)
		require.Equal(t, consumer.Found, r.Status)
		assert.Empty(t, r.Messages)
		off = r.NextBeginOffset
	}
	require.Len(t, got, n-50)
	for i, s := range got {
		j := i + 50
		assert.Equal(t, body(j), s.body)
		assert.Equal(t, fmt.Sprint("T", j%3), s.tag)
		assert.Equal(t, fmt.Sprint("k", j), s.keys)
		assert.Equal(t, int64(j), s.off)
	}
	for i, m := range first.Messages {
		assert.Equal(t, body(i), string(m.Body), "a Pull's messages are not reused")
	}

	// a tag subscription: PullEach hands only the matching ones
	var tagged []string
	r, err := pc.PullEach(ctx, mq, consumer.Tags("T1"), 0, 30, func(m *client.MessageExt) { tagged = append(tagged, m.Tag()) })
	require.NoError(t, err)
	assert.NotEmpty(t, tagged)
	for _, tg := range tagged {
		assert.Equal(t, "T1", tg)
	}
	assert.Positive(t, r.NextBeginOffset)
}
