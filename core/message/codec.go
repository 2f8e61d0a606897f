package message

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/netip"
)

// Errors returned by the decoders. They wrap ErrMalformed so callers can
// match any decoding problem at once.
var (
	ErrMalformed   = errors.New("message: malformed record")
	ErrTooLarge    = errors.New("message: too large")
	ErrBadTopic    = errors.New("message: bad topic")
	ErrBadProperty = errors.New("message: properties too long")
)

// Fixed offsets inside a stored record (IPv4 or IPv6 alike up to BORNHOST).
const (
	offTotalSize   = 0
	offMagic       = 4
	offBodyCRC     = 8
	offQueueID     = 12
	offFlag        = 16
	offQueueOffset = 20
	offPhysOffset  = 28
	offSysFlag     = 36
	offBornTS      = 40
	offBornHost    = 48
)

// StoredSize is the encoded length of m in the stored layout.
func StoredSize(m *Ext, propLen int) int {
	born, store := 8, 8
	if hostIsV6(m.BornHost) {
		born = 20
	}
	if hostIsV6(m.StoreHost) {
		store = 20
	}
	return 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born + 8 + store + 4 + 8 + 4 + len(m.Body) + 1 + len(m.Topic) + 2 + propLen
}

// AppendStored appends m encoded in the stored/transferred layout (V1 magic).
// props is the encoded properties string (see Properties.AppendEncoded); the
// caller passes it so it can be computed once. The body CRC is computed here.
func AppendStored(b []byte, m *Ext, props []byte) ([]byte, error) {
	if len(m.Topic) == 0 || len(m.Topic) > MaxTopicLength {
		return b, fmt.Errorf("%w: length %d", ErrBadTopic, len(m.Topic))
	}
	if len(props) > MaxPropertiesLength {
		return b, fmt.Errorf("%w: %d bytes", ErrBadProperty, len(props))
	}
	sys := m.SysFlag &^ (FlagBornHostV6 | FlagStoreHostV6)
	if hostIsV6(m.BornHost) {
		sys |= FlagBornHostV6
	}
	if hostIsV6(m.StoreHost) {
		sys |= FlagStoreHostV6
	}
	size := StoredSize(m, len(props))
	be := binary.BigEndian
	b = be.AppendUint32(b, uint32(size))
	magic := MagicCode
	b = be.AppendUint32(b, uint32(magic))
	b = be.AppendUint32(b, BodyCRC(m.Body))
	b = be.AppendUint32(b, uint32(m.QueueID))
	b = be.AppendUint32(b, uint32(m.Flag))
	b = be.AppendUint64(b, uint64(m.QueueOffset))
	b = be.AppendUint64(b, uint64(m.CommitLogOffset))
	b = be.AppendUint32(b, uint32(sys))
	b = be.AppendUint64(b, uint64(m.BornTimestamp))
	b = appendHost(b, m.BornHost)
	b = be.AppendUint64(b, uint64(m.StoreTimestamp))
	b = appendHost(b, m.StoreHost)
	b = be.AppendUint32(b, uint32(m.ReconsumeTimes))
	b = be.AppendUint64(b, uint64(m.PreparedTransactionOffset))
	b = be.AppendUint32(b, uint32(len(m.Body)))
	b = append(b, m.Body...)
	b = append(b, byte(len(m.Topic)))
	b = append(b, m.Topic...)
	b = be.AppendUint16(b, uint16(len(props)))
	b = append(b, props...)
	return b, nil
}

// EncodeStored encodes m with its properties in the stored layout.
func EncodeStored(m *Ext) ([]byte, error) {
	props := m.Properties.AppendEncoded(nil)
	return AppendStored(make([]byte, 0, StoredSize(m, len(props))), m, props)
}

// PatchStored rewrites the queue offset, commit-log offset and store
// timestamp of an encoded record in place; the store assigns them on append.
func PatchStored(rec []byte, queueOffset, commitLogOffset, storeTimestamp int64) {
	be := binary.BigEndian
	be.PutUint64(rec[offQueueOffset:], uint64(queueOffset))
	be.PutUint64(rec[offPhysOffset:], uint64(commitLogOffset))
	sys := int32(be.Uint32(rec[offSysFlag:]))
	p := offBornHost + 8
	if sys&FlagBornHostV6 != 0 {
		p = offBornHost + 20
	}
	be.PutUint64(rec[p:], uint64(storeTimestamp))
}

// RecordHeader is the cheap-to-read part of an encoded record.
type RecordHeader struct {
	Size            int32
	QueueID         int32
	QueueOffset     int64
	CommitLogOffset int64
	SysFlag         int32
	BornTimestamp   int64
	StoreTimestamp  int64
}

