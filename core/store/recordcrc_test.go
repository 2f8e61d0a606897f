package store_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// withCRC encodes m as an engine stores it: its properties, then the
// checksum property (digits are irrelevant here).
func withCRC(t testing.TB, m *message.Ext) []byte {
	t.Helper()
	props := m.Properties.AppendEncoded(nil)
	if len(props) > 0 && props[len(props)-1] != message.PropertySeparator {
		props = append(props, message.PropertySeparator)
	}
	props = append(props, store.PropertyRecordCRC...)
	props = append(props, message.NameValueSeparator)
	props = append(props, "1234567890"...)
	props = append(props, message.PropertySeparator)
	rec, err := message.AppendStored(nil, m, props)
	require.NoError(t, err)
	return rec
}

func sample(props message.Properties, v6 bool) *message.Ext {
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	if v6 {
		host = netip.MustParseAddrPort("[::1]:10911")
	}
	return &message.Ext{Message: message.Message{Topic: "orders", Body: []byte("hello"), Properties: props},
		QueueID: 3, QueueOffset: 7, CommitLogOffset: 4096, BornTimestamp: 1, StoreTimestamp: 2, BornHost: host, StoreHost: host}
}

func TestHideRecordCRC(t *testing.T) {
	for _, tt := range []struct {
		name  string
		props message.Properties
		v6    bool
	}{
		{"properties", message.Properties{"KEYS": "k1", "TAGS": "a", "UNIQ_KEY": "u1"}, false},
		{"only the checksum", message.Properties{}, false},
		{"IPv6 hosts", message.Properties{"TAGS": "b"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := sample(tt.props, tt.v6)
			rec := withCRC(t, m)
			stored, _, err := message.DecodeStored(append([]byte(nil), rec...))
			require.NoError(t, err)
			require.Contains(t, stored.Properties, store.PropertyRecordCRC)

			out := store.HideRecordCRC(rec)
			assert.Len(t, out, len(rec)-store.RecordCRCLen)
			got, n, err := message.DecodeStored(out)
			require.NoError(t, err)
			assert.Equal(t, len(out), n)
			assert.NotContains(t, got.Properties, store.PropertyRecordCRC)
			assert.Equal(t, len(tt.props), len(got.Properties))
			for k, v := range tt.props {
				assert.Equal(t, v, got.Properties[k], k)
			}
			assert.Equal(t, m.Body, got.Body)
			assert.Equal(t, m.Topic, got.Topic)
			assert.Equal(t, m.QueueOffset, got.QueueOffset)
			assert.Equal(t, m.StoreHost, got.StoreHost)
		})
	}
}

func TestHideRecordCRCLeavesOthers(t *testing.T) {
	plain, err := message.EncodeStored(sample(message.Properties{"TAGS": "a"}, false))
	require.NoError(t, err)
	assert.Equal(t, plain, store.HideRecordCRC(append([]byte(nil), plain...)))

	// The name inside another property's value is not the checksum.
	m := sample(message.Properties{"X": "v"}, false)
	props := append([]byte("X"), message.NameValueSeparator)
	props = append(props, "ab"+store.PropertyRecordCRC...)
	props = append(props, message.NameValueSeparator)
	props = append(props, "123456789"...)
	props = append(props, message.PropertySeparator)
	rec, err := message.AppendStored(nil, m, props)
	require.NoError(t, err)
	assert.Equal(t, rec, store.HideRecordCRC(append([]byte(nil), rec...)))

	assert.Equal(t, []byte("short"), store.HideRecordCRC([]byte("short")))
}

// FuzzHideRecordCRC: any input is left alone or comes back shorter by the
// property, and a record that decoded still decodes.
func FuzzHideRecordCRC(f *testing.F) {
	f.Add(withCRC(f, sample(message.Properties{"TAGS": "a"}, false)))
	f.Add(withCRC(f, sample(message.Properties{}, true)))
	f.Fuzz(func(t *testing.T, rec []byte) {
		_, _, decErr := message.DecodeStored(append([]byte(nil), rec...))
		in := len(rec)
		out := store.HideRecordCRC(rec)
		if len(out) != in && len(out) != in-store.RecordCRCLen {
			t.Fatalf("length %d → %d", in, len(out))
		}
		if decErr == nil && len(out) != in {
			if _, _, err := message.DecodeStored(out); err != nil {
				t.Fatalf("decoded before, not after: %v", err)
			}
		}
	})
}
