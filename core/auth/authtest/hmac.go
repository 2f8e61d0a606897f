package authtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/quivermq/quiver/core/auth"
)

// WithHMACRequests adds HMAC credentials (auth.HMACRequest) the plugin
// under test accepts. The HMAC subtest checks that AuthenticateHMAC
// accepts each one and uses them as seeds for mutated credentials.
func WithHMACRequests(r ...auth.HMACRequest) Option {
	return func(o *options) { o.hmac = append(o.hmac, r...) }
}

// runHMAC checks auth.HMACAuthenticator's contract; it skips when the
// Authenticator does not implement it.
func runHMAC(t *testing.T, open Opener, o options) {
	an, _ := open(t)
	h, ok := an.(auth.HMACAuthenticator)
	if !ok {
		t.Skip("the Authenticator does not implement auth.HMACAuthenticator")
	}
	for i, req := range o.hmac {
		if _, err := authenticateHMAC(t, h, cloneHMAC(req)); err != nil {
			t.Errorf("HMAC request %d (accessKey %q): AuthenticateHMAC: %v", i, req.AccessKey, err)
		}
	}
	g := newGen(7, o)
	reqs := g.hmacRequests(o.rounds)
	for _, seed := range o.hmac {
		reqs = append(reqs, g.hmacMutations(seed)...)
	}
	for _, req := range reqs {
		p1, err1 := authenticateHMAC(t, h, cloneHMAC(req))
		if err1 != nil {
			if !errors.Is(err1, auth.ErrUnauthenticated) {
				t.Errorf("AuthenticateHMAC(accessKey %q): error %q does not wrap auth.ErrUnauthenticated", req.AccessKey, err1)
			}
			checkSecrets(t, o, "AuthenticateHMAC", err1)
		}
		p2, err2 := authenticateHMAC(t, h, cloneHMAC(req))
		if (err1 == nil) != (err2 == nil) || p1 != p2 {
			t.Errorf("AuthenticateHMAC(accessKey %q): the same credential gave (%+v, %v) then (%+v, %v)", req.AccessKey, p1, err1, p2, err2)
		}
	}
	t.Run("BorrowedInputs", func(t *testing.T) {
		// Content and MAC are borrowed: scribbled over after the call,
		// they must not change the answer to the same credential later.
		// A fresh plugin: its first answers may be the ones it keeps.
		an, _ := open(t)
		h := an.(auth.HMACAuthenticator)
		for i, seed := range o.hmac {
			req := cloneHMAC(seed)
			want, werr := authenticateHMAC(t, h, req)
			for j := range req.Content {
				req.Content[j] ^= 0xff
			}
			for j := range req.MAC {
				req.MAC[j] ^= 0xff
			}
			got, gerr := authenticateHMAC(t, h, cloneHMAC(seed))
			if (werr == nil) != (gerr == nil) || want != got {
				t.Errorf("HMAC request %d: after its Content and MAC were reused the same credential gave (%+v, %v), before (%+v, %v)", i, got, gerr, want, werr)
			}
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		creds := append(g.hmacRequests(32), o.hmac...)
		inParallel(t, 8, 4*len(creds), func(w, i int) string {
			_, pv, err := safeAuthenticateHMAC(h, cloneHMAC(creds[(i*7+w)%len(creds)]))
			switch {
			case pv != nil:
				return fmt.Sprintf("concurrent AuthenticateHMAC panicked: %v", pv)
			case err != nil && !errors.Is(err, auth.ErrUnauthenticated):
				return fmt.Sprintf("concurrent AuthenticateHMAC: %v does not wrap ErrUnauthenticated", err)
			}
			return ""
		})
	})
}

// authenticateHMAC calls AuthenticateHMAC, turning a panic into a test
// failure.
func authenticateHMAC(t *testing.T, h auth.HMACAuthenticator, req auth.HMACRequest) (auth.Principal, error) {
	t.Helper()
	p, pv, err := safeAuthenticateHMAC(h, req)
	if pv != nil {
		t.Errorf("AuthenticateHMAC(accessKey %q, content %q) panicked: %v", req.AccessKey, req.Content, pv)
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	return p, err
}

// safeAuthenticateHMAC calls AuthenticateHMAC and returns what it
// panicked with.
func safeAuthenticateHMAC(h auth.HMACAuthenticator, req auth.HMACRequest) (p auth.Principal, panicked any, err error) {
	defer func() { panicked = recover() }()
	p, err = h.AuthenticateHMAC(context.Background(), req)
	return p, nil, err
}

func cloneHMAC(r auth.HMACRequest) auth.HMACRequest {
	if r.Content != nil {
		r.Content = bytes.Clone(r.Content)
	}
	if r.MAC != nil {
		r.MAC = bytes.Clone(r.MAC)
	}
	return r
}

func (g *gen) bytes(max int) []byte {
	if g.r.IntN(6) == 0 {
		return nil
	}
	b := make([]byte, g.r.IntN(max))
	for i := range b {
		b[i] = byte(g.r.IntN(256))
	}
	return b
}

func (g *gen) hmacRequest() auth.HMACRequest {
	if len(g.seedHMAC) > 0 && g.r.IntN(3) == 0 {
		ms := g.hmacMutations(g.seedHMAC[g.r.IntN(len(g.seedHMAC))])
		return ms[g.r.IntN(len(ms))]
	}
	return auth.HMACRequest{
		RemoteAddr: addrs[g.r.IntN(len(addrs))],
		AccessKey:  g.str(),
		Content:    g.bytes(64),
		MAC:        g.bytes(40),
	}
}

func (g *gen) hmacRequests(n int) []auth.HMACRequest {
	out := make([]auth.HMACRequest, n)
	for i := range out {
		out[i] = g.hmacRequest()
	}
	return out
}

// hmacMutations returns variants of a valid credential.
func (g *gen) hmacMutations(seed auth.HMACRequest) []auth.HMACRequest {
	var out []auth.HMACRequest
	add := func(f func(r *auth.HMACRequest)) {
		r := cloneHMAC(seed)
		f(&r)
		out = append(out, r)
	}
	add(func(r *auth.HMACRequest) { r.AccessKey = "" })
	add(func(r *auth.HMACRequest) { r.AccessKey += "x" })
	add(func(r *auth.HMACRequest) { r.AccessKey = g.str() })
	add(func(r *auth.HMACRequest) { r.Content = append(r.Content, 'x') })
	add(func(r *auth.HMACRequest) { r.Content = nil })
	add(func(r *auth.HMACRequest) { r.MAC = nil })
	add(func(r *auth.HMACRequest) { r.MAC = g.bytes(40) })
	add(func(r *auth.HMACRequest) {
		if len(r.MAC) > 0 {
			r.MAC[g.r.IntN(len(r.MAC))] ^= 1
		}
	})
	add(func(r *auth.HMACRequest) { r.MAC = append(r.MAC, 0) })
	add(func(r *auth.HMACRequest) { r.RemoteAddr = addrs[g.r.IntN(len(addrs))] })
	return out
}
