package authtest

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/quivermq/quiver/core/auth"
)

// borrowedResources are what CheckBorrowedInputs authorizes each accepted
// principal on.
var borrowedResources = []struct {
	res auth.Resource
	act auth.Action
}{
	{auth.Resource{Name: "authtest-topic"}, auth.Pub},
	{auth.Resource{Name: "authtest-topic"}, auth.Sub},
	{auth.Resource{Name: "%RETRY%authtest-group", IsGroup: true}, auth.Sub},
	{auth.Resource{}, auth.Admin},
}

// CheckBorrowedInputs checks the ownership rule of auth.Request: an
// Authenticator (and its Checker) keeps nothing of req.ExtFields or
// req.Body once it returns, because the router gives the map back to its
// pool and the frame the body aliases back to the transport, to be filled
// by the next request. It decides every request of reqs (and variants of
// them) on fresh copies, then again with one map and one body buffer
// reused from request to request and scribbled over between them, as the
// pool does, and once more on fresh copies: a plugin whose decisions
// change kept a borrowed map or body. Decisions are Authenticate's
// principal and error, Check's, and Authorize's on a few resources.
//
// Stateful plugins are fine as long as what they keep is their own: the
// requests are decided twice before the reference is taken.
func CheckBorrowedInputs(t testing.TB, an auth.Authenticator, az auth.Authorizer, reqs []auth.Request) {
	t.Helper()
	o := options{requests: reqs}
	g := newGen(7, o)
	probes := append([]auth.Request(nil), reqs...)
	for _, seed := range reqs {
		probes = append(probes, g.mutations(seed)...)
	}
	probes = append(probes, g.requests(32)...)

	checker, _ := an.(auth.Checker)
	decide := func(req auth.Request) string {
		var out string
		p, pv, err := safeAuthenticate(an, req)
		switch {
		case pv != nil:
			return fmt.Sprintf("Authenticate panicked: %v", pv)
		case err != nil:
			out = "Authenticate refused"
		default:
			out = fmt.Sprintf("Authenticate accepted %+v", p)
			for _, rc := range borrowedResources {
				if pv, err := safeAuthorize(az, p, rc.res, rc.act); pv != nil || err != nil {
					out += fmt.Sprintf(", denied %d on %q", rc.act, rc.res.Name)
				}
			}
		}
		if checker != nil {
			var cp auth.Principal
			var cerr error
			func() {
				defer func() {
					if r := recover(); r != nil {
						cerr = fmt.Errorf("panicked: %v", r)
					}
				}()
				cp, cerr = checker.Check(context.Background(), req)
			}()
			if cerr != nil {
				out += "; Check refused"
			} else {
				out += fmt.Sprintf("; Check accepted %+v", cp)
			}
		}
		return out
	}
	pass := func() []string {
		out := make([]string, len(probes))
		for i, req := range probes {
			out[i] = decide(clone(req))
		}
		return out
	}
	pass()
	want := pass()

	// The pool: one map and one buffer, refilled for every request and
	// scribbled over once the call returned.
	pooled := map[string]string{}
	size := 0
	for _, req := range probes {
		size = max(size, len(req.Body))
	}
	frame := make([]byte, 0, size) // never reallocated: a kept body sees every scribble
	scribble := func() {
		for k := range pooled {
			pooled[k] = "scribbled"
		}
		for _, k := range g.keys {
			pooled[k] = "scribbled"
		}
		for i := range frame[:cap(frame)] {
			frame[:cap(frame)][i] = 0xEE
		}
	}
	for i, req := range probes {
		r := req
		if req.ExtFields != nil {
			clear(pooled)
			maps.Copy(pooled, req.ExtFields)
			r.ExtFields = pooled
		}
		if req.Body != nil {
			frame = append(frame[:0], req.Body...)
			r.Body = frame
		}
		if got := decide(r); got != want[i] {
			t.Errorf("request %d (code %d, ext %q) decided on a reused (pooled) map and body: %s; on its own copy: %s: the plugin kept an earlier request's ExtFields or Body", i, req.Code, req.ExtFields, got, want[i])
		}
		scribble()
	}
	for i, got := range pass() {
		if got != want[i] {
			t.Errorf("request %d (code %d, ext %q) after the caller reused the maps and bodies of earlier requests: %s; before: %s: the plugin kept a borrowed ExtFields map or Body", i, probes[i].Code, probes[i].ExtFields, got, want[i])
		}
	}
}
