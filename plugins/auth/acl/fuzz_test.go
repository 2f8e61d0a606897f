package acl

import (
	"strings"
	"testing"
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
