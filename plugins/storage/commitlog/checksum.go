package commitlog

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"maps"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// Record checksum. Every record the writer stores ends with the property
// RocketMQ 5 appends when enabledAppendPropCRC is on (CommitLog
// CRC32_RESERVED_LEN, MessageDecoder.createCrc32):
//
//	PROPERTY_SEPARATOR? "__CRC32#" NAME_VALUE_SEPARATOR <10 digits> PROPERTY_SEPARATOR
//
// The digits are the CRC-32 (IEEE, & 0x7FFFFFFF as Java's UtilAll.crc32)
// of every byte of the record before the property's 20 bytes, least
// significant digit first, zero-padded (Java's loop). It covers the
// header, the body, the topic and the other properties, and is computed
// after the store patched in the queue offset, commit-log offset and store
// time. Records written before the property existed (and replicated ones
// without it) are verified by their body CRC only.
const (
	crcPropName = store.PropertyRecordCRC
	// crcReserved is the length of the trailing property (Java's
	// CRC32_RESERVED_LEN): name, separator, 10 digits, separator.
	crcReserved = store.RecordCRCLen
)

var crcPrefix = []byte(crcPropName + string(rune(message.NameValueSeparator)))

// appendCRCPlaceholder appends the checksum property with zero digits to
// the encoded properties b[start:] (a separator first when they do not end
// with one).
func appendCRCPlaceholder(b []byte, start int) []byte {
	if len(b) > start && b[len(b)-1] != message.PropertySeparator {
		b = append(b, message.PropertySeparator)
	}
	b = append(b, crcPrefix...)
	b = append(b, "0000000000"...)
	return append(b, message.PropertySeparator)
}

// dropCRCProp returns p without the checksum property (a message re-stored
// from a stored record carries its old one; the store writes a new one).
func dropCRCProp(p message.Properties) message.Properties {
	if _, ok := p[crcPropName]; !ok {
		return p
	}
	q := maps.Clone(p)
	delete(q, crcPropName)
	return q
}

// sealRecord writes the checksum digits of rec, which must end with the
// placeholder appendCRCPlaceholder wrote.
func sealRecord(rec []byte) {
	n := len(rec) - crcReserved
	crc := crc32.ChecksumIEEE(rec[:n]) & 0x7FFFFFFF
	d := rec[n+len(crcPrefix) : n+len(crcPrefix)+10]
	for i := range d {
		d[i] = '0' + byte(crc%10)
		crc /= 10
	}
}

// recordCRC returns the checksum a record carries in its trailing
// property, and whether it has one.
func recordCRC(rec []byte) (uint32, bool) {
	n := len(rec) - crcReserved
	if n < minRecordSize || rec[len(rec)-1] != message.PropertySeparator || !bytes.Equal(rec[n:n+len(crcPrefix)], crcPrefix) {
		return 0, false
	}
	// The property follows a separator, or starts the properties (after
	// their length).
	if rec[n-1] != message.PropertySeparator && int(be.Uint16(rec[n-2:])) != crcReserved {
		return 0, false
	}
	var crc uint64
	d := rec[n+len(crcPrefix) : len(rec)-1]
	for i := len(d) - 1; i >= 0; i-- {
		if d[i] < '0' || d[i] > '9' {
			return 0, false
		}
		crc = crc*10 + uint64(d[i]-'0')
	}
	if crc > 0x7FFFFFFF {
		return 0, false
	}
	return uint32(crc), true
}

// checkRecord verifies one record read from commit-log offset phys: its
// layout, the offset it says it is at, and its checksum (the record CRC
// property, else the body CRC, masked as Java writes it or not). It returns
// why the record is bad, or "".
func checkRecord(rec []byte, phys int64) string {
	v, ok := parseRecord(rec)
	if !ok {
		return "malformed record"
	}
	if v.phys != phys {
		return fmt.Sprintf("record says it is at %d", v.phys)
	}
	if want, ok := recordCRC(rec); ok {
		if got := crc32.ChecksumIEEE(rec[:len(rec)-crcReserved]) & 0x7FFFFFFF; got != want {
			return fmt.Sprintf("record CRC mismatch (stored %d, computed %d)", want, got)
		}
		return ""
	}
	want := be.Uint32(rec[8:])
	if got := crc32.ChecksumIEEE(v.body); got != want && got&0x7FFFFFFF != want {
		return "body CRC mismatch"
	}
	return ""
}
