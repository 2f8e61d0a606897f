// Package acl is RocketMQ's ACL 1.0 ("plain ACL") for Quiver: requests are
// signed by the client with an AccessKey/SecretKey pair (the official
// clients' Credentials / AclClientRPCHook) and checked against accounts in
// a YAML file in RocketMQ's plain_acl.yml layout:
//
//	globalWhiteRemoteAddresses:
//	  - 10.10.103.*
//	  - 192.168.0.0/16
//	accounts:
//	  - accessKey: RocketMQ
//	    secretKey: 12345678
//	    whiteRemoteAddress: 192.168.0.*
//	    admin: false
//	    defaultTopicPerm: DENY
//	    defaultGroupPerm: SUB
//	    topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
//	    groupPerms: [groupA=DENY, groupB=PUB|SUB, groupC=SUB]
//
// # Checks
//
// Authenticate follows Java's PlainPermissionManager.validate:
//
//  1. a client IP in globalWhiteRemoteAddresses is trusted: no further check;
//  2. no AccessKey: "No accessKey is configured"; an unknown one: "No acl
//     config for <ak>" (both auth.ErrUnauthenticated);
//  3. a client IP matching the account's whiteRemoteAddress is trusted for
//     that account (no signature, no permission check);
//  4. Signature must be Base64(HMAC-SHA1(secretKey, Content)), compared in
//     constant time. The Go client's variant, which leaves SecurityToken
//     out of the content (GoClientContent), is accepted too.
//
// Authorize then checks each Need of the request (Required, one table) like
// Java's checkPerm: admin-only codes need admin: true; an admin account
// with no topicPerms and no groupPerms passes every resource check; a
// resource the account does not list gets defaultTopicPerm or
// defaultGroupPerm (default DENY); Java's checkPermission decides; PUB on
// RMQ_SYS_TRACE_TOPIC is always allowed (message traces).
//
// # Answers
//
// The Interceptor answers every refusal, unauthenticated or denied, with
// NO_PERMISSION (16) and a remark that names the reason, the missing
// permission and resource and the access key, never a secret:
//
//	acl: no permission: PUB on topic T for accessKey ak
//	acl: Check signature failed for accessKey=ak
//
// Java answers SYSTEM_ERROR (1). The official Go client treats 1 and 16
// alike (producer.needRetryCode retries both, then fails with "CODE: 16,
// DESC: <remark>"; a pull with either code fails with "unknown Response
// Code: 16, remark: ..."), so 16 changes nothing in its control flow and
// tells the user it is a permission problem. Java clients also surface the
// code and remark in MQBrokerException.
//
// # Reloading
//
// The file is polled every reload_interval (mtime and size, then a SHA-256
// of the content). A file that does not load (YAML error, bad pattern,
// short secret, empty file, missing) keeps the last good rules and is
// logged once per distinct content at Error, without secrets. The file
// must load when the plugin opens.
//
// # Lifetime
//
// New and Provider.Open return an *ACL that owns a polling goroutine. It
// implements io.Closer: the owner (the module that opened the plugin) must
// Close it on stop. The Authenticator and Authorizer Open returns are the
// same *ACL, so either can be asserted to io.Closer.
package acl

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

// ID is the plugin ID.
const ID = "acl"

// Error is a refusal. It wraps auth.ErrUnauthenticated or auth.ErrDenied;
// its message is meant for the client (the response remark) and never
// holds a secret.
type Error struct {
	kind error
	msg  string
}

func (e *Error) Error() string { return "acl: " + e.msg }

// Unwrap returns auth.ErrUnauthenticated or auth.ErrDenied.
func (e *Error) Unwrap() error { return e.kind }

func unauthenticated(format string, args ...any) error {
	return &Error{kind: auth.ErrUnauthenticated, msg: fmt.Sprintf(format, args...)}
}

func denied(format string, args ...any) error {
	return &Error{kind: auth.ErrDenied, msg: fmt.Sprintf(format, args...)}
}

