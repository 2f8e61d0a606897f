// Package authtest is the conformance suite of the auth seam, in the style
// of testing/fstest.TestFS and x/net/nettest.TestConn: an auth plugin is done
// when Run passes on it.
//
// The suite checks the generic contract, not any plugin's rules:
//
//   - Authenticate and Authorize never panic, whatever the request code,
//     extFields, body or remote address (nil maps, binary values, broken
//     JSON, huge fields);
//   - every error Authenticate returns wraps auth.ErrUnauthenticated or
//     auth.ErrDenied, and every error Authorize returns wraps auth.ErrDenied;
//   - no error message contains one of the secrets handed to the suite with
//     Secrets (the plugin's configured secret keys);
//   - Authenticate and Authorize are safe for concurrent use (run the suite
//     with -race);
//   - the same request gives the same answer twice in a row;
//   - an Authenticator that implements auth.Checker keeps the same rules
//     in Check;
//   - nothing of a request's ExtFields map or Body is kept after a call
//     returns (CheckBorrowedInputs): the map is pooled and the body aliases
//     a recycled network frame (see auth.Request);
//   - an Authenticator that implements auth.HMACAuthenticator (the 5.x
//     gRPC credential) keeps the same contract in AuthenticateHMAC: no
//     panic, refusals wrap auth.ErrUnauthenticated, no secret in a
//     message, the same answer twice, safe for concurrent use, and nothing
//     kept of Content or MAC (WithHMACRequests gives accepted seeds).
//
// Requests (WithRequests) are well-formed requests the plugin accepts; the
// suite checks that they pass, then mutates them (drops fields, changes
// values, the body and the signature) and checks the contract on every
// variant, so the paths behind a successful lookup are exercised too.
package authtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/quivermq/quiver/core/auth"
)

// Opener returns a fresh Authenticator and Authorizer (often the same
// value) for one subtest. Cleanup belongs in t.Cleanup.
type Opener func(t *testing.T) (auth.Authenticator, auth.Authorizer)

// Option tunes Run.
type Option func(*options)

type options struct {
	secrets  []string
	requests []auth.Request
	hmac     []auth.HMACRequest
	rounds   int
}

// Secrets lists strings that must never appear in an error message: the
// secret keys the plugin under test was configured with.
func Secrets(s ...string) Option {
	return func(o *options) { o.secrets = append(o.secrets, s...) }
}

// WithRequests adds requests the plugin under test accepts. The suite
// checks that Authenticate accepts each one and uses them as seeds for
// mutated requests.
func WithRequests(r ...auth.Request) Option {
	return func(o *options) { o.requests = append(o.requests, r...) }
}

// Rounds sets how many generated requests each subtest uses (default 400).
func Rounds(n int) Option { return func(o *options) { o.rounds = n } }

// Run runs the conformance suite as subtests of t.
func Run(t *testing.T, open Opener, opts ...Option) {
	o := options{rounds: 400}
	for _, opt := range opts {
		opt(&o)
	}
	t.Run("AcceptsGivenRequests", func(t *testing.T) { acceptsGivenRequests(t, open, o) })
	t.Run("ArbitraryInput", func(t *testing.T) { arbitraryInput(t, open, o) })
	t.Run("ArbitraryPrincipals", func(t *testing.T) { arbitraryPrincipals(t, open, o) })
	t.Run("Checker", func(t *testing.T) { checkerRules(t, open, o) })
	t.Run("BorrowedInputs", func(t *testing.T) {
		an, az := open(t)
		CheckBorrowedInputs(t, an, az, o.requests)
	})
	t.Run("HMAC", func(t *testing.T) { runHMAC(t, open, o) })
	t.Run("MutatedRequests", func(t *testing.T) { mutatedRequests(t, open, o) })
	t.Run("Deterministic", func(t *testing.T) { deterministic(t, open, o) })
	t.Run("Concurrent", func(t *testing.T) { concurrent(t, open, o) })
}

// acceptsGivenRequests checks that Authenticate accepts every
// WithRequests request.
func acceptsGivenRequests(t *testing.T, open Opener, o options) {
	an, az := open(t)
	for i, req := range o.requests {
		p, err := authenticate(t, an, clone(req))
		if err != nil {
			t.Errorf("request %d (code %d): Authenticate: %v", i, req.Code, err)
			continue
		}
		// Authorize on an arbitrary resource must keep the contract.
		checkAuthorize(t, o, az, p, auth.Resource{Name: "authtest-topic"}, auth.Pub)
	}
}

