package acl

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAddressPatterns(t *testing.T) {
	tests := []struct {
		give  string
		match []string
		miss  []string
	}{
		{give: "", miss: []string{"1.2.3.4:1", "[::1]:1"}},
		{give: "   ", miss: []string{"1.2.3.4:1"}},
		{give: "*", match: []string{"1.2.3.4:1", "[::1]:1", "10.0.0.1"}},
		{give: "*.*.*.*", match: []string{"1.2.3.4:1", "[2001:db8::1]:9"}},
		{give: "*:*:*:*:*:*:*:*", match: []string{"1.2.3.4:1", "[2001:db8::1]:9"}},
		{give: "192.168.0.1", match: []string{"192.168.0.1:10911", "192.168.0.1", "[::ffff:192.168.0.1]:3"}, miss: []string{"192.168.0.10:1", "192.168.0.2:1"}},
		{give: " 192.168.0.1 ", match: []string{"192.168.0.1:1"}},
		{give: "192.168.1.*", match: []string{"192.168.1.0:1", "192.168.1.255:1"}, miss: []string{"192.168.2.1:1", "192.168.10.1:1", "[::1]:1"}},
		{give: "192.168.*.*", match: []string{"192.168.77.3:1"}, miss: []string{"192.169.0.1:1"}},
		{give: "192.168.1-10.*", match: []string{"192.168.1.9:1", "192.168.10.200:1"}, miss: []string{"192.168.11.1:1", "192.168.0.1:1"}},
		{give: "10.*.1-5.*", match: []string{"10.0.1.0:1", "10.255.5.255:1"}, miss: []string{"10.0.6.1:1", "10.9.9.9:1", "11.0.1.1:1"}},
		{give: "192.168.0.10-20", match: []string{"192.168.0.10:1", "192.168.0.20:1"}, miss: []string{"192.168.0.21:1", "192.168.0.9:1"}},
		{give: "192.168.0.{1,2}", match: []string{"192.168.0.1:1", "192.168.0.2:1"}, miss: []string{"192.168.0.3:1", "192.168.0.12:1"}},
		{give: "192.168.0.{1, 2 ,30}", match: []string{"192.168.0.30:1"}},
		{give: "1.1.1.1,2.2.2.2", match: []string{"1.1.1.1:1", "2.2.2.2:1"}, miss: []string{"3.3.3.3:1"}},
		{give: "1.1.1.1, 10.0.0.*", match: []string{"10.0.0.3:1"}, miss: []string{"10.0.1.3:1"}},
		{give: "10.0.0.0/8", match: []string{"10.200.3.4:1"}, miss: []string{"11.0.0.1:1"}},
		{give: "10.1.2.3/8", match: []string{"10.200.3.4:1"}},
		{give: "2001:db8::/32", match: []string{"[2001:db8:ffff::1]:9"}, miss: []string{"[2001:db9::1]:9", "10.0.0.1:1"}},
		{give: "::1", match: []string{"[::1]:9876", "::1", "[0:0:0:0:0:0:0:1]:1"}, miss: []string{"127.0.0.1:1"}},
		{give: "1050:0000:0000:0000:0005:0600:300c:326b", match: []string{"[1050::5:600:300c:326b]:1", "[1050::5:600:300C:326B]:1"}},
		{give: "fe80::1", match: []string{"[fe80::1%eth0]:1"}},
		{give: "1050::0005:0600:300c:*", match: []string{"[1050::5:600:300c:1]:1"}, miss: []string{"[1050::5:600:300d:1]:1"}},
		{give: "1050:0:0:0:5:600:*", match: []string{"[1050::5:600:1:2]:1"}, miss: []string{"[1050::5:601:1:2]:1"}},
		{give: "1050::5:600:300c:0-ff", match: []string{"[1050::5:600:300c:ff]:1"}, miss: []string{"[1050::5:600:300c:100]:1"}},
		{give: "2001:db8::{1,a}", match: []string{"[2001:db8::1]:1", "[2001:db8::a]:1"}, miss: []string{"[2001:db8::2]:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			m, err := compileAddr(tt.give)
			require.NoError(t, err)
			for _, a := range tt.match {
				ip, ok := remoteIP(a)
				require.True(t, ok, a)
				assert.True(t, m(ip), "%q should match %q", tt.give, a)
			}
			for _, a := range tt.miss {
				ip, ok := remoteIP(a)
				require.True(t, ok, a)
				assert.False(t, m(ip), "%q should not match %q", tt.give, a)
			}
		})
	}
}

func TestAddressPatternErrors(t *testing.T) {
	for _, give := range []string{
		"not-an-ip", "256.1.1.1", "1.2.3", "1.2.3.4.5", "192.168.*", "192.168.1.256-300",
		"192.168.5-1.*", "192.168.-1.*", "192.168.1.x*", "1.2.3.{}", "1.2.3.{1,}", "{1,2}",
		"1.2.{3}.4}", "1.2.3.{a}", "1.1.1.1,", ",1.1.1.1", "10.0.0.0/33", "fffff::*",
		"1::2::*", "1:2:3:4:5:6:7:8:*", "g::*", "1.2.3.4/x", "::ffff:10.0.0.0/104",
	} {
		t.Run(give, func(t *testing.T) {
			_, err := compileAddr(give)
			assert.Error(t, err)
		})
	}
}

func TestRemoteIP(t *testing.T) {
	tests := []struct {
		give string
		want string
		ok   bool
	}{
		{give: "127.0.0.1:10911", want: "127.0.0.1", ok: true},
		{give: "127.0.0.1", want: "127.0.0.1", ok: true},
		{give: "/127.0.0.1:5", want: "127.0.0.1", ok: true},
		{give: "[::1]:9876", want: "::1", ok: true},
		{give: "::1", want: "::1", ok: true},
		{give: "[::ffff:10.0.0.1]:5", want: "10.0.0.1", ok: true},
		{give: "[fe80::1%eth0]:1", want: "fe80::1", ok: true},
		{give: ""},
		{give: "nats:subject"},
		{give: "host.example:80"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			ip, ok := remoteIP(tt.give)
			require.Equal(t, tt.ok, ok)
			if ok {
				assert.Equal(t, tt.want, ip.String())
			}
		})
	}
}
