package commitlog

import (
	"bytes"
	"encoding/binary"

	"github.com/quivermq/quiver/core/message"
)

const (
	// blankSize is the room always kept at a segment's end for the
	// end-of-file marker: int32 size + int32 BlankMagicCode (RocketMQ
	// END_FILE_MIN_BLANK_LENGTH).
	blankSize = 8
	// minRecordSize is the smallest stored record: 91 fixed bytes plus a
	// one-byte topic.
	minRecordSize = 92
	// headerPeek is enough bytes for message.PeekHeader with IPv6 hosts.
	headerPeek = 96
	// cqEntrySize is one consume-queue entry: int64 commit-log offset,
	// int32 size, int64 tags code.
	cqEntrySize = 20

	offRecQueueID     = 12
	offRecQueueOffset = 20
	offRecPhysOffset  = 28
	offRecSysFlag     = 36
	offRecBornHost    = 48
)

var be = binary.BigEndian

// recordView is the raw, non-allocating view of one stored record.
type recordView struct {
	queueID     int32
	queueOffset int64
	phys        int64
	storeTS     int64
	body        []byte
	topic       []byte
	props       []byte
}

// parseRecord walks the fields of rec, which must be exactly one record.
func parseRecord(rec []byte) (recordView, bool) {
	var v recordView
	if len(rec) < minRecordSize || int(be.Uint32(rec)) != len(rec) {
		return v, false
	}
	v.queueID = int32(be.Uint32(rec[offRecQueueID:]))
	v.queueOffset = int64(be.Uint64(rec[offRecQueueOffset:]))
	v.phys = int64(be.Uint64(rec[offRecPhysOffset:]))
	sys := int32(be.Uint32(rec[offRecSysFlag:]))
	p := offRecBornHost + 8
	if sys&message.FlagBornHostV6 != 0 {
		p = offRecBornHost + 20
	}
	if len(rec) < p+8 {
		return v, false
	}
	v.storeTS = int64(be.Uint64(rec[p:]))
	p += 8
	if sys&message.FlagStoreHostV6 != 0 {
		p += 20
	} else {
		p += 8
	}
	p += 4 + 8 // reconsume times, prepared transaction offset
	if len(rec) < p+4 {
		return v, false
	}
	bl := int(int32(be.Uint32(rec[p:])))
	p += 4
	if bl < 0 || len(rec)-p < bl {
		return v, false
	}
	v.body = rec[p : p+bl]
	p += bl
	if len(rec) < p+1 {
		return v, false
	}
	tl := int(rec[p])
	p++
	if tl == 0 || len(rec)-p < tl {
		return v, false
	}
	v.topic = rec[p : p+tl]
	p += tl
	if len(rec) < p+2 {
		return v, false
	}
	pl := int(int16(be.Uint16(rec[p:])))
	p += 2
	if pl < 0 {
		pl = 0
	}
	if len(rec)-p != pl {
		return v, false
	}
	v.props = rec[p : p+pl]
	return v, true
}

// propValue returns the value of property name in an encoded properties
// string, or nil.
func propValue(props []byte, name string) []byte {
	for len(props) > 0 {
		item := props
		if i := bytes.IndexByte(props, message.PropertySeparator); i >= 0 {
			item, props = props[:i], props[i+1:]
		} else {
			props = nil
		}
		j := bytes.IndexByte(item, message.NameValueSeparator)
		if j == len(name) && string(item[:j]) == name {
			return item[j+1:]
		}
	}
	return nil
}

// putEntry encodes one consume-queue entry.
func putEntry(b []byte, phys int64, size int32, tagsCode int64) {
	be.PutUint64(b, uint64(phys))
	be.PutUint32(b[8:], uint32(size))
	be.PutUint64(b[12:], uint64(tagsCode))
}

// getEntry decodes one consume-queue entry.
func getEntry(b []byte) (phys int64, size int32, tagsCode int64) {
	return int64(be.Uint64(b)), int32(be.Uint32(b[8:])), int64(be.Uint64(b[12:]))
}