// PeekHeader reads the fixed header of an encoded record without decoding
// the body, topic or properties.
func PeekHeader(rec []byte) (RecordHeader, error) {
	if len(rec) < offBornHost+8+8 {
		return RecordHeader{}, fmt.Errorf("%w: %d bytes is shorter than a header", ErrMalformed, len(rec))
	}
	be := binary.BigEndian
	h := RecordHeader{
		Size:            int32(be.Uint32(rec[offTotalSize:])),
		QueueID:         int32(be.Uint32(rec[offQueueID:])),
		QueueOffset:     int64(be.Uint64(rec[offQueueOffset:])),
		CommitLogOffset: int64(be.Uint64(rec[offPhysOffset:])),
		SysFlag:         int32(be.Uint32(rec[offSysFlag:])),
		BornTimestamp:   int64(be.Uint64(rec[offBornTS:])),
	}
	p := offBornHost + 8
	if h.SysFlag&FlagBornHostV6 != 0 {
		p = offBornHost + 20
	}
	if len(rec) < p+8 {
		return RecordHeader{}, fmt.Errorf("%w: %d bytes is shorter than a header", ErrMalformed, len(rec))
	}
	h.StoreTimestamp = int64(be.Uint64(rec[p:]))
	return h, nil
}

type reader struct {
	b   []byte
	p   int
	err error
}

func (r *reader) need(n int) bool {
	if r.err != nil {
		return false
	}
	if n < 0 || len(r.b)-r.p < n {
		r.err = fmt.Errorf("%w: need %d bytes at %d, have %d", ErrMalformed, n, r.p, len(r.b)-r.p)
		return false
	}
	return true
}
func (r *reader) u32() uint32 {
	if !r.need(4) {
		return 0
	}
	v := binary.BigEndian.Uint32(r.b[r.p:])
	r.p += 4
	return v
}
func (r *reader) u64() uint64 {
	if !r.need(8) {
		return 0
	}
	v := binary.BigEndian.Uint64(r.b[r.p:])
	r.p += 8
	return v
}
func (r *reader) u16() uint16 {
	if !r.need(2) {
		return 0
	}
	v := binary.BigEndian.Uint16(r.b[r.p:])
	r.p += 2
	return v
}
func (r *reader) bytes(n int) []byte {
	if !r.need(n) {
		return nil
	}
	v := r.b[r.p : r.p+n : r.p+n]
	r.p += n
	return v
}
func (r *reader) host(v6 bool) netip.AddrPort {
	n := 4
	if v6 {
		n = 16
	}
	ip := r.bytes(n)
	port := r.u32()
	if r.err != nil {
		return netip.AddrPort{}
	}
	a, _ := netip.AddrFromSlice(ip)
	return netip.AddrPortFrom(a, uint16(port))
}

// DecodeStored decodes one record at the start of b and returns it with the
// number of bytes it used. The body is returned as stored (possibly
// compressed); see Ext.UncompressedBody. Slices alias b.
func DecodeStored(b []byte) (*Ext, int, error) {
	m := &Ext{}
	n, err := DecodeStoredInto(b, m, "", nil)
	if err != nil {
		return nil, 0, err
	}
	return m, n, nil
}

// DecodeStoredInto is DecodeStored into m. When the record's topic is
// topic, m.Topic is that string rather than a new one (the records of a
// pull share their topic); when props is not nil, the properties are
// parsed into it (emptied first) instead of a new map.
func DecodeStoredInto(b []byte, m *Ext, topic string, props Properties) (int, error) {
	r := reader{b: b}
	*m = Ext{}
	m.StoreSize = int32(r.u32())
	magic := int32(r.u32())
	if r.err == nil && magic != MagicCode {
		return 0, fmt.Errorf("%w: magic %#x", ErrMalformed, uint32(magic))
	}
	if r.err == nil && (m.StoreSize < 91 || int(m.StoreSize) > len(b)) {
		return 0, fmt.Errorf("%w: total size %d with %d bytes available", ErrMalformed, m.StoreSize, len(b))
	}
	m.BodyCRC = r.u32()
	m.QueueID = int32(r.u32())
	m.Flag = int32(r.u32())
	m.QueueOffset = int64(r.u64())
	m.CommitLogOffset = int64(r.u64())
	m.SysFlag = int32(r.u32())
	m.BornTimestamp = int64(r.u64())
	m.BornHost = r.host(m.SysFlag&FlagBornHostV6 != 0)
	m.StoreTimestamp = int64(r.u64())
	m.StoreHost = r.host(m.SysFlag&FlagStoreHostV6 != 0)
	m.ReconsumeTimes = int32(r.u32())
	m.PreparedTransactionOffset = int64(r.u64())
	bodyLen := int32(r.u32())
	if r.err == nil && (bodyLen < 0 || int(bodyLen) > len(b)) {
		return 0, fmt.Errorf("%w: body length %d", ErrMalformed, bodyLen)
	}
	m.Body = r.bytes(int(bodyLen))
	if !r.need(1) {
		return 0, r.err
	}
	tl := int(r.b[r.p])
	r.p++
	if tb := r.bytes(tl); string(tb) == topic && topic != "" {
		m.Topic = topic
	} else {
		m.Topic = string(tb)
	}
	pl := int16(r.u16())
	switch {
	case props != nil:
		clear(props)
		if pl > 0 {
			parsePropertiesInto(props, string(r.bytes(int(pl))))
		}
		m.Properties = props
	case pl > 0:
		m.Properties = ParseProperties(string(r.bytes(int(pl))))
	default:
		m.Properties = Properties{}
	}
	if r.err != nil {
		return 0, r.err
	}
	if r.p != int(m.StoreSize) {
		return 0, fmt.Errorf("%w: fields take %d bytes but total size says %d", ErrMalformed, r.p, m.StoreSize)
	}
	return r.p, nil
}

