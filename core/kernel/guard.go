package kernel

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"

	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

// Guard is what servers need from the enabled auth plugins: interceptors
// that check every request before its processor runs, and a signer for the
// process's own outgoing requests. The zero Guard lets everything through.
type Guard struct {
	Interceptors []remoting.Interceptor
	signers      []auth.Signer
	// namesrv are the interceptors of the plugins whose <id>.namesrv_enabled
	// is true: the name server checks only those (a 4.9 name server
	// checks nothing, so it is an explicit opt-in).
	namesrv []remoting.Interceptor
	authns  []auth.Authenticator
	authzs  []auth.Authorizer // authzs[i] is authns[i]'s plugin's
	// local is the process's own cluster credential (guard_cluster.go),
	// made when a plugin is enabled; lookup reads stored messages
	// (UseStore); servesNamesrv is set once a name server's router is
	// guarded (the broker of mq dev then needs no configured credential).
	local         *localCredential
	lookup        lookupHolder
	servesNamesrv atomic.Bool
	// filters narrow answers (auth.AnswerFilter), of all plugins and of
	// those enabled for name servers.
	filters, namesrvFilters []auth.AnswerFilter
}

// NamesrvKey is the per-plugin key (auth.acl.namesrv_enabled) that makes the
// name server check requests with the plugin too. On a broker it says that
// the name servers it registers with check: it must then be able to sign.
const NamesrvKey = "namesrv_enabled"

// ApplyNamesrv installs on a name server's router the interceptors of the
// plugins enabled for the name server (NamesrvKey).
func (g *Guard) ApplyNamesrv(r *remoting.Router) {
	if g == nil {
		return
	}
	g.servesNamesrv.Store(true)
	for _, ic := range g.namesrv {
		r.Use(ic)
	}
	g.useFilters(r, g.namesrvFilters) // guard_cluster.go
}

// NamesrvChecked reports whether some plugin is enabled for name servers.
func (g *Guard) NamesrvChecked() bool { return g != nil && len(g.namesrv) > 0 }

// CanSign reports whether some plugin has credentials to sign this
// process's own requests.
func (g *Guard) CanSign() bool {
	if g == nil {
		return false
	}
	if g.local != nil && g.servesNamesrv.Load() {
		return true // the name server beside it takes the local credential
	}
	for _, s := range g.signers {
		if s.SignRequest(map[string]string{}, nil) {
			return true
		}
	}
	return false
}

// Authenticators lists the enabled plugins' authenticators, for modules
// that look for optional interfaces (auth.AccountAdmin) by type assertion.
func (g *Guard) Authenticators() []auth.Authenticator {
	if g == nil {
		return nil
	}
	return g.authns
}

// Authorizers lists the enabled plugins' authorizers, in the order of
// Authenticators, for endpoints that check requests themselves (the gRPC
// endpoint for RocketMQ 5 clients).
func (g *Guard) Authorizers() []auth.Authorizer {
	if g == nil {
		return nil
	}
	return g.authzs
}

// Sign signs req with the first plugin that has credentials. A plugin that
// implements auth.RequestSigner signs the request code too.
func (g *Guard) Sign(req *remoting.Command) {
	if g == nil {
		return
	}
	if req.ExtFields == nil {
		req.ExtFields = map[string]string{}
	}
	if g.local != nil {
		g.local.sign(req) // before the plugins', whose signatures then cover it
	}
	for _, s := range g.signers {
		if rs, ok := s.(auth.RequestSigner); ok {
			if rs.SignCode(req.Code, req.ExtFields, req.Body) {
				return
			}
			continue
		}
		if s.SignRequest(req.ExtFields, req.Body) {
			return
		}
	}
}

// Apply installs the interceptors on a router.
func (g *Guard) Apply(r *remoting.Router) {
	if g == nil {
		return
	}
	for _, ic := range g.Interceptors {
		r.Use(ic)
	}
	g.useFilters(r, g.filters)
}

// NewGuard opens the auth plugins the plan enabled (Plan.Auth) and logs
// the plan's notices (once per process: every process builds a guard).
// Plugins are closed on stop.
func NewGuard(lc fx.Lifecycle, p *Plan, log *slog.Logger) (*Guard, error) {
	for _, n := range p.Notices {
		log.Info(n)
	}
	return openGuard(lc, p.Auth, log)
}

// openGuard opens the enabled auth plugins, in order.
func openGuard(lc fx.Lifecycle, plugins []AuthSettings, log *slog.Logger) (*Guard, error) {
	g := &Guard{}
	for _, as := range plugins {
		p := as.Provider
		id := p.ID()
		an, az, err := p.Open(context.Background(), as.Config, auth.Deps{Logger: log})
		if err != nil {
			return nil, fmt.Errorf("auth %s: %w", id, err)
		}
		for _, v := range []any{an, az} {
			if c, ok := v.(io.Closer); ok {
				lc.Append(fx.StopHook(c.Close))
				break
			}
		}
		if an == nil || az == nil {
			return nil, fmt.Errorf("auth %s: Open returned no Authenticator or no Authorizer", id)
		}
		// The declared interfaces are enough; the optional ones (package
		// core/auth, "Authorization by the guard") take over when offered.
		var ic remoting.Interceptor
		switch x := an.(type) {
		case auth.Checker:
			ic = g.checkerInterceptor(x) // guard_cluster.go
		case interceptorProvider:
			ic = x.Interceptor()
		default:
			ic = g.declaredInterceptor(an, az) // guard_needs.go
		}
		g.Interceptors = append(g.Interceptors, ic)
		f, _ := an.(auth.AnswerFilter)
		if f != nil {
			g.filters = append(g.filters, f)
		}
		if as.Namesrv {
			g.namesrv = append(g.namesrv, ic)
			if f != nil {
				g.namesrvFilters = append(g.namesrvFilters, f)
			}
		}
		g.authns = append(g.authns, an)
		g.authzs = append(g.authzs, az)
		if s, ok := an.(auth.Signer); ok {
			g.signers = append(g.signers, s)
		}
		log.Info("auth plugin enabled", "plugin", id)
	}
	if len(g.Interceptors) > 0 {
		local, err := newLocalCredential()
		if err != nil {
			return nil, err
		}
		g.local = local
	}
	return g, nil
}

// interceptorProvider is the optional interface of an auth plugin that
// checks requests itself, as a remoting interceptor (see package core/auth,
// "Authorization by the guard"). It is declared here rather than in
// core/auth, which does not import core/remoting.
type interceptorProvider interface {
	Interceptor() remoting.Interceptor
}

func truthy(s string) bool { return s == "true" || s == "1" || s == "yes" || s == "on" }