// arbitraryInput checks the contract on generated requests and, where
// one passes, on Authorize over generated resources.
func arbitraryInput(t *testing.T, open Opener, o options) {
	an, az := open(t)
	g := newGen(1, o)
	for i := 0; i < o.rounds; i++ {
		req := g.request()
		p, err := authenticate(t, an, req)
		checkAuthenticateErr(t, o, req, err)
		if err == nil {
			for _, res := range g.resources() {
				checkAuthorize(t, o, az, p, res, g.action())
			}
		}
	}
}

// arbitraryPrincipals checks Authorize on generated principals and
// resources, and on the zero values.
func arbitraryPrincipals(t *testing.T, open Opener, o options) {
	_, az := open(t)
	g := newGen(2, o)
	for i := 0; i < o.rounds; i++ {
		p := auth.Principal{AccessKey: g.str(), Admin: g.r.IntN(2) == 0}
		for _, res := range g.resources() {
			checkAuthorize(t, o, az, p, res, g.action())
		}
	}
	// The zero values.
	checkAuthorize(t, o, az, auth.Principal{}, auth.Resource{}, 0)
}

// checkerRules checks auth.Checker's contract, when the Authenticator has
// it, on generated and mutated requests.
func checkerRules(t *testing.T, open Opener, o options) {
	an, _ := open(t)
	c, ok := an.(auth.Checker)
	if !ok {
		t.Skip("the Authenticator does not implement auth.Checker")
	}
	g := newGen(6, o)
	reqs := append(g.requests(o.rounds), o.requests...)
	for _, seed := range o.requests {
		reqs = append(reqs, g.mutations(seed)...)
	}
	for _, req := range reqs {
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("Check panicked on code %d, ext %q: %v", req.Code, req.ExtFields, r)
				}
			}()
			_, err = c.Check(context.Background(), req)
		}()
		if err != nil {
			if !errors.Is(err, auth.ErrUnauthenticated) && !errors.Is(err, auth.ErrDenied) {
				t.Errorf("Check(code %d): error %q wraps neither auth.ErrUnauthenticated nor auth.ErrDenied", req.Code, err)
			}
			checkSecrets(t, o, "Check", err)
		}
	}
}

// mutatedRequests checks the contract on variants of the WithRequests requests.
func mutatedRequests(t *testing.T, open Opener, o options) {
	an, _ := open(t)
	g := newGen(3, o)
	for _, seed := range o.requests {
		for _, req := range g.mutations(seed) {
			_, err := authenticate(t, an, req)
			checkAuthenticateErr(t, o, req, err)
		}
	}
}

// deterministic checks that the same request gets the same answer twice.
func deterministic(t *testing.T, open Opener, o options) {
	an, _ := open(t)
	g := newGen(4, o)
	reqs := append(g.requests(o.rounds/4), o.requests...)
	for _, req := range reqs {
		p1, err1 := authenticate(t, an, clone(req))
		p2, err2 := authenticate(t, an, clone(req))
		if (err1 == nil) != (err2 == nil) || p1 != p2 {
			t.Errorf("code %d: the same request gave (%+v, %v) then (%+v, %v)", req.Code, p1, err1, p2, err2)
		}
	}
}

// concurrent calls Authenticate and Authorize from 8 goroutines at once
// (run with -race).
func concurrent(t *testing.T, open Opener, o options) {
	an, az := open(t)
	g := newGen(5, o)
	reqs := append(g.requests(64), o.requests...)
	ress := g.resources()
	inParallel(t, 8, 4*len(reqs), func(w, i int) string {
		req := clone(reqs[(i*7+w)%len(reqs)])
		p, pv, err := safeAuthenticate(an, req)
		switch {
		case pv != nil:
			return fmt.Sprintf("concurrent Authenticate panicked: %v", pv)
		case err != nil && !errors.Is(err, auth.ErrUnauthenticated) && !errors.Is(err, auth.ErrDenied):
			return fmt.Sprintf("concurrent Authenticate: %v wraps neither sentinel", err)
		case err != nil:
			return ""
		}
		pv, err = safeAuthorize(az, p, ress[i%len(ress)], auth.Sub)
		switch {
		case pv != nil:
			return fmt.Sprintf("concurrent Authorize panicked: %v", pv)
		case err != nil && !errors.Is(err, auth.ErrDenied):
			return fmt.Sprintf("concurrent Authorize: %v does not wrap ErrDenied", err)
		}
		return ""
	})
}