// DecodeAll decodes concatenated records, as in a pull response body.
func DecodeAll(b []byte) ([]*Ext, error) {
	var out []*Ext
	for len(b) > 0 {
		m, n, err := DecodeStored(b)
		if err != nil {
			return out, err
		}
		out = append(out, m)
		b = b[n:]
	}
	return out, nil
}

// BodyCRC is the CRC a stored record carries for its body, as Java's
// UtilAll.crc32: the IEEE CRC-32 with its top bit cleared
// (crc32 & 0x7FFFFFFF), so that it is a non-negative int. Java consumers
// checking CRCs (MessageDecoder with checkCRC) compare with this value.
func BodyCRC(body []byte) uint32 { return crc32.ChecksumIEEE(body) & 0x7FFFFFFF }

// VerifyCRC reports whether the record's body matches its stored CRC: the
// masked value Java and Quiver write, or the full CRC-32 that Quiver
// before this change wrote (records in older stores and their copies).
func (m *Ext) VerifyCRC() bool {
	c := crc32.ChecksumIEEE(m.Body)
	return m.BodyCRC == c&0x7FFFFFFF || m.BodyCRC == c
}

// MaxInflatedBody bounds what UncompressedBody will inflate.
const MaxInflatedBody = 64 << 20

// UncompressedBody returns the body, inflated with zlib when the compressed
// flag is set.
func (m *Ext) UncompressedBody() ([]byte, error) {
	if m.SysFlag&FlagCompressed == 0 {
		return m.Body, nil
	}
	return Inflate(m.Body)
}

// Inflate decompresses a zlib body, refusing results above MaxInflatedBody.
func Inflate(b []byte) ([]byte, error) {
	zr, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("message: inflate body: %w", err)
	}
	defer zr.Close()
	out, err := io.ReadAll(io.LimitReader(zr, MaxInflatedBody+1))
	if err != nil {
		return nil, fmt.Errorf("message: inflate body: %w", err)
	}
	if len(out) > MaxInflatedBody {
		return nil, fmt.Errorf("%w: inflated body exceeds %d bytes", ErrTooLarge, MaxInflatedBody)
	}
	return out, nil
}

// Deflate compresses a body with zlib at the given level.
func Deflate(b []byte, level int) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := zlib.NewWriterLevel(&buf, level)
	if err != nil {
		return nil, fmt.Errorf("message: deflate body: %w", err)
	}
	if _, err := zw.Write(b); err != nil {
		return nil, fmt.Errorf("message: deflate body: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("message: deflate body: %w", err)
	}
	return buf.Bytes(), nil
}

// PropertiesOffset returns where the 2-byte properties length of the
// stored record rec sits (the properties follow it and end the record),
// reading only the lengths before it.
func PropertiesOffset(rec []byte) (int, error) {
	if len(rec) < offBornHost+8 {
		return 0, fmt.Errorf("%w: %d bytes is shorter than a header", ErrMalformed, len(rec))
	}
	be := binary.BigEndian
	sys := int32(be.Uint32(rec[offSysFlag:]))
	p := offBornHost + 8 // born host, 4-byte address
	if sys&FlagBornHostV6 != 0 {
		p += 12
	}
	p += 8 + 8 // store timestamp, store host
	if sys&FlagStoreHostV6 != 0 {
		p += 12
	}
	p += 4 + 8 // reconsume times, prepared transaction offset
	if len(rec) < p+4 {
		return 0, fmt.Errorf("%w: %d bytes end before the body length", ErrMalformed, len(rec))
	}
	bodyLen := int(int32(be.Uint32(rec[p:])))
	if bodyLen < 0 || bodyLen > len(rec) {
		return 0, fmt.Errorf("%w: body length %d", ErrMalformed, bodyLen)
	}
	p += 4 + bodyLen
	if len(rec) < p+1 {
		return 0, fmt.Errorf("%w: %d bytes end before the topic", ErrMalformed, len(rec))
	}
	p += 1 + int(rec[p])
	if len(rec) < p+2 || p+2+int(be.Uint16(rec[p:])) != len(rec) {
		return 0, fmt.Errorf("%w: the properties do not end the record", ErrMalformed)
	}
	return p, nil
}
