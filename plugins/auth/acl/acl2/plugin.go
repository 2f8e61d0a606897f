// Package acl2 is RocketMQ 5.3's ACL 2.0 for Quiver: users (username and
// password, used by clients as AccessKey and SecretKey; Super or Normal;
// enabled or disabled) and, per user, policies of entries that Allow or
// Deny actions (Pub, Sub, Create, Update, Delete, Get, List, All) on
// resources (Cluster, Namespace, Topic, Group: a literal name, a prefix
// "Topic:orders*", or "Topic:*" and "*"), optionally only from source
// addresses (sourceIps, addresses or CIDR blocks).
//
// # Authentication
//
// A request's AccessKey names a user; its Signature must be the ACL 1.0
// signature (HMAC-SHA1) with the user's password, as the official 4.x
// clients compute it; RocketMQ 5.x clients over gRPC sign as before
// (AuthenticateHMAC). A disabled user is refused.
//
// # Authorization
//
// What each request code needs comes from ACL 1.0's permission table
// (plugins/auth/acl, table.go): a topic needs Pub or Sub on Topic:<name>,
// a group Sub on Group:<name> (a %RETRY% topic is its group's); admin
// codes need Create, Update or Delete on the topic or group they change,
// Get on the cluster for reads of cluster data, Update on the cluster for
// other writes; the topic lists need List on topics; ACL 2.0's own codes
// (AUTH_*) Update on the cluster, Get for reads; a code not in the table
// is refused. A super user passes everything. Otherwise the user's Custom
// policy entries that match the resource, an action and the source
// address are taken, the Default policy's when none does; the most
// specific entry decides, Deny before Allow among equally specific ones;
// with none, default_decision (Deny).
//
// Every decision can be logged (auth.acl2.audit: deny, all, off) at Info
// (allowed) or Warn (denied) with the attribute audit=true, the user, the
// request code, the resource, the actions, the address, the decision and
// the entry that decided.
//
// # Storage
//
// Users and ACLs live in one JSON document (auth.acl2.file), written
// durably before a change is acknowledged and in force at once (Store).
// The broker answers the AUTH_* codes (wire.go) from it.
package acl2

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/plugins/auth/acl"
)

// ID is the plugin ID: auth.acl2.enabled turns it on.
const ID = "acl2"

// Audit modes (Config.Audit).
const (
	AuditDeny = "deny"
	AuditAll  = "all"
	AuditOff  = "off"
)

// Config is the section auth.acl2.
type Config struct {
	// File is the users and policies document. Required. Put it beside
	// the broker's metadata (<storage.dir>/config/acl2.json).
	File string `koanf:"file"`
	// DefaultDecision applies when no policy entry matches: Deny (the
	// default, as RocketMQ) or Allow.
	DefaultDecision string `koanf:"default_decision"`
	// Audit says which decisions are logged: deny (default), all, off.
	Audit string `koanf:"audit"`
	// Cluster is the name of the Cluster resource this server's admin
	// codes need (Cluster:<name>). Default DefaultCluster.
	Cluster string `koanf:"cluster"`
	// InitUsername and InitPassword create a Super user at start when the
	// store has no user of that name (RocketMQ's initAuthenticationUser):
	// the first administrator.
	InitUsername string `koanf:"init_username"`
	InitPassword string `koanf:"init_password"`
	// MigrateFromV1 is a plain_acl.yml whose accounts and white list are
	// copied into users and policies at start, once per account (a user
	// that exists is left alone): RocketMQ's migrateAuthFromV1Enabled.
	MigrateFromV1 string `koanf:"migrate_from_v1"`
	// AccessKey and SecretKey are the user this process signs its own
	// requests with (a slave's replication, a broker registering with name
	// servers that check): a Super user, or one allowed Update on the
	// cluster. Empty: requests go unsigned.
	AccessKey string `koanf:"access_key"`
	SecretKey string `koanf:"secret_key"`
}

// NewConfig returns the defaults.
func NewConfig() *Config {
	return &Config{DefaultDecision: string(Deny), Audit: AuditDeny, Cluster: "DefaultCluster"}
}

// Validate checks the values.
func (c *Config) Validate() error {
	var errs []error
	if c.File == "" {
		errs = append(errs, errors.New("file: the users and policies file is required (e.g. <storage.dir>/config/acl2.json)"))
	}
	if c.DefaultDecision == "" {
		c.DefaultDecision = string(Deny)
	}
	if _, err := ParseDecision(c.DefaultDecision); err != nil {
		errs = append(errs, fmt.Errorf("default_decision: %q is neither Allow nor Deny", c.DefaultDecision))
	}
	switch c.Audit {
	case "":
		c.Audit = AuditDeny
	case AuditDeny, AuditAll, AuditOff:
	default:
		errs = append(errs, fmt.Errorf("audit: %q is none of deny, all, off", c.Audit))
	}
	if c.Cluster == "" {
		c.Cluster = "DefaultCluster"
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		errs = append(errs, errors.New("access_key and secret_key go together"))
	}
	if (c.InitUsername == "") != (c.InitPassword == "") {
		errs = append(errs, errors.New("init_username and init_password go together"))
	}
	return errors.Join(errs...)
}

