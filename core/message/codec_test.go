package message_test

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"hash/crc32"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
)

var (
	v4Born  = netip.MustParseAddrPort("10.1.2.3:54321")
	v4Store = netip.MustParseAddrPort("127.0.0.1:10911")
	v6Born  = netip.MustParseAddrPort("[2001:db8::1]:40000")
	v6Store = netip.MustParseAddrPort("[fe80::1234:5678]:10911")
)

func sampleExt() *message.Ext {
	return &message.Ext{
		Message: message.Message{
			Topic: "TopicA", Flag: 7,
			Properties: message.Properties{message.PropertyTags: "TagA", message.PropertyUniqKey: "C0A80001", message.PropertyKeys: "k1 k2"},
			Body:       []byte("hello, world"),
		},
		QueueID: 3, QueueOffset: 42, SysFlag: message.TransactionCommit, BornTimestamp: 1700000000000,
		BornHost: v4Born, StoreTimestamp: 1700000000123, StoreHost: v4Store, CommitLogOffset: 123456789,
		ReconsumeTimes: 2, PreparedTransactionOffset: 99,
	}
}

// normalized is what DecodeStored returns for m after EncodeStored: the
// size, CRC and host flags are computed on encode.
func normalized(m *message.Ext, enc []byte) *message.Ext {
	w := *m
	w.StoreSize = int32(len(enc))
	w.BodyCRC = crc32.ChecksumIEEE(m.Body) & 0x7FFFFFFF // UtilAll.crc32
	w.SysFlag &^= message.FlagBornHostV6 | message.FlagStoreHostV6
	if m.BornHost.Addr().Is6() && !m.BornHost.Addr().Is4In6() {
		w.SysFlag |= message.FlagBornHostV6
	}
	if m.StoreHost.Addr().Is6() && !m.StoreHost.Addr().Is4In6() {
		w.SysFlag |= message.FlagStoreHostV6
	}
	if w.Properties == nil {
		w.Properties = message.Properties{}
	}
	if w.Body == nil {
		w.Body = []byte{}
	}
	return &w
}

func TestStoredRoundTrip(t *testing.T) {
	maxProps := message.Properties{"K": strings.Repeat("v", message.MaxPropertiesLength-2)}
	require.Len(t, maxProps.Encode(), message.MaxPropertiesLength)
	tests := []struct {
		name   string
		modify func(m *message.Ext)
	}{
		{"ipv4", func(m *message.Ext) {}},
		{"ipv6 born", func(m *message.Ext) { m.BornHost = v6Born }},
		{"ipv6 store", func(m *message.Ext) { m.StoreHost = v6Store }},
		{"ipv6 both", func(m *message.Ext) { m.BornHost, m.StoreHost = v6Born, v6Store }},
		{"stale v6 flags are recomputed", func(m *message.Ext) { m.SysFlag |= message.FlagBornHostV6 | message.FlagStoreHostV6 }},
		{"compressed flag", func(m *message.Ext) {
			m.SysFlag |= message.FlagCompressed
			m.Body, _ = message.Deflate(bytes.Repeat([]byte("abc"), 5000), 5)
		}},
		{"empty body", func(m *message.Ext) { m.Body = nil }},
		{"no properties", func(m *message.Ext) { m.Properties = nil }},
		{"topic of 127 bytes", func(m *message.Ext) { m.Topic = strings.Repeat("t", message.MaxTopicLength) }},
		{"properties of 32767 bytes", func(m *message.Ext) { m.Properties = maxProps }},
		{"negative fields", func(m *message.Ext) {
			m.QueueID, m.Flag, m.QueueOffset, m.CommitLogOffset, m.ReconsumeTimes = -1, -2, -3, -4, -5
			m.BornTimestamp, m.StoreTimestamp, m.PreparedTransactionOffset = -6, -7, -8
		}},
		{"big body", func(m *message.Ext) { m.Body = bytes.Repeat([]byte{0xAB}, 1<<20) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := sampleExt()
			tt.modify(m)
			enc, err := message.EncodeStored(m)
			require.NoError(t, err)
			got, n, err := message.DecodeStored(enc)
			require.NoError(t, err)
			assert.Equal(t, len(enc), n)
			assert.Equal(t, normalized(m, enc), got)
			assert.True(t, got.VerifyCRC())
			props := m.Properties.AppendEncoded(nil)
			assert.Equal(t, message.StoredSize(m, len(props)), len(enc))
			// AppendStored appends after what is there.
			app, err := message.AppendStored([]byte("xy"), m, props)
			require.NoError(t, err)
			assert.Equal(t, enc, app[2:])
		})
	}
}

