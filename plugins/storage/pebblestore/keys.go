package pebblestore

import (
	"encoding/binary"

	"github.com/quivermq/quiver/core/store"
)

var be = binary.BigEndian

// Key prefixes (one byte each). See the package documentation for the
// layout of each kind.
const (
	prefixMeta       = 'M' // 'M' name -> document
	prefixQueueState = 'Q' // 'Q' topic 0x00 be32(qid) -> be64(start)
	prefixState      = 'S' // 'S' name -> store-wide state
	prefixKey        = 'k' // 'k' be32(bucket) topic 0x00 key 0x00 be64(phys) -> keyValue
	prefixPhys       = 'm' // 'm' be64(phys) -> physValue
	prefixEntry      = 'q' // 'q' topic 0x00 be32(qid) be64(offset) -> be64(tagsCode) record
)

// Store-wide state keys.
var (
	stateVersion = []byte("Sversion")  // be32 format version
	stateMinPhys = []byte("Smin_phys") // be64 first physical offset still stored
)

// formatVersion is the key layout version written to a new store.
const formatVersion = 1

// keyBucketMillis is the width of one key-index time bucket: retention
// drops whole buckets with one range deletion, and QueryByKey only visits
// the buckets of its time range. Part of the on-disk format.
const keyBucketMillis = 3600 * 1000

// entryHeader is the tags code in front of the record in an entry value.
const entryHeader = 8

// physValueSize is the fixed part of a physValue: be64(storeTS)
// be32(size) be32(qid) be64(queueOffset), followed by the topic.
const physValueSize = 24

// Offsets inside a stored record (message stored layout).
const (
	recOffQueueOffset = 20
	recOffPhys        = 28
	// minRecordSize is the smallest stored record: 91 fixed bytes plus a
	// one-byte topic.
	minRecordSize = 92
)

func appendQueuePrefix(dst []byte, prefix byte, q store.Queue) []byte {
	dst = append(dst, prefix)
	dst = append(dst, q.Topic...)
	dst = append(dst, 0)
	return be.AppendUint32(dst, uint32(q.ID))
}

// entryKey is 'q' topic 0x00 be32(qid) be64(offset).
func entryKey(dst []byte, q store.Queue, off int64) []byte {
	return be.AppendUint64(appendQueuePrefix(dst, prefixEntry, q), uint64(off))
}

// entryOffset decodes the offset of an entry key.
func entryOffset(k []byte) int64 { return int64(be.Uint64(k[len(k)-8:])) }

// queueStateKey is 'Q' topic 0x00 be32(qid).
func queueStateKey(q store.Queue) []byte { return appendQueuePrefix(nil, prefixQueueState, q) }

// parseQueueKey decodes the queue of a 'Q' or 'q' key (without the offset
// suffix when withOffset is false).
func parseQueueKey(k []byte, withOffset bool) (store.Queue, bool) {
	n := len(k)
	if withOffset {
		n -= 8
	}
	if n < 1+1+1+4 {
		return store.Queue{}, false
	}
	topic := k[1 : n-5]
	if k[n-5] != 0 {
		return store.Queue{}, false
	}
	return store.Queue{Topic: string(topic), ID: int32(be.Uint32(k[n-4 : n]))}, true
}

// topicRange returns the bounds of every queue key of topic under prefix.
func topicRange(prefix byte, topic string) (lo, hi []byte) {
	lo = append(append([]byte{prefix}, topic...), 0)
	hi = append(append([]byte{prefix}, topic...), 1)
	return lo, hi
}

// physKey is 'm' be64(phys).
func physKey(dst []byte, phys int64) []byte {
	return be.AppendUint64(append(dst, prefixPhys), uint64(phys))
}

func appendPhysValue(dst []byte, ts int64, size int32, q store.Queue, off int64) []byte {
	dst = be.AppendUint64(dst, uint64(ts))
	dst = be.AppendUint32(dst, uint32(size))
	dst = be.AppendUint32(dst, uint32(q.ID))
	dst = be.AppendUint64(dst, uint64(off))
	return append(dst, q.Topic...)
}

type physValue struct {
	ts   int64
	size int32
	q    store.Queue
	off  int64
}

func parsePhysValue(v []byte) (physValue, bool) {
	if len(v) < physValueSize+1 {
		return physValue{}, false
	}
	return physValue{
		ts:   int64(be.Uint64(v)),
		size: int32(be.Uint32(v[8:])),
		q:    store.Queue{Topic: string(v[physValueSize:]), ID: int32(be.Uint32(v[12:]))},
		off:  int64(be.Uint64(v[16:])),
	}, true
}

func bucketOf(ts int64) uint32 {
	if ts <= 0 {
		return 0
	}
	b := ts / keyBucketMillis
	if b > int64(^uint32(0)) {
		return ^uint32(0)
	}
	return uint32(b)
}

// bucketKey is 'k' be32(bucket), the start of one bucket.
func bucketKey(b uint32) []byte { return be.AppendUint32([]byte{prefixKey}, b) }

// keyPrefix is 'k' be32(bucket) topic 0x00 key 0x00.
func keyPrefix(dst []byte, b uint32, topic, key string) []byte {
	dst = be.AppendUint32(append(dst, prefixKey), b)
	dst = append(dst, topic...)
	dst = append(dst, 0)
	dst = append(dst, key...)
	return append(dst, 0)
}

// keyValue is be64(storeTS) be32(qid) be64(queueOffset).
func appendKeyValue(dst []byte, ts int64, qid int32, off int64) []byte {
	dst = be.AppendUint64(dst, uint64(ts))
	dst = be.AppendUint32(dst, uint32(qid))
	return be.AppendUint64(dst, uint64(off))
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}