// inParallel runs step(w, i) for i in [0, steps) on each of workers
// goroutines at once. A step returns "" or what went wrong, which ends
// its worker; the first failure of each worker is reported.
func inParallel(t *testing.T, workers, steps int, step func(w, i int) string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < steps; i++ {
				if msg := step(w, i); msg != "" {
					errs <- msg
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// authenticate calls Authenticate, turning a panic into a test failure.
func authenticate(t *testing.T, an auth.Authenticator, req auth.Request) (auth.Principal, error) {
	t.Helper()
	p, pv, err := safeAuthenticate(an, req)
	if pv != nil {
		t.Errorf("Authenticate panicked on code %d, ext %q, %d-byte body, addr %q: %v", req.Code, req.ExtFields, len(req.Body), req.RemoteAddr, pv)
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	return p, err
}

// safeAuthorize calls Authorize and returns what it panicked with.
func safeAuthorize(az auth.Authorizer, p auth.Principal, res auth.Resource, act auth.Action) (panicked any, err error) {
	defer func() { panicked = recover() }()
	return nil, az.Authorize(context.Background(), p, res, act)
}

// safeAuthenticate calls Authenticate and returns what it panicked with.
func safeAuthenticate(an auth.Authenticator, req auth.Request) (p auth.Principal, panicked any, err error) {
	defer func() { panicked = recover() }()
	p, err = an.Authenticate(context.Background(), req)
	return p, nil, err
}

func checkAuthenticateErr(t *testing.T, o options, req auth.Request, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if !errors.Is(err, auth.ErrUnauthenticated) && !errors.Is(err, auth.ErrDenied) {
		t.Errorf("Authenticate(code %d): error %q wraps neither auth.ErrUnauthenticated nor auth.ErrDenied", req.Code, err)
	}
	checkSecrets(t, o, "Authenticate", err)
}

func checkAuthorize(t *testing.T, o options, az auth.Authorizer, p auth.Principal, res auth.Resource, act auth.Action) {
	t.Helper()
	pv, err := safeAuthorize(az, p, res, act)
	if pv != nil {
		t.Errorf("Authorize(%+v, %+v, %d) panicked: %v", p, res, act, pv)
		return
	}
	if err == nil {
		return
	}
	if !errors.Is(err, auth.ErrDenied) {
		t.Errorf("Authorize(%+v, %+v, %d): error %q does not wrap auth.ErrDenied", p, res, act, err)
	}
	checkSecrets(t, o, "Authorize", err)
}

func checkSecrets(t *testing.T, o options, what string, err error) {
	t.Helper()
	msg := err.Error()
	for _, s := range o.secrets {
		if s != "" && strings.Contains(msg, s) {
			t.Errorf("%s: error message %q contains a configured secret", what, msg)
		}
	}
}

func clone(r auth.Request) auth.Request {
	if r.ExtFields != nil {
		r.ExtFields = maps.Clone(r.ExtFields)
	}
	if r.Body != nil {
		r.Body = append([]byte(nil), r.Body...)
	}
	return r
}

// gen produces deterministic arbitrary input. Secrets are never used as
// values: an error that echoes a client's own input is not a leak of the
// configured secret.
type gen struct {
	r        *rand.Rand
	keys     []string
	seed     []auth.Request
	seedHMAC []auth.HMACRequest
}

func newGen(seed uint64, o options) *gen {
	g := &gen{r: rand.New(rand.NewPCG(seed, 0x5eed)), seed: o.requests, seedHMAC: o.hmac}
	g.keys = []string{
		"AccessKey", "Signature", "SecurityToken", "_UNIQUE_KEY_QUERY",
		"topic", "group", "consumerGroup", "producerGroup", "a", "b",
		"queueId", "commitOffset", "", " ", "\x00", "é", "AccessKey ",
	}
	for _, r := range o.requests {
		for k := range r.ExtFields {
			g.keys = append(g.keys, k)
		}
	}
	return g
}

var codes = []int32{0, -1, 1 << 30, -1 << 31, 10, 11, 12, 14, 15, 17, 25, 34, 35, 36, 37, 38, 103, 105, 200, 207, 215, 216, 222, 310, 320, 324}

var addrs = []string{
	"", "garbage", ":", "127.0.0.1:10911", "127.0.0.1", "10.1.2.3:1", "192.168.1.7:65535",
	"[::1]:9876", "::1", "[fe80::1%eth0]:1", "[::ffff:10.0.0.1]:5", "999.1.1.1:1", "1.2.3.4:notaport",
	"[", "]:", "a:b:c", strings.Repeat("9", 300),
}

func (g *gen) str() string {
	switch g.r.IntN(8) {
	case 0:
		return ""
	case 1:
		return strings.Repeat("x", g.r.IntN(5000))
	case 2:
		b := make([]byte, g.r.IntN(40))
		for i := range b {
			b[i] = byte(g.r.IntN(256))
		}
		return string(b)
	case 3:
		return "%RETRY%" + g.short()
	case 4:
		return "RMQ_SYS_TRACE_TOPIC"
	default:
		return g.short()
	}
}

func (g *gen) short() string {
	const alpha = "abcAZ09_-%|=,.*{}:; "
	b := make([]byte, 1+g.r.IntN(12))
	for i := range b {
		b[i] = alpha[g.r.IntN(len(alpha))]
	}
	return string(b)
}

var bodies = [][]byte{
	nil, {}, []byte("{"), []byte("null"), []byte("[]"), []byte(`{"consumerDataSet":null}`),
	[]byte(`{"consumerDataSet":[{"groupName":"G","subscriptionDataSet":[{"topic":"T"},null]}]}`),
	[]byte(`{"consumerDataSet":[null,{"groupName":1}]}`), []byte(`{"consumerDataSet":{"x":1}}`),
	[]byte(`{"clientID":"x","producerDataSet":[{"groupName":"P"}],"consumerDataSet":[{"groupName":"","subscriptionDataSet":[{"topic":""}]}]}`),
	[]byte("\xff\xfe\x00"),
}

func (g *gen) body() []byte {
	if g.r.IntN(4) == 0 {
		b := make([]byte, g.r.IntN(2048))
		for i := range b {
			b[i] = byte(g.r.IntN(256))
		}
		return b
	}
	return bodies[g.r.IntN(len(bodies))]
}

func (g *gen) request() auth.Request {
	if len(g.seed) > 0 && g.r.IntN(3) == 0 {
		ms := g.mutations(g.seed[g.r.IntN(len(g.seed))])
		return ms[g.r.IntN(len(ms))]
	}
	req := auth.Request{
		Code:       codes[g.r.IntN(len(codes))],
		RemoteAddr: addrs[g.r.IntN(len(addrs))],
		Body:       g.body(),
	}
	if g.r.IntN(8) != 0 {
		req.ExtFields = map[string]string{}
		for n := g.r.IntN(10); n > 0; n-- {
			req.ExtFields[g.keys[g.r.IntN(len(g.keys))]] = g.str()
		}
	}
	return req
}

func (g *gen) requests(n int) []auth.Request {
	out := make([]auth.Request, n)
	for i := range out {
		out[i] = g.request()
	}
	return out
}

// mutations returns variants of a valid request.
func (g *gen) mutations(seed auth.Request) []auth.Request {
	var out []auth.Request
	add := func(f func(r *auth.Request)) {
		r := clone(seed)
		if r.ExtFields == nil {
			r.ExtFields = map[string]string{}
		}
		f(&r)
		out = append(out, r)
	}
	for k := range seed.ExtFields {
		add(func(r *auth.Request) { delete(r.ExtFields, k) })
		add(func(r *auth.Request) { r.ExtFields[k] += "x" })
		add(func(r *auth.Request) { r.ExtFields[k] = "" })
		add(func(r *auth.Request) { r.ExtFields[k] = g.str() })
	}
	add(func(r *auth.Request) { r.Body = append(r.Body, 'x') })
	add(func(r *auth.Request) { r.Body = g.body() })
	add(func(r *auth.Request) { r.ExtFields = nil })
	add(func(r *auth.Request) { r.Code = codes[g.r.IntN(len(codes))] })
	add(func(r *auth.Request) { r.RemoteAddr = addrs[g.r.IntN(len(addrs))] })
	add(func(r *auth.Request) { r.ExtFields["SecurityToken"] = g.short() })
	add(func(r *auth.Request) { r.ExtFields[g.keys[g.r.IntN(len(g.keys))]] = g.str() })
	return out
}

func (g *gen) resources() []auth.Resource {
	return []auth.Resource{
		{}, {Name: g.str()}, {Name: "%RETRY%" + g.short(), IsGroup: true},
		{Name: g.short(), IsGroup: true}, {Name: "RMQ_SYS_TRACE_TOPIC"},
	}
}

var actions = []auth.Action{0, auth.Pub, auth.Sub, auth.Admin, auth.Pub | auth.Sub, 1, 2, 255}

func (g *gen) action() auth.Action { return actions[g.r.IntN(len(actions))] }