// TestStoredSize checks the spec §6.1 formula: 91 + body + topic + props
// with IPv4 hosts, and 12 more bytes per IPv6 host.
func TestStoredSize(t *testing.T) {
	for _, body := range []int{0, 1, 1000} {
		for _, topic := range []int{1, 6, 127} {
			for _, props := range []int{0, 10, 32767} {
				m := &message.Ext{Message: message.Message{Topic: strings.Repeat("t", topic), Body: make([]byte, body)}, BornHost: v4Born, StoreHost: v4Store}
				assert.Equal(t, 91+body+topic+props, message.StoredSize(m, props))
				m.BornHost = v6Born
				assert.Equal(t, 91+12+body+topic+props, message.StoredSize(m, props))
				m.StoreHost = v6Store
				assert.Equal(t, 91+24+body+topic+props, message.StoredSize(m, props))
			}
		}
	}
	m := sampleExt()
	enc, err := message.EncodeStored(m)
	require.NoError(t, err)
	assert.Equal(t, 91+len(m.Body)+len(m.Topic)+len(m.Properties.Encode()), len(enc))
}

// TestStoredKnownVector lays a record out field by field per spec §6.1 and
// compares it with the encoder.
func TestStoredKnownVector(t *testing.T) {
	be := binary.BigEndian
	var want []byte
	u32 := func(v uint32) { want = be.AppendUint32(want, v) }
	u64 := func(v uint64) { want = be.AppendUint64(want, v) }
	body, topic, props := []byte("quiver"), "T", "a\x01b"
	u32(91 + 6 + 1 + 3) // TOTALSIZE
	u32(0xDAA320A7)     // MAGICCODE
	// BODYCRC: UtilAll.crc32, the CRC-32 with its top bit cleared;
	// zlib.crc32(b"quiver") = 0xf05d33e1 (python3), so 0x705d33e1.
	u32(0x705d33e1)
	u32(1)             // QUEUEID
	u32(0)             // FLAG
	u64(5)             // QUEUEOFFSET
	u64(1000)          // PHYSICALOFFSET
	u32(0)             // SYSFLAG
	u64(1700000000000) // BORNTIMESTAMP
	want = append(want, 10, 1, 2, 3)
	u32(54321) // BORNHOST
	u64(1700000000001)
	want = append(want, 127, 0, 0, 1)
	u32(10911) // STOREHOST
	u32(0)     // RECONSUMETIMES
	u64(0)     // PREPARED TRANSACTION OFFSET
	u32(uint32(len(body)))
	want = append(want, body...)
	want = append(want, byte(len(topic)))
	want = append(want, topic...)
	want = be.AppendUint16(want, uint16(len(props)))
	want = append(want, props...)

	m := &message.Ext{Message: message.Message{Topic: topic, Body: body, Properties: message.Properties{"a": "b"}},
		QueueID: 1, QueueOffset: 5, CommitLogOffset: 1000, BornTimestamp: 1700000000000, BornHost: v4Born,
		StoreTimestamp: 1700000000001, StoreHost: v4Store}
	got, err := message.EncodeStored(m)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Len(t, got, 101)
}

func TestAppendStoredErrors(t *testing.T) {
	tests := []struct {
		name   string
		modify func(m *message.Ext)
		want   error
	}{
		{"empty topic", func(m *message.Ext) { m.Topic = "" }, message.ErrBadTopic},
		{"topic of 128 bytes", func(m *message.Ext) { m.Topic = strings.Repeat("t", 128) }, message.ErrBadTopic},
		{"properties of 32768 bytes", func(m *message.Ext) {
			m.Properties = message.Properties{"K": strings.Repeat("v", message.MaxPropertiesLength-1)}
		}, message.ErrBadProperty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := sampleExt()
			tt.modify(m)
			got, err := message.AppendStored([]byte("keep"), m, m.Properties.AppendEncoded(nil))
			assert.ErrorIs(t, err, tt.want)
			assert.Equal(t, "keep", string(got), "a failed append leaves b as it was")
		})
	}
}

