package acl

import (
	"errors"
	"strings"
	"testing"

	"github.com/quivermq/quiver/core/auth"
)

// FuzzLoadYAML feeds arbitrary files to the loader: it must not panic, a
// loaded file must satisfy the invariants the checks rely on, and an error
// must not contain a secretKey value of the input.
func FuzzLoadYAML(f *testing.F) {
	f.Add([]byte(testYAML))
	f.Add([]byte("globalWhiteRemoteAddresses: ['*']\n"))
	f.Add([]byte("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    whiteRemoteAddress: 10.*.1-5.*\n"))
	f.Add([]byte("accounts:\n  - accessKey: RocketMQ\n    secretKey: 'secret-in-quotes'\n    admin: secret-in-quotes\n"))
	f.Add([]byte("accounts:\n  - {accessKey: abcdefgh, secretKey: hgfedcba, topicPerms: [a=PUB, b=SUB|PUB], groupPerms: [g=DENY]}\n"))
	f.Add([]byte("globalWhiteRemoteAddresses: [192.168.0.{1,2}, 'fe80::*', 2001:db8::/32, '1.1.1.1,2.2.2.2']\n"))
	f.Add([]byte("accounts: [\n"))
	f.Add([]byte("&a [*a]"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := parseRules(data)
		if err != nil {
			msg := err.Error()
			for _, s := range secretCandidates(data) {
				if len(s) >= minKeyLen && !strings.Contains("<redacted>`...`", s) && strings.Contains(msg, s) {
					t.Fatalf("error %q contains the secretKey value %q", msg, s)
				}
			}
			return
		}
		for ak, a := range r.accounts {
			if ak != a.accessKey || len([]rune(ak)) < minKeyLen || len([]rune(string(a.secretKey))) < minKeyLen {
				t.Fatalf("account %q loaded with short keys", ak)
			}
			if a.white == nil || a.defaultTopic == 0 || a.defaultGroup == 0 {
				t.Fatalf("account %q incomplete", ak)
			}
			if a.perms != nil && len(a.perms) == 0 {
				t.Fatalf("account %q has an empty, non-nil perms map", ak)
			}
		}
		if r.global == nil {
			t.Fatal("no global matcher")
		}
	})
}

// FuzzCheck feeds arbitrary requests to Check: no panic, and every refusal
// is an *Error wrapping one of the seam's sentinels without a secret.
func FuzzCheck(f *testing.F) {
	a, _, _ := newACL(f, testYAML)
	seed := signed(10, map[string]string{"topic": "topicB", "producerGroup": "PG"}, []byte("body"), "RocketMQ")
	f.Add(int32(10), "topic", "topicB", seed.ExtFields[KeySignature], []byte("body"), "127.0.0.1:1")
	f.Add(int32(34), "AccessKey", "RocketMQ", "", []byte(hbBody), "10.10.103.1:1")
	f.Add(int32(17), "AccessKey", "rocketmq2", "x", []byte(nil), "192.168.1.3:1")
	f.Add(int32(11), "consumerGroup", "%RETRY%", "sig", []byte("{"), "[::1]:1")
	f.Fuzz(func(t *testing.T, code int32, k, v, sig string, body []byte, addr string) {
		ext := map[string]string{KeyAccessKey: "RocketMQ", k: v, KeySignature: sig}
		_, err := a.Check(ctx, auth.Request{Code: code, RemoteAddr: addr, ExtFields: ext, Body: body})
		if err == nil {
			return
		}
		var ae *Error
		if !errors.As(err, &ae) || (!errors.Is(err, auth.ErrDenied) && !errors.Is(err, auth.ErrUnauthenticated)) {
			t.Fatalf("refusal %v is not an *Error wrapping a sentinel", err)
		}
		for _, s := range testSecrets {
			if strings.Contains(err.Error(), s) && !strings.Contains(k+v+sig+addr, s) {
				t.Fatalf("refusal %q contains a secret", err)
			}
		}
	})
}
