package grpc

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"
)

// FuzzParseCredential: any authorization and x-mq-date-time metadata is
// parsed without panicking, and a credential is only returned with an
// access key, a signature and a parsed date-time.
func FuzzParseCredential(f *testing.F) {
	f.Add("MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time, Signature=0A1B", "20250309T195445Z")
	f.Add("MQv2-HMAC-SHA1 Credential=ak/region/channel, Signature=00", "20250309T195445Z")
	f.Add("MQv2-HMAC-SHA1 Credential=, Signature=", "")
	f.Add("garbage", "x")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, authz, dt string) {
		md := metadata.MD{}
		if authz != "" {
			md.Set(mdAuthorization, authz)
		}
		if dt != "" {
			md.Set(mdDateTime, dt)
		}
		c, r := parseCredential(metadata.NewIncomingContext(context.Background(), md))
		if r != nil {
			if r.msg == "" {
				t.Fatal("a refusal without a reason")
			}
			return
		}
		if authz == "" {
			return // no credential: the plugin decides (white lists)
		}
		if c.accessKey == "" || len(c.mac) == 0 || c.signedAt.IsZero() || string(c.content) != dt {
			t.Fatalf("incomplete credential accepted: %+v", c)
		}
	})
}
