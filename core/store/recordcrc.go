package store

import (
	"bytes"
	"encoding/binary"

	"github.com/quivermq/quiver/core/message"
)

// HideRecordCRC returns the stored record rec without its trailing
// PropertyRecordCRC, as RocketMQ delivers records when
// enabledAppendPropCRC is off (its default): the engine keeps the
// checksum in the record it stores, clients never see it. rec is changed
// in place (its total size and properties length) and the result is a
// prefix of it, so rec must be the caller's own copy. A record without
// the property (or one that does not parse) is returned as it is.
func HideRecordCRC(rec []byte) []byte {
	n := len(rec) - RecordCRCLen
	if n <= 0 || !bytes.HasPrefix(rec[n:], crcPrefix) || rec[len(rec)-1] != message.PropertySeparator {
		return rec
	}
	p, err := message.PropertiesOffset(rec)
	if err != nil || int(binary.BigEndian.Uint32(rec)) != len(rec) {
		return rec
	}
	props := int(binary.BigEndian.Uint16(rec[p:]))
	if props < RecordCRCLen || (props > RecordCRCLen && rec[n-1] != message.PropertySeparator) {
		return rec // the name is inside another property's value
	}
	binary.BigEndian.PutUint32(rec, uint32(n))
	binary.BigEndian.PutUint16(rec[p:], uint16(props-RecordCRCLen))
	return rec[:n]
}

var crcPrefix = []byte(PropertyRecordCRC + string(rune(message.NameValueSeparator)))