// Error is a refusal: it wraps auth.ErrUnauthenticated or auth.ErrDenied
// and never holds a secret.
type Error struct {
	kind error
	msg  string
}

func (e *Error) Error() string { return "acl2: " + e.msg }

// Unwrap returns auth.ErrUnauthenticated or auth.ErrDenied.
func (e *Error) Unwrap() error { return e.kind }

func unauthenticated(format string, args ...any) error {
	return &Error{kind: auth.ErrUnauthenticated, msg: fmt.Sprintf(format, args...)}
}

func denied(format string, args ...any) error {
	return &Error{kind: auth.ErrDenied, msg: fmt.Sprintf(format, args...)}
}

// Plugin authenticates and authorizes requests against a Store.
type Plugin struct {
	store   *Store
	def     Decision
	audit   string
	cluster string
	log     *slog.Logger
	ak, sk  string
}

var (
	_ auth.Authenticator     = (*Plugin)(nil)
	_ auth.Authorizer        = (*Plugin)(nil)
	_ auth.Checker           = (*Plugin)(nil)
	_ auth.HMACAuthenticator = (*Plugin)(nil)
	_ auth.Signer            = (*Plugin)(nil)
)

// SignRequest implements auth.Signer: it signs one of this process's own
// requests as access_key (RocketMQ's signature); false when none is set.
func (p *Plugin) SignRequest(ext map[string]string, body []byte) bool {
	if p.ak == "" {
		return false
	}
	acl.Sign(ext, body, p.ak, p.sk, "")
	return true
}

// New opens cfg.File, creates the init user and migrates cfg.MigrateFromV1.
func New(cfg *Config, deps auth.Deps) (*Plugin, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("acl2: %w", err)
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st, err := OpenStore(cfg.File)
	if err != nil {
		return nil, err
	}
	def, _ := ParseDecision(cfg.DefaultDecision)
	p := &Plugin{store: st, def: def, audit: cfg.Audit, cluster: cfg.Cluster, log: log, ak: cfg.AccessKey, sk: cfg.SecretKey}
	if cfg.InitUsername != "" {
		if _, ok := st.GetUser(cfg.InitUsername); !ok {
			if err := st.CreateUser(User{Username: cfg.InitUsername, Password: cfg.InitPassword, UserType: Super}); err != nil {
				return nil, fmt.Errorf("acl2: init user: %w", err)
			}
			log.Info("acl2: init user created", "user", cfg.InitUsername)
		}
	}
	if cfg.MigrateFromV1 != "" {
		data, err := os.ReadFile(cfg.MigrateFromV1)
		if err != nil {
			return nil, fmt.Errorf("acl2: migrate_from_v1: %w", err)
		}
		rep, err := MigrateV1(st, data)
		if err != nil {
			return nil, fmt.Errorf("acl2: migrate_from_v1 %s: %w", cfg.MigrateFromV1, err)
		}
		log.Info("acl2: migrated from ACL 1.0", "file", cfg.MigrateFromV1, "users", rep.Created, "kept", rep.Skipped)
	}
	log.Info("acl2: users and policies loaded", "file", cfg.File, "users", len(st.ListUsers("")), "version", st.Version(),
		"default_decision", def, "audit", cfg.Audit)
	return p, nil
}

// Store returns the users and policies.
func (p *Plugin) Store() *Store { return p.store }

// Authenticate implements auth.Authenticator.
func (p *Plugin) Authenticate(_ context.Context, req auth.Request) (auth.Principal, error) {
	ak := req.ExtFields[acl.KeyAccessKey]
	if ak == "" {
		return auth.Principal{}, unauthenticated("No accessKey is configured")
	}
	u, ok := p.store.GetUser(ak)
	if !ok {
		return auth.Principal{}, unauthenticated("User:%s is not found.", ak)
	}
	if u.UserStatus == Disable {
		return auth.Principal{}, unauthenticated("User:%s is disabled.", ak)
	}
	if _, strict := req.ExtFields[acl.KeySignVersion]; strict {
		return auth.Principal{}, unauthenticated("check signature failed for User:%s: ACL 2.0 takes RocketMQ's signature, not Quiver's strict one", ak)
	}
	if !acl.VerifySignature([]byte(u.Password), req.ExtFields, req.Body) {
		return auth.Principal{}, unauthenticated("check signature failed for User:%s", ak)
	}
	return auth.Principal{AccessKey: ak, Admin: u.UserType == Super, Remote: req.RemoteAddr}, nil
}