func TestPatchStored(t *testing.T) {
	for _, born := range []netip.AddrPort{v4Born, v6Born} {
		for _, store := range []netip.AddrPort{v4Store, v6Store} {
			m := sampleExt()
			m.BornHost, m.StoreHost = born, store
			enc, err := message.EncodeStored(m)
			require.NoError(t, err)
			message.PatchStored(enc, 777, 888888, 1800000000000)
			got, _, err := message.DecodeStored(enc)
			require.NoError(t, err)
			assert.Equal(t, int64(777), got.QueueOffset)
			assert.Equal(t, int64(888888), got.CommitLogOffset)
			assert.Equal(t, int64(1800000000000), got.StoreTimestamp)
			// Nothing else moved.
			assert.Equal(t, m.BornTimestamp, got.BornTimestamp)
			assert.Equal(t, born, got.BornHost)
			assert.Equal(t, store, got.StoreHost)
			assert.Equal(t, m.Body, got.Body)
			assert.Equal(t, m.Properties, got.Properties)
			assert.True(t, got.VerifyCRC())

			h, err := message.PeekHeader(enc)
			require.NoError(t, err)
			assert.Equal(t, message.RecordHeader{
				Size: int32(len(enc)), QueueID: m.QueueID, QueueOffset: 777, CommitLogOffset: 888888,
				SysFlag: got.SysFlag, BornTimestamp: m.BornTimestamp, StoreTimestamp: 1800000000000,
			}, h)
		}
	}
}

func TestPeekHeaderShort(t *testing.T) {
	m := sampleExt()
	m.BornHost = v6Born
	enc, err := message.EncodeStored(m)
	require.NoError(t, err)
	// Up to the store timestamp: 48 + 20 (IPv6 born host) + 8.
	for n := range 48 + 20 + 8 {
		_, err := message.PeekHeader(enc[:n])
		assert.ErrorIs(t, err, message.ErrMalformed, "cut at %d", n)
	}
	_, err = message.PeekHeader(enc[:48+20+8])
	assert.NoError(t, err)
}

func TestDecodeAll(t *testing.T) {
	var all []byte
	var want []*message.Ext
	for i := range 5 {
		m := sampleExt()
		m.QueueOffset = int64(i)
		m.Body = bytes.Repeat([]byte{byte(i)}, i*10)
		if i%2 == 1 {
			m.StoreHost = v6Store
		}
		enc, err := message.EncodeStored(m)
		require.NoError(t, err)
		all = append(all, enc...)
		want = append(want, normalized(m, enc))
	}
	got, err := message.DecodeAll(all)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	empty, err := message.DecodeAll(nil)
	require.NoError(t, err)
	assert.Empty(t, empty)

	// Trailing garbage: the records before it are returned with the error.
	got, err = message.DecodeAll(append(all, 0, 0, 0))
	assert.ErrorIs(t, err, message.ErrMalformed)
	assert.Len(t, got, 5)
}

func TestDecodeStoredTruncated(t *testing.T) {
	for _, hosts := range [][2]netip.AddrPort{{v4Born, v4Store}, {v6Born, v6Store}} {
		m := sampleExt()
		m.BornHost, m.StoreHost = hosts[0], hosts[1]
		enc, err := message.EncodeStored(m)
		require.NoError(t, err)
		for n := range len(enc) {
			var err error
			require.NotPanics(t, func() { _, _, err = message.DecodeStored(enc[:n]) }, "cut at %d", n)
			require.ErrorIs(t, err, message.ErrMalformed, "cut at %d of %d", n, len(enc))
		}
		// Nor does a truncation with a total size that still claims the
		// cut length.
		for n := 4; n < len(enc); n++ {
			b := bytes.Clone(enc[:n])
			binary.BigEndian.PutUint32(b, uint32(n))
			var err error
			require.NotPanics(t, func() { _, _, err = message.DecodeStored(b) }, "cut at %d", n)
			require.ErrorIs(t, err, message.ErrMalformed, "cut at %d with size patched", n)
		}
	}
}