// ACL authenticates and authorizes requests against an ACL file. It is
// safe for concurrent use.
type ACL struct {
	ak, sk string
	file   string
	log    *slog.Logger

	signMode    string        // Config.StrictSignatures
	window      time.Duration // Config.SignatureWindow
	strictWhite bool          // Config.StrictWhiteList
	nonces      *nonceCache
	now         func() time.Time

	rules atomic.Pointer[rules]
	// version counts installed rules (RocketMQ's DataVersion).
	version atomic.Int64
	verTime atomic.Int64 // Unix ms of the last install

	adminMu sync.Mutex // serializes edits of the file (admin.go)

	mu      sync.Mutex // serializes Reload
	seen    fileStamp  // the last content looked at, good or broken
	lastErr error      // why seen did not load; nil when it did

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

var (
	_ auth.Authenticator = (*ACL)(nil)
	_ auth.Authorizer    = (*ACL)(nil)
	_ auth.Checker       = (*ACL)(nil)
	_ io.Closer          = (*ACL)(nil)
)

type fileStamp struct {
	ok      bool
	modTime time.Time
	size    int64
	readAt  time.Time
	hash    [sha256.Size]byte
}

// New loads cfg.File and, when cfg.ReloadInterval > 0, starts polling it.
// Close stops the polling.
func New(cfg *Config, deps auth.Deps) (*ACL, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("acl: %w", err)
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &ACL{file: cfg.File, ak: cfg.AccessKey, sk: cfg.SecretKey, log: log, done: make(chan struct{}),
		signMode: cfg.StrictSignatures, window: cfg.SignatureWindow, strictWhite: cfg.StrictWhiteList,
		nonces: newNonceCache(2*cfg.SignatureWindow, cfg.NonceCacheSize), now: time.Now}
	if _, err := a.load(); err != nil {
		return nil, err
	}
	log.Info("acl: rules loaded", "file", a.file, "accounts", len(a.rules.Load().accounts), "reload_interval", cfg.ReloadInterval,
		"strict_signatures", a.signMode, "strict_white_list", a.strictWhite)
	a.logWhiteLists(a.rules.Load()) // whitelist.go
	if cfg.ReloadInterval <= 0 {
		close(a.done)
		a.cancel = func() {}
		return a, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	go a.poll(ctx, cfg.ReloadInterval)
	return a, nil
}

func (a *ACL) poll(ctx context.Context, every time.Duration) {
	defer close(a.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = a.Reload() // Reload logs its errors.
		}
	}
}

// Close stops the polling goroutine and waits for it. The rules stay
// usable. Close is idempotent.
func (a *ACL) Close() error {
	a.once.Do(func() {
		a.cancel()
		<-a.done
	})
	return nil
}

// Reload checks the file and, when its content changed and loads, installs
// the new rules. A changed file that does not load keeps the current
// rules; the error is logged at Error (once per distinct content or
// error) and returned. An unchanged file returns what its last look
// returned: nil if it loaded, its error if it did not.
func (a *ACL) Reload() error {
	changed, err := a.load()
	if err != nil {
		if changed {
			a.log.Error("acl: keeping the last good rules", "err", err)
		}
		return err
	}
	if changed {
		a.log.Info("acl: rules reloaded", "file", a.file, "accounts", len(a.rules.Load().accounts))
		a.logWhiteLists(a.rules.Load())
	}
	return nil
}

// load reads the file if it may have changed. changed reports a content
// (or error) not seen before.
func (a *ACL) load() (changed bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	fi, err := os.Stat(a.file)
	if err != nil {
		return a.failed(fileStamp{}, fmt.Errorf("acl: %w", err))
	}
	now := time.Now()
	prev := a.seen
	// Same mtime and size: unchanged, unless the file was modified so soon
	// before it was read that a second write in the same mtime tick could
	// hide (git's "racy" check).
	if prev.ok && fi.ModTime().Equal(prev.modTime) && fi.Size() == prev.size && prev.readAt.Sub(prev.modTime) > 2*time.Second {
		return false, a.lastErr
	}
	data, err := os.ReadFile(a.file)
	if err != nil {
		return a.failed(fileStamp{}, fmt.Errorf("acl: %w", err))
	}
	st := fileStamp{ok: true, modTime: fi.ModTime(), size: fi.Size(), readAt: now, hash: sha256.Sum256(data)}
	if prev.ok && st.hash == prev.hash {
		a.seen = st
		return false, a.lastErr
	}
	r, err := parseRules(data)
	if err != nil {
		return a.failed(st, fmt.Errorf("acl: %s: %w", a.file, err))
	}
	a.seen = st
	a.lastErr = nil
	a.rules.Store(r)
	a.version.Add(1)
	a.verTime.Store(time.Now().UnixMilli())
	return true, nil
}

func (a *ACL) failed(st fileStamp, err error) (bool, error) {
	changed := a.lastErr == nil || a.lastErr.Error() != err.Error() || st.hash != a.seen.hash || st.ok != a.seen.ok
	a.seen = st
	a.lastErr = err
	return changed, err
}

// Authenticate implements auth.Authenticator (see the package comment for
// the order of the checks). A strict signature's nonce is consumed.
func (a *ACL) Authenticate(_ context.Context, req auth.Request) (auth.Principal, error) {
	return a.authenticate(a.rules.Load(), req, true, false)
}

// authenticate checks req against r. consume records a strict signature's
// nonce (false for a request accepted before: AuthorizeAdmin); noBypass
// ignores the white lists (auth.acl.strict_white_list, for admin codes).
func (a *ACL) authenticate(r *rules, req auth.Request, consume, noBypass bool) (auth.Principal, error) {
	ak := req.ExtFields[KeyAccessKey]
	ip, hasIP := remoteIP(req.RemoteAddr)
	if !noBypass && hasIP && r.global(ip) {
		// No identity is checked, so none is claimed: AccessKey stays
		// empty even when the request carries one.
		return auth.Principal{Trusted: true}, nil
	}
	if ak == "" {
		return auth.Principal{}, unauthenticated("No accessKey is configured")
	}
	acct, ok := r.accounts[ak]
	if !ok {
		return auth.Principal{}, unauthenticated("No acl config for %s", ak)
	}
	if !noBypass && hasIP && acct.white(ip) {
		return auth.Principal{AccessKey: ak, Admin: acct.admin, Cluster: acct.cluster, Trusted: true}, nil
	}
	if err := a.verify(acct, req, consume); err != nil { // strict.go
		return auth.Principal{}, err
	}
	return auth.Principal{AccessKey: ak, Admin: acct.admin, Cluster: acct.cluster}, nil
}

// Authorize implements auth.Authorizer. Trusted principals (white-listed
// addresses) pass. res.Name of a group is %RETRY%<group>; a name with that
// prefix is a group whatever IsGroup says, as in Java.
func (a *ACL) Authorize(_ context.Context, p auth.Principal, res auth.Resource, act auth.Action) error {
	return a.authorize(a.rules.Load(), p, Need{Resource: res, Action: act}, 0)
}

func (a *ACL) authorize(r *rules, p auth.Principal, n Need, code int32) error {
	if p.Trusted {
		return nil
	}
	acct, ok := r.accounts[p.AccessKey]
	if !ok {
		return denied("no acl config for accessKey %s", p.AccessKey)
	}
	if n.Action == auth.Admin {
		if acct.admin {
			return nil
		}
		if code != 0 {
			return denied("no permission: admin required for request code %d (%s) for accessKey %s", code, CodeName(code), p.AccessKey)
		}
		return denied("no permission: admin required for accessKey %s", p.AccessKey)
	}
	name := n.Resource.Name
	if n.Resource.IsGroup && !isRetry(name) {
		name = retryPrefix + name
	}
	if name == traceTopic && n.Action == auth.Pub {
		return nil
	}
	if acct.admin && acct.perms == nil {
		return nil
	}
	owned, listed := acct.perms[name]
	if !listed {
		owned = acct.defaultTopic
		if isRetry(name) {
			owned = acct.defaultGroup
		}
	}
	if n.Action == 0 || !CheckPermission(byte(n.Action), owned) {
		need := Need{Resource: auth.Resource{Name: name, IsGroup: isRetry(name)}, Action: n.Action}
		return denied("no permission: %s for accessKey %s", need, p.AccessKey)
	}
	return nil
}

func isRetry(name string) bool {
	return len(name) >= len(retryPrefix) && name[:len(retryPrefix)] == retryPrefix
}

// Check implements auth.Checker: it authenticates req and decides by its
// row of the permission table (table.go, checkRule). The error is an
// *Error.
func (a *ACL) Check(ctx context.Context, req auth.Request) (auth.Principal, error) {
	r := a.rules.Load()
	noBypass := a.strictWhite && a.whiteListed(r, req) && isAdminRequest(req) // whitelist.go
	p, err := a.authenticate(r, req, true, noBypass)
	if err != nil {
		if e := (*Error)(nil); errors.As(err, &e) && noBypass {
			e.msg += " (auth.acl.strict_white_list: admin requests from white-listed addresses are signed and checked)"
		}
		return p, err
	}
	return p, a.checkRule(ctx, r, p, req)
}

// Interceptor returns the remoting interceptor that checks every request
// with Check and answers a refusal with NO_PERMISSION (16) and the
// refusal's message as the remark. Add it to the router of the broker or
// name server: router.Use(acl.Interceptor()).
func (a *ACL) Interceptor() remoting.Interceptor {
	return func(ctx context.Context, peer *remoting.Peer, req *remoting.Command) *remoting.Command {
		var remote string
		if peer != nil {
			remote = peer.RemoteAddr()
		}
		areq := auth.Request{Code: req.Code, RemoteAddr: remote, ExtFields: req.ExtFields, Body: req.Body}
		p, err := a.Check(ctx, areq)
		if err == nil {
			if body, ok := a.NarrowRequest(ctx, p, areq); ok {
				req.Body = body // a new slice; the borrowed one is not written
			}
			return nil
		}
		a.log.Debug("acl: refused", "code", req.Code, "remote", remote, "err", err)
		return remoting.NewResponse(req, remoting.NoPermission, err.Error())
	}
}

// SignRequest signs one of this process's own outgoing requests with the
// configured access_key/secret_key (ACL 1.0: it does not know the code);
// it reports false when none are set.
func (a *ACL) SignRequest(ext map[string]string, body []byte) bool {
	if a.ak == "" {
		return false
	}
	Sign(ext, body, a.ak, a.sk, "")
	return true
}

// SignCode signs one of this process's own requests with a strict
// signature bound to code, or with ACL 1.0 when auth.acl.strict_signatures is
// off; it reports false when no credentials are set.
func (a *ACL) SignCode(code int32, ext map[string]string, body []byte) bool {
	if a.ak == "" {
		return false
	}
	if a.signMode == SignOff {
		Sign(ext, body, a.ak, a.sk, "")
		return true
	}
	SignStrict(code, ext, body, a.ak, a.sk, "", a.now())
	return true
}

var (
	_ auth.Signer        = (*ACL)(nil)
	_ auth.RequestSigner = (*ACL)(nil)
)

// Provider is the ACL descriptor registered with the kernel.
type Provider = auth.Descriptor[Config]

// NewProvider returns the provider (auth.Define). Its Open returns the same
// *ACL twice, which the caller must Close (io.Closer) when it stops.
func NewProvider() *Provider { return auth.Define(ID, NewConfig, openACL) }

func openACL(_ context.Context, c *Config, deps auth.Deps) (auth.Authenticator, auth.Authorizer, error) {
	if deps.Logger != nil {
		deps.Logger = deps.Logger.With("component", "auth."+ID)
	}
	a, err := New(c, deps)
	if err != nil {
		return nil, nil, err
	}
	return a, a, nil
}
