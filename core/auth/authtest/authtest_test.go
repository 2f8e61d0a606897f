package authtest_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/auth/authtest"
	"github.com/quivermq/quiver/internal/racebuild"
)

const secret = "s3cr3t-value"

// broken authenticators, each violating one rule of the contract.
type (
	plainErr struct{ auth.AllowAll }
	leaky    struct{ auth.AllowAll }
	panicky  struct{ auth.AllowAll }
	racy     struct{ n map[int32]int }
	flaky    struct {
		mu sync.Mutex
		n  int
	}
	badAuthz    struct{ auth.AllowAll }
	rejectsSeed struct{ auth.AllowAll }
	// hmacPlainErr refuses 5.x credentials with an unwrapped error.
	hmacPlainErr struct{ auth.AllowAll }
	// hmacKeeps trusts an access key's first MAC and then compares later
	// ones with it, keeping the borrowed slice instead of a copy.
	hmacKeeps struct {
		auth.AllowAll
		mu   sync.Mutex
		macs map[string][]byte
	}
)

var goodHMAC = auth.HMACRequest{RemoteAddr: "127.0.0.1:1", AccessKey: "ak", Content: []byte("20250309T195445Z"), MAC: []byte("mac")}

func (hmacPlainErr) AuthenticateHMAC(context.Context, auth.HMACRequest) (auth.Principal, error) {
	return auth.Principal{}, errors.New("nope")
}

func (h *hmacKeeps) AuthenticateHMAC(_ context.Context, req auth.HMACRequest) (auth.Principal, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	mac, ok := h.macs[req.AccessKey]
	if !ok {
		h.macs[req.AccessKey] = req.MAC // the bug: req.MAC is borrowed
		return auth.Principal{AccessKey: req.AccessKey}, nil
	}
	if !bytes.Equal(mac, req.MAC) {
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	return auth.Principal{AccessKey: req.AccessKey}, nil
}

func (plainErr) Authenticate(context.Context, auth.Request) (auth.Principal, error) {
	return auth.Principal{}, errors.New("nope")
}

func (leaky) Authenticate(_ context.Context, r auth.Request) (auth.Principal, error) {
	return auth.Principal{}, errors.Join(auth.ErrUnauthenticated, errors.New("expected signature with "+secret))
}

func (panicky) Authenticate(_ context.Context, r auth.Request) (auth.Principal, error) {
	if r.ExtFields == nil {
		panic("nil map")
	}
	return auth.Principal{}, nil
}

func (r *racy) Authenticate(_ context.Context, req auth.Request) (auth.Principal, error) {
	r.n[req.Code]++ // unsynchronized
	return auth.Principal{}, nil
}

func (*racy) Authorize(context.Context, auth.Principal, auth.Resource, auth.Action) error { return nil }

func (f *flaky) Authenticate(context.Context, auth.Request) (auth.Principal, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if f.n%2 == 0 {
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	return auth.Principal{}, nil
}

func (*flaky) Authorize(context.Context, auth.Principal, auth.Resource, auth.Action) error {
	return nil
}

func (badAuthz) Authorize(context.Context, auth.Principal, auth.Resource, auth.Action) error {
	return auth.ErrUnauthenticated
}

func (rejectsSeed) Authenticate(context.Context, auth.Request) (auth.Principal, error) {
	return auth.Principal{}, auth.ErrUnauthenticated
}

var broken = map[string]func() (auth.Authenticator, auth.Authorizer){
	"plain-error":  func() (auth.Authenticator, auth.Authorizer) { return plainErr{}, auth.AllowAll{} },
	"leaks-secret": func() (auth.Authenticator, auth.Authorizer) { return leaky{}, auth.AllowAll{} },
	"panics":       func() (auth.Authenticator, auth.Authorizer) { return panicky{}, auth.AllowAll{} },
	"racy": func() (auth.Authenticator, auth.Authorizer) {
		r := &racy{n: map[int32]int{}}
		return r, r
	},
	"not-deterministic":  func() (auth.Authenticator, auth.Authorizer) { f := &flaky{}; return f, f },
	"authorize-sentinel": func() (auth.Authenticator, auth.Authorizer) { return auth.AllowAll{}, badAuthz{} },
	"rejects-seed":       func() (auth.Authenticator, auth.Authorizer) { return rejectsSeed{}, auth.AllowAll{} },
	"keeps-borrowed": func() (auth.Authenticator, auth.Authorizer) {
		s := newSessions(false)
		return s, s
	},
	"hmac-plain-error": func() (auth.Authenticator, auth.Authorizer) { return hmacPlainErr{}, auth.AllowAll{} },
	"hmac-keeps-borrowed": func() (auth.Authenticator, auth.Authorizer) {
		return &hmacKeeps{macs: map[string][]byte{}}, auth.AllowAll{}
	},
}

// TestBrokenHelper runs the suite on one broken plugin when started by
// TestSuiteCatchesBrokenPlugins; it is skipped otherwise.
func TestBrokenHelper(t *testing.T) {
	name := os.Getenv("AUTHTEST_BROKEN")
	if name == "" {
		t.Skip("helper")
	}
	open := broken[name]
	if name == "keeps-borrowed" {
		// Seeds it accepts: only the ownership rule is broken.
		authtest.Run(t, func(*testing.T) (auth.Authenticator, auth.Authorizer) { return open() },
			authtest.Rounds(100), authtest.WithRequests(sessionSeeds[:2]...))
		return
	}
	authtest.Run(t, func(*testing.T) (auth.Authenticator, auth.Authorizer) { return open() },
		authtest.Secrets(secret), authtest.Rounds(100),
		authtest.WithRequests(auth.Request{Code: 10, ExtFields: map[string]string{"topic": "T"}}),
		authtest.WithHMACRequests(goodHMAC))
}

func TestSuiteCatchesBrokenPlugins(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child test processes")
	}
	tests := []struct {
		give string
		want string
	}{
		{give: "plain-error", want: "wraps neither auth.ErrUnauthenticated nor auth.ErrDenied"},
		{give: "leaks-secret", want: "contains a configured secret"},
		{give: "panics", want: "Authenticate panicked"},
		{give: "racy", want: "DATA RACE"},
		{give: "not-deterministic", want: "the same request gave"},
		{give: "authorize-sentinel", want: "does not wrap auth.ErrDenied"},
		{give: "rejects-seed", want: "AcceptsGivenRequests"},
		{give: "keeps-borrowed", want: "--- FAIL: TestBrokenHelper/BorrowedInputs"},
		{give: "hmac-plain-error", want: "does not wrap auth.ErrUnauthenticated"},
		{give: "hmac-keeps-borrowed", want: "--- FAIL: TestBrokenHelper/HMAC/BorrowedInputs"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			if tt.give == "racy" && !racebuild.Enabled {
				t.Skip("needs -race")
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), "AUTHTEST_BROKEN="+tt.give)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "the suite passed a broken plugin:\n%s", out)
			assert.Contains(t, string(out), tt.want)
		})
	}
}

func TestSuitePassesAllowAll(t *testing.T) {
	authtest.Run(t, func(*testing.T) (auth.Authenticator, auth.Authorizer) { return auth.AllowAll{}, auth.AllowAll{} },
		authtest.Secrets(secret), authtest.Rounds(50))
}