func TestDecodeStoredErrors(t *testing.T) {
	be := binary.BigEndian
	good, err := message.EncodeStored(sampleExt())
	require.NoError(t, err)
	bodyLenAt := 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8
	tests := []struct {
		name  string
		patch func(b []byte) []byte
	}{
		{"wrong magic", func(b []byte) []byte { be.PutUint32(b[4:], 0x12345678); return b }},
		{"blank magic", func(b []byte) []byte { be.PutUint32(b[4:], 0xCBD43194); return b }},
		{"V2 magic", func(b []byte) []byte { be.PutUint32(b[4:], 0xDAA320AB); return b }},
		{"total size too small", func(b []byte) []byte { be.PutUint32(b, 90); return b }},
		{"total size negative", func(b []byte) []byte { be.PutUint32(b, 0xFFFFFFFF); return b }},
		{"total size beyond data", func(b []byte) []byte { be.PutUint32(b, uint32(len(b)+1)); return b }},
		{"total size one short", func(b []byte) []byte { be.PutUint32(b, uint32(len(b)-1)); return b }},
		{"total size one long", func(b []byte) []byte { be.PutUint32(b, uint32(len(b)+1)); return append(b, 0) }},
		{"body length negative", func(b []byte) []byte { be.PutUint32(b[bodyLenAt:], 0xFFFFFFF0); return b }},
		{"body length huge", func(b []byte) []byte { be.PutUint32(b[bodyLenAt:], 0x7FFFFFFF); return b }},
		{"body length one more", func(b []byte) []byte { be.PutUint32(b[bodyLenAt:], be.Uint32(b[bodyLenAt:])+1); return b }},
		{"ipv6 flag on ipv4 hosts", func(b []byte) []byte { b[39] |= byte(message.FlagBornHostV6); return b }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.patch(bytes.Clone(good))
			var err error
			require.NotPanics(t, func() { _, _, err = message.DecodeStored(b) })
			assert.ErrorIs(t, err, message.ErrMalformed)
		})
	}
}

func TestUncompressedBody(t *testing.T) {
	plain := bytes.Repeat([]byte("compress me "), 1000)
	z, err := message.Deflate(plain, 5)
	require.NoError(t, err)
	assert.Less(t, len(z), len(plain))

	m := &message.Ext{Message: message.Message{Body: z}, SysFlag: message.FlagCompressed}
	got, err := m.UncompressedBody()
	require.NoError(t, err)
	assert.Equal(t, plain, got)

	m.SysFlag = 0
	got, err = m.UncompressedBody()
	require.NoError(t, err)
	assert.Equal(t, z, got, "an uncompressed body is returned as is")

	m = &message.Ext{Message: message.Message{Body: []byte("not zlib")}, SysFlag: message.FlagCompressed}
	_, err = m.UncompressedBody()
	assert.Error(t, err)
}

func TestDeflateInflate(t *testing.T) {
	for _, level := range []int{zlib.NoCompression, zlib.BestSpeed, 5, zlib.BestCompression, zlib.DefaultCompression} {
		for _, body := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("abcdef"), 10000)} {
			z, err := message.Deflate(body, level)
			require.NoError(t, err)
			// It is plain zlib (RFC 1950), as the Go and Java clients use.
			zr, err := zlib.NewReader(bytes.NewReader(z))
			require.NoError(t, err)
			zr.Close()
			got, err := message.Inflate(z)
			require.NoError(t, err)
			assert.Equal(t, len(body), len(got))
			assert.True(t, bytes.Equal(body, got))
		}
	}
	_, err := message.Deflate([]byte("x"), 42)
	assert.Error(t, err, "bad level")

	z, err := message.Deflate(bytes.Repeat([]byte("abc"), 1000), 5)
	require.NoError(t, err)
	for _, bad := range [][]byte{nil, []byte("garbage"), z[:len(z)/2], z[:len(z)-1]} {
		_, err := message.Inflate(bad)
		assert.Error(t, err, "%d bytes", len(bad))
	}
}

