package acl

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSignatureSpecVector(t *testing.T) {
	// spec §8.1: GET_ROUTEINFO with topic "TopicA", ak "ak", sk "sk".
	ext := map[string]string{"topic": "TopicA", KeyAccessKey: "ak"}
	c := Content(ext, nil)
	assert.Equal(t, "akTopicA", string(c))
	assert.Equal(t, "LaFvs8ZmttDE4nOZYPB8+nLiOHA=", Signature([]byte("sk"), c))

	// The Go client's own path gives the same frame.
	g := map[string]string{"topic": "TopicA"}
	goClientSign(g, nil, "ak", "sk", "")
	assert.Equal(t, "LaFvs8ZmttDE4nOZYPB8+nLiOHA=", g[KeySignature])
	assert.Equal(t, "ak", g[KeyAccessKey])

	s := map[string]string{"topic": "TopicA"}
	Sign(s, nil, "ak", "sk", "")
	assert.Equal(t, g, s)
	assert.True(t, verifySignature([]byte("sk"), s, nil, s[KeySignature]))
}

func TestContent(t *testing.T) {
	tests := []struct {
		name     string
		give     map[string]string
		body     string
		wantJava string
		wantGo   string
	}{
		{name: "empty", give: nil, wantJava: "", wantGo: ""},
		{name: "body only", give: map[string]string{"AccessKey": "ak"}, body: `{"x":1}`, wantJava: `ak{"x":1}`, wantGo: `ak{"x":1}`},
		{
			name:     "key order, signature skipped",
			give:     map[string]string{"b": "2", "a": "1", "Signature": "zzz", "AccessKey": "ak", "Z": "z"},
			wantJava: "ak" + "z" + "1" + "2", wantGo: "akz12",
		},
		{
			name:     "token: Java signs it, Go does not",
			give:     map[string]string{"AccessKey": "ak", "SecurityToken": "tok", "topic": "T"},
			wantJava: "aktokT", wantGo: "akT",
		},
		{
			name:     "unique key query: Java skips it, Go signs it",
			give:     map[string]string{"AccessKey": "ak", "_UNIQUE_KEY_QUERY": "true", "topic": "T"},
			wantJava: "akT", wantGo: "aktrueT",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.wantJava, string(Content(tt.give, []byte(tt.body))))
			assert.Equal(t, tt.wantGo, string(GoClientContent(tt.give, []byte(tt.body))))
		})
	}
}

func TestVerifySignatureVariants(t *testing.T) {
	body := []byte(`{"clientID":"c"}`)
	base := map[string]string{"producerGroup": "PG", "topic": "T"}
	tests := []struct {
		name string
		sign func(ext map[string]string)
		// tamper runs after signing.
		tamper func(ext map[string]string, body []byte) []byte
		want   bool
	}{
		{name: "Go client", sign: func(e map[string]string) { goClientSign(e, body, "ak1234567", "secret123", "") }, want: true},
		{name: "Go client with token", sign: func(e map[string]string) { goClientSign(e, body, "ak1234567", "secret123", "tok") }, want: true},
		{name: "Java", sign: func(e map[string]string) { Sign(e, body, "ak1234567", "secret123", "") }, want: true},
		{name: "Java with token", sign: func(e map[string]string) { Sign(e, body, "ak1234567", "secret123", "tok") }, want: true},
		{
			name: "Go client with unique key query",
			sign: func(e map[string]string) {
				e[KeyUniqueKeyQuery] = "true"
				goClientSign(e, body, "ak1234567", "secret123", "")
			},
			want: true,
		},
		{
			name: "Java with unique key query",
			sign: func(e map[string]string) { e[KeyUniqueKeyQuery] = "true"; Sign(e, body, "ak1234567", "secret123", "") },
			want: true,
		},
		{name: "wrong secret", sign: func(e map[string]string) { goClientSign(e, body, "ak1234567", "secret124", "") }},
		{name: "no signature", sign: func(e map[string]string) { e[KeyAccessKey] = "ak1234567" }},
		{
			name:   "token changed after a Java signature",
			sign:   func(e map[string]string) { Sign(e, body, "ak1234567", "secret123", "tok") },
			tamper: func(e map[string]string, b []byte) []byte { e[KeySecurityToken] = "other"; return b },
		},
		{
			name:   "token changed after a Go client signature",
			sign:   func(e map[string]string) { goClientSign(e, body, "ak1234567", "secret123", "tok") },
			tamper: func(e map[string]string, b []byte) []byte { e[KeySecurityToken] = "other"; return b },
			// The Go client does not sign the token, so a changed token
			// still verifies: the token is not protected. ACL 1.0 does
			// not use the token for anything.
			want: true,
		},
		{
			name:   "body changed",
			sign:   func(e map[string]string) { goClientSign(e, body, "ak1234567", "secret123", "") },
			tamper: func(e map[string]string, b []byte) []byte { return append([]byte("x"), b...) },
		},
		{
			name:   "field changed",
			sign:   func(e map[string]string) { goClientSign(e, body, "ak1234567", "secret123", "") },
			tamper: func(e map[string]string, b []byte) []byte { e["topic"] = "U"; return b },
		},
		{
			name:   "field added",
			sign:   func(e map[string]string) { goClientSign(e, body, "ak1234567", "secret123", "") },
			tamper: func(e map[string]string, b []byte) []byte { e["queueId"] = "1"; return b },
		},
		{
			name:   "value moved between fields",
			sign:   func(e map[string]string) { goClientSign(e, body, "ak1234567", "secret123", "") },
			tamper: func(e map[string]string, b []byte) []byte { e["producerGroup"], e["topic"] = "P", "GT"; return b },
			// Concatenation without separators cannot tell these apart;
			// RocketMQ's scheme has this weakness by design.
			want: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ext := map[string]string{}
			for k, v := range base {
				ext[k] = v
			}
			tt.sign(ext)
			b := body
			if tt.tamper != nil {
				b = tt.tamper(ext, append([]byte(nil), body...))
			}
			assert.Equal(t, tt.want, verifySignature([]byte("secret123"), ext, b, ext[KeySignature]))
		})
	}
}
