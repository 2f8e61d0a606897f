package commitlog

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// TestKeyIndexHashCollision: two keys whose index hashes are equal share
// a chain; a query of one must not return the other's record.
func TestKeyIndexHashCollision(t *testing.T) {
	s := openStore(t, NewConfig(), settings(t, store.FlushAsync))
	defer s.Close()
	const topic = "Collide"
	seen := map[uint32]string{}
	var a, b string
	for i := 0; a == ""; i++ {
		require.Less(t, i, 10_000_000, "no 32-bit collision found")
		k := fmt.Sprint("key-", i)
		h := s.keys.hash(topic, k)
		if other, ok := seen[h]; ok {
			a, b = other, k
		}
		seen[h] = k
	}
	for _, k := range []string{a, b, a} {
		m := &message.Ext{Message: message.Message{Topic: topic, Body: []byte(k), Properties: message.Properties{message.PropertyKeys: k}}}
		_, err := s.Append(bg, []store.Message{{Ext: m}})
		require.NoError(t, err)
	}
	recs, err := s.QueryByKey(bg, topic, a, 0, 1<<62, 10)
	require.NoError(t, err)
	require.Len(t, recs, 2, "both records of %s, not the one of %s", a, b)
	for _, r := range recs {
		v, ok := parseRecord(r)
		require.True(t, ok)
		assert.Equal(t, a, string(v.body))
	}
	recs, err = s.QueryByKey(bg, topic, b, 0, 1<<62, 10)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	v, _ := parseRecord(recs[0])
	assert.Equal(t, b, string(v.body))
}

// TestKeyIndexAcrossSegmentsAndTopics: keys stay findable when the index
// spans several of its segments; a deleted topic's records are not found
// once the topic exists again, nor are another topic's records with the
// same key.
func TestKeyIndexAcrossSegmentsAndTopics(t *testing.T) {
	s := openStore(t, NewConfig(), settings(t, store.FlushAsync))
	defer s.Close()
	// fill the index past one segment without writing a million records
	s.keys.mu.Lock()
	for i := 0; i < keySegEntries+10; i++ {
		s.keys.putLocked("Filler", fmt.Sprint("f", i), -int64(i)-1) // distinct records
	}
	s.keys.mu.Unlock()
	put := func(topic, key string) int64 {
		m := &message.Ext{Message: message.Message{Topic: topic, Body: []byte(topic + "/" + key), Properties: message.Properties{message.PropertyUniqKey: key}}}
		pos, err := s.Append(bg, []store.Message{{Ext: m}})
		require.NoError(t, err)
		return pos[0].CommitLogOffset
	}
	put("A", "k1")
	put("B", "k1")
	assert.Len(t, s.keys.segs, 2)
	recs, err := s.QueryByKey(bg, "A", "k1", 0, 1<<62, 10)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	v, _ := parseRecord(recs[0])
	assert.Equal(t, "A/k1", string(v.body))

	require.NoError(t, s.DeleteTopic(bg, "A"))
	recs, err = s.QueryByKey(bg, "A", "k1", 0, 1<<62, 10)
	require.NoError(t, err)
	assert.Empty(t, recs, "deleted topic")
	put("A", "k1")
	recs, err = s.QueryByKey(bg, "A", "k1", 0, 1<<62, 10)
	require.NoError(t, err)
	assert.Len(t, recs, 1, "only the new topic's record")
	recs, err = s.QueryByKey(bg, "B", "k1", 0, 1<<62, 10)
	require.NoError(t, err)
	assert.Len(t, recs, 1, "B untouched")

	// prune keeps the segment holding live records
	s.keys.prune(1 << 40)
	assert.Len(t, s.keys.segs, 1, "the last segment is never dropped")
}
