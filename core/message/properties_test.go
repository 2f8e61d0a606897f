package message_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/quivermq/quiver/core/message"
)

func TestParseProperties(t *testing.T) {
	tests := []struct {
		name string
		give string
		want message.Properties
	}{
		{"empty", "", message.Properties{}},
		{"java form", "TAGS\x01TagA\x02KEYS\x01k1 k2", message.Properties{"TAGS": "TagA", "KEYS": "k1 k2"}},
		{"go form with trailing separator", "TAGS\x01TagA\x02UNIQ_KEY\x01C0A8\x02", message.Properties{"TAGS": "TagA", "UNIQ_KEY": "C0A8"}},
		{"empty key skipped", "\x01v\x02a\x01b", message.Properties{"a": "b"}},
		{"empty value skipped", "k\x01\x02a\x01b\x02", message.Properties{"a": "b"}},
		{"no name separator skipped", "junk\x02a\x01b", message.Properties{"a": "b"}},
		{"only separators", "\x02\x02\x01\x02", message.Properties{}},
		{"value keeps later 0x01", "k\x01v\x01w", message.Properties{"k": "v\x01w"}},
		{"duplicate key, last wins", "k\x01one\x02k\x01two", message.Properties{"k": "two"}},
		{"unicode", "标签\x01值😀", message.Properties{"标签": "值😀"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, message.ParseProperties(tt.give))
		})
	}
}

func TestPropertiesEncode(t *testing.T) {
	tests := []struct {
		name string
		give message.Properties
		want string
	}{
		{"nil", nil, ""},
		{"empty", message.Properties{}, ""},
		{"one", message.Properties{"TAGS": "a"}, "TAGS\x01a"},
		{"sorted, java form", message.Properties{"b": "2", "a": "1", "c": "3"}, "a\x011\x02b\x012\x02c\x013"},
		{"empty key and value skipped", message.Properties{"": "x", "k": "", "a": "1"}, "a\x011"},
		{"all skipped", message.Properties{"": "x", "k": ""}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.give.Encode())
			assert.Equal(t, "pre"+tt.want, string(tt.give.AppendEncoded([]byte("pre"))))
			// Whatever was encoded parses back.
			want := message.Properties{}
			for k, v := range tt.give {
				if k != "" && v != "" {
					want[k] = v
				}
			}
			assert.Equal(t, want, message.ParseProperties(tt.give.Encode()))
		})
	}
}

func TestPropertiesHelpers(t *testing.T) {
	p := message.Properties{message.PropertyKeys: " k1  k2 k3 ", message.PropertyTags: "TagA"}
	c := p.Clone()
	c["x"] = "y"
	assert.NotContains(t, p, "x", "Clone shares the map")
	assert.Equal(t, []string{"k1", "k2", "k3"}, p.KeyList())
	assert.Empty(t, message.Properties{}.KeyList())

	m := message.Message{Topic: "T", Properties: p}
	assert.Equal(t, "TagA", m.Tags())
	assert.Equal(t, " k1  k2 k3 ", m.Keys())
	tests := []struct {
		give string
		want int
	}{{"3", 3}, {"x", 0}, {"", 0}, {"18", 18}}
	for _, tt := range tests {
		m := message.Message{Properties: message.Properties{message.PropertyDelayTimeLevel: tt.give}}
		assert.Equal(t, tt.want, m.DelayLevel(), "DELAY=%q", tt.give)
	}
	assert.Equal(t, 0, (&message.Message{}).DelayLevel())

	e := &message.Ext{StoreHost: netip.MustParseAddrPort("127.0.0.1:10911"), CommitLogOffset: 0}
	assert.Equal(t, "7F00000100002A9F0000000000000000", e.MsgID())
	assert.Equal(t, e.MsgID(), e.UniqKey(), "UniqKey falls back to the offsetMsgId")
	e.Properties = message.Properties{message.PropertyUniqKey: "C000020242040000000007d89f080001"}
	assert.Equal(t, "C000020242040000000007d89f080001", e.UniqKey())
}
