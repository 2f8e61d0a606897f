package message_test

import (
	"bytes"
	"errors"
	"hash/crc32"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/quivermq/quiver/core/message"
)

// FuzzDecodeStored: DecodeStored never panics, errors wrap ErrMalformed, and
// a decoded record re-encodes to a record that decodes to the same message
// (after the encoder's normalisations: size, CRC, IPv6 flags, canonical
// properties), whose encoding is then stable.
func FuzzDecodeStored(f *testing.F) {
	for _, modify := range []func(*message.Ext){
		func(*message.Ext) {},
		func(m *message.Ext) { m.BornHost, m.StoreHost = v6Born, v6Store },
		func(m *message.Ext) { m.Body, m.Properties = nil, nil },
		func(m *message.Ext) { m.SysFlag |= message.FlagCompressed },
	} {
		m := sampleExt()
		modify(m)
		enc, err := message.EncodeStored(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc)
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 91, 0xDA, 0xA3, 0x20, 0xA7})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, n, err := message.DecodeStored(b)
		// DecodeStoredInto reusing a map (consumer.PullEach) agrees, whatever its
		// map held before.
		var re message.Ext
		reused := message.Properties{"STALE": "x", "UNIQ_KEY": "old"}
		rn, rerr := message.DecodeStoredInto(b, &re, "T", reused)
		if (rerr == nil) != (err == nil) {
			t.Fatalf("DecodeStored error %v, DecodeStoredInto error %v", err, rerr)
		}
		if err == nil {
			if rn != n || !reflect.DeepEqual(map[string]string(m.Properties), map[string]string(re.Properties)) ||
				re.Topic != m.Topic || !bytes.Equal(re.Body, m.Body) || re.QueueOffset != m.QueueOffset {
				t.Fatalf("DecodeStoredInto with a map differs: %+v vs %+v", re, m)
			}
		}
		if err != nil {
			if !errors.Is(err, message.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if n != int(m.StoreSize) || n > len(b) {
			t.Fatalf("used %d bytes, size %d, have %d", n, m.StoreSize, len(b))
		}
		h, err := message.PeekHeader(b)
		if err != nil {
			t.Fatalf("PeekHeader fails on a decodable record: %v", err)
		}
		if h.Size != m.StoreSize || h.QueueID != m.QueueID || h.QueueOffset != m.QueueOffset ||
			h.CommitLogOffset != m.CommitLogOffset || h.SysFlag != m.SysFlag ||
			h.BornTimestamp != m.BornTimestamp || h.StoreTimestamp != m.StoreTimestamp {
			t.Fatalf("PeekHeader %+v disagrees with DecodeStored %+v", h, m)
		}
		all, err := message.DecodeAll(b[:n])
		if err != nil || len(all) != 1 {
			t.Fatalf("DecodeAll of one record: %d records, %v", len(all), err)
		}
		enc, err := message.EncodeStored(m)
		if m.Topic == "" {
			if !errors.Is(err, message.ErrBadTopic) {
				t.Fatalf("empty topic encoded: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("decoded record does not encode: %v", err)
		}
		m2, n2, err := message.DecodeStored(enc)
		if err != nil || n2 != len(enc) {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		want := normalized(m, enc)
		want.BornHost = unmap(m.BornHost)
		want.StoreHost = unmap(m.StoreHost)
		if want.BodyCRC != crc32.ChecksumIEEE(m2.Body)&0x7FFFFFFF || !m2.VerifyCRC() {
			t.Fatal("re-encoded CRC is wrong")
		}
		if !equalExt(want, m2) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", want, m2)
		}
		enc2, err := message.EncodeStored(m2)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable: %v", err)
		}
	})
}

func unmap(h netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(h.Addr().Unmap(), h.Port()) }

func equalExt(a, b *message.Ext) bool {
	if !bytes.Equal(a.Body, b.Body) || !equalProps(a.Properties, b.Properties) {
		return false
	}
	return a.Topic == b.Topic && a.Flag == b.Flag && a.QueueID == b.QueueID && a.StoreSize == b.StoreSize &&
		a.QueueOffset == b.QueueOffset && a.SysFlag == b.SysFlag && a.BornTimestamp == b.BornTimestamp &&
		a.BornHost == b.BornHost && a.StoreTimestamp == b.StoreTimestamp && a.StoreHost == b.StoreHost &&
		a.CommitLogOffset == b.CommitLogOffset && a.BodyCRC == b.BodyCRC && a.ReconsumeTimes == b.ReconsumeTimes &&
		a.PreparedTransactionOffset == b.PreparedTransactionOffset
}

func equalProps(a, b message.Properties) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// FuzzDecodeBatch: DecodeBatch never panics, errors wrap ErrMalformed, and
// decoded items re-encode to a batch that decodes to the same items.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(unhex(f, capturedBatch))
	f.Add(message.AppendBatchItem(nil, message.BatchItem{Flag: 3, Body: []byte("body"), Properties: message.Properties{"TAGS": "a", "KEYS": "b c"}}))
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 22})
	f.Fuzz(func(t *testing.T, b []byte) {
		items, err := message.DecodeBatch(b)
		if err != nil {
			if !errors.Is(err, message.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		var enc []byte
		for _, it := range items {
			enc = message.AppendBatchItem(enc, it)
		}
		got, err := message.DecodeBatch(enc)
		if err != nil {
			t.Fatalf("re-encoded batch does not decode: %v", err)
		}
		if len(got) != len(items) {
			t.Fatalf("%d items, then %d", len(items), len(got))
		}
		for i := range got {
			if got[i].Flag != items[i].Flag || !bytes.Equal(got[i].Body, items[i].Body) || !equalProps(got[i].Properties, items[i].Properties) {
				t.Fatalf("item %d changed: %+v then %+v", i, items[i], got[i])
			}
		}
		var enc2 []byte
		for _, it := range got {
			enc2 = message.AppendBatchItem(enc2, it)
		}
		if !bytes.Equal(enc, enc2) {
			t.Fatal("batch encoding is not stable")
		}
	})
}

// FuzzParseProperties: parsing never panics, yields no empty keys or values
// and no separators where they cannot be, and Encode then Parse is the
// identity on parsed properties.
func FuzzParseProperties(f *testing.F) {
	for _, s := range []string{"", "TAGS\x01TagA\x02KEYS\x01k1 k2", "TAGS\x01TagA\x02UNIQ_KEY\x01C0A8\x02",
		"\x01v\x02k\x01\x02", "k\x01v\x01w", "\x02\x02\x01", "标签\x01值"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := message.ParseProperties(s)
		for k, v := range p {
			if k == "" || v == "" {
				t.Fatalf("empty key or value kept: %q=%q", k, v)
			}
			if strings.ContainsAny(k, "\x01\x02") || strings.ContainsRune(v, '\x02') {
				t.Fatalf("separator inside a pair: %q=%q", k, v)
			}
		}
		enc := p.Encode()
		if len(enc) > len(s) {
			t.Fatalf("encoding grew: %d > %d bytes", len(enc), len(s))
		}
		p2 := message.ParseProperties(enc)
		if !equalProps(p, p2) {
			t.Fatalf("Parse(Encode(p)) != p: %q -> %q", s, enc)
		}
		if p2.Encode() != enc {
			t.Fatal("properties encoding is not stable")
		}
	})
}