// TestInflateBound inflates a zlib bomb one byte over MaxInflatedBody.
func TestInflateBound(t *testing.T) {
	if testing.Short() {
		t.Skip("inflates 64 MiB")
	}
	var buf bytes.Buffer
	zw, err := zlib.NewWriterLevel(&buf, zlib.BestSpeed)
	require.NoError(t, err)
	chunk := make([]byte, 1<<20)
	for range message.MaxInflatedBody / len(chunk) {
		_, err := zw.Write(chunk)
		require.NoError(t, err)
	}
	_, err = zw.Write([]byte{0})
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	assert.Less(t, buf.Len(), 1<<20, "the bomb is small")
	_, err = message.Inflate(buf.Bytes())
	assert.ErrorIs(t, err, message.ErrTooLarge)
}

func BenchmarkEncodeStored(b *testing.B) {
	m := sampleExt()
	m.Body = bytes.Repeat([]byte("x"), 1024)
	props := m.Properties.AppendEncoded(nil)
	buf := make([]byte, 0, message.StoredSize(m, len(props)))
	b.Run("AppendStored", func(b *testing.B) {
		b.SetBytes(int64(cap(buf)))
		b.ReportAllocs()
		for b.Loop() {
			var err error
			if buf, err = message.AppendStored(buf[:0], m, props); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("EncodeStored", func(b *testing.B) {
		b.SetBytes(int64(cap(buf)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := message.EncodeStored(m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkDecodeStored(b *testing.B) {
	m := sampleExt()
	m.Body = bytes.Repeat([]byte("x"), 1024)
	enc, err := message.EncodeStored(m)
	require.NoError(b, err)
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := message.DecodeStored(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func TestStoredWithoutHosts(t *testing.T) {
	m := &message.Ext{Message: message.Message{Topic: "T", Body: []byte("b")}}
	enc, err := message.EncodeStored(m)
	require.NoError(t, err)
	assert.Len(t, enc, 91+1+1)
	got, _, err := message.DecodeStored(enc)
	require.NoError(t, err)
	zero := netip.MustParseAddrPort("0.0.0.0:0")
	assert.Equal(t, zero, got.BornHost)
	assert.Equal(t, zero, got.StoreHost)
	assert.Equal(t, "00000000000000000000000000000000", got.MsgID())
}

// TestBodyCRCMatchesJava: the stored BODYCRC is Java's UtilAll.crc32
// (crc32 & 0x7FFFFFFF). The wants were computed independently with
// python3: zlib.crc32(b) & 0x7fffffff; every input but the empty one has
// the CRC's top bit set, where an unmasked CRC would differ.
func TestBodyCRCMatchesJava(t *testing.T) {
	tests := []struct {
		give     string
		wantFull uint32 // zlib.crc32(b)
		want     uint32 // zlib.crc32(b) & 0x7fffffff
	}{
		{"quiver", 0xf05d33e1, 1885156321},
		{"123456789", 0xcbf43926, 1274296614},
		{"a", 0xe8b7be43, 1756872259},
		{"", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			assert.Equal(t, tt.wantFull, crc32.ChecksumIEEE([]byte(tt.give)), "test vector")
			assert.Equal(t, tt.want, message.BodyCRC([]byte(tt.give)))
			m := sampleExt()
			m.Body = []byte(tt.give)
			enc, err := message.EncodeStored(m)
			require.NoError(t, err)
			assert.Equal(t, tt.want, binary.BigEndian.Uint32(enc[8:]), "BODYCRC written")
			got, _, err := message.DecodeStored(enc)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.BodyCRC)
			assert.True(t, got.VerifyCRC(), "masked CRC (Java's, and ours now)")
			// A record from an older Quiver store carries the full CRC.
			binary.BigEndian.PutUint32(enc[8:], tt.wantFull)
			old, _, err := message.DecodeStored(enc)
			require.NoError(t, err)
			assert.True(t, old.VerifyCRC(), "unmasked CRC of an older Quiver store")
			// Anything else is a mismatch.
			binary.BigEndian.PutUint32(enc[8:], tt.want^0x10)
			bad, _, err := message.DecodeStored(enc)
			require.NoError(t, err)
			assert.False(t, bad.VerifyCRC())
		})
	}
}