// AuthenticateHMAC implements auth.HMACAuthenticator (RocketMQ 5 clients
// over gRPC): MAC must be HMAC-SHA1(password, Content).
func (p *Plugin) AuthenticateHMAC(_ context.Context, req auth.HMACRequest) (auth.Principal, error) {
	if req.AccessKey == "" {
		return auth.Principal{}, unauthenticated("No accessKey is configured")
	}
	u, ok := p.store.GetUser(req.AccessKey)
	if !ok {
		return auth.Principal{}, unauthenticated("User:%s is not found.", req.AccessKey)
	}
	if u.UserStatus == Disable {
		return auth.Principal{}, unauthenticated("User:%s is disabled.", req.AccessKey)
	}
	if len(req.MAC) == 0 || !hmacEqual(req.MAC, []byte(u.Password), req.Content) {
		return auth.Principal{}, unauthenticated("check signature failed for User:%s", req.AccessKey)
	}
	return auth.Principal{AccessKey: req.AccessKey, Admin: u.UserType == Super, Remote: req.RemoteAddr}, nil
}

// Authorize implements auth.Authorizer (the gRPC endpoint's checks): a
// group (or a %RETRY% name) is Group:<name>, else Topic:<name>; Pub, Sub,
// Any (Pub or Sub); Admin is Update on the cluster.
func (p *Plugin) Authorize(ctx context.Context, pr auth.Principal, res auth.Resource, act auth.Action) error {
	if pr.Trusted {
		return nil
	}
	n := need{}
	switch act {
	case auth.Admin:
		n = need{res: p.clusterRes(), acts: []Action{Update}}
	default:
		n.res = resourceOf(res)
		n.acts = actionsOf(act)
	}
	return p.decide(ctx, pr, 0, []need{n})
}

// Check implements auth.Checker: Authenticate, then every need of the
// request's code (needs.go).
func (p *Plugin) Check(ctx context.Context, req auth.Request) (auth.Principal, error) {
	pr, err := p.Authenticate(ctx, req)
	if err != nil {
		p.auditRefusal(ctx, req, err)
		return pr, err
	}
	needs, err := p.needs(ctx, req)
	if err != nil {
		p.auditRefusal(ctx, req, err)
		return pr, err
	}
	return pr, p.decide(ctx, pr, req.Code, needs)
}

// decide checks every need; the first refusal is the error.
func (p *Plugin) decide(ctx context.Context, pr auth.Principal, code int32, needs []need) error {
	src := sourceAddr(pr.Remote)
	st := p.store.load()
	for _, n := range needs {
		res := st.decide(Request{User: pr.AccessKey, Resource: n.res, Actions: n.acts, Source: src}, p.def)
		p.auditDecision(ctx, pr, code, n, res)
		if !res.Allowed {
			return denied("%s", res.Reason)
		}
	}
	return nil
}

func (p *Plugin) auditDecision(ctx context.Context, pr auth.Principal, code int32, n need, r Result) {
	if p.audit == AuditOff || (p.audit == AuditDeny && r.Allowed) {
		return
	}
	level, decision := slog.LevelInfo, string(Allow)
	if !r.Allowed {
		level, decision = slog.LevelWarn, string(Deny)
	}
	acts := make([]string, len(n.acts))
	for i, a := range n.acts {
		acts[i] = string(a)
	}
	p.log.LogAttrs(ctx, level, "acl2: authorization", slog.Bool("audit", true), slog.String("user", pr.AccessKey),
		slog.Int("code", int(code)), slog.String("request", codeName(code)), slog.String("resource", n.res.Key()),
		slog.String("actions", strings.Join(acts, ",")), slog.String("source", pr.Remote),
		slog.String("decision", decision), slog.String("entry", r.Entry), slog.String("reason", r.Reason))
}

func (p *Plugin) auditRefusal(ctx context.Context, req auth.Request, err error) {
	if p.audit == AuditOff {
		return
	}
	p.log.LogAttrs(ctx, slog.LevelWarn, "acl2: authorization", slog.Bool("audit", true), slog.String("user", req.ExtFields[acl.KeyAccessKey]),
		slog.Int("code", int(req.Code)), slog.String("request", codeName(req.Code)), slog.String("source", req.RemoteAddr),
		slog.String("decision", string(Deny)), slog.String("reason", err.Error()))
}

func codeName(code int32) string {
	if code == 0 {
		return "grpc"
	}
	return remoting.RequestCodeName(code)
}

func sourceAddr(remote string) netip.Addr {
	if remote == "" {
		return netip.Addr{}
	}
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap()
	}
	if a, err := netip.ParseAddr(remote); err == nil {
		return a.Unmap()
	}
	return netip.Addr{}
}

// Provider is the descriptor registered with the kernel.
type Provider = auth.Descriptor[Config]

// NewProvider returns the provider.
func NewProvider() *Provider {
	return auth.Define(ID, NewConfig, func(_ context.Context, c *Config, deps auth.Deps) (auth.Authenticator, auth.Authorizer, error) {
		if deps.Logger != nil {
			deps.Logger = deps.Logger.With("component", "auth."+ID)
		}
		p, err := New(c, deps)
		if err != nil {
			return nil, nil, err
		}
		return p, p, nil
	})
}
